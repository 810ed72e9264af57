"""HTTP routes: parse and check the request, call ``Arena``, shape the answer.

Each view is declared with ``@operation(...)``: the request schemas it loads (so bad input
becomes a validation problem before the view runs), the one success schema, the errors
it can answer with, and whether it needs a token. ``service.http.openapi`` reads the same
declarations to write ``openapi.yaml``, so the contract cannot drift from the code.
"""

from __future__ import annotations

import functools
import hmac
import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from flask import Blueprint, Response, current_app, g, request
from marshmallow import Schema, ValidationError

from service.arena import house
from service.arena import tournament_control as control
from service.arena.callbacks import Callbacks
from service.arena.export import csv_table
from service.arena.fanout import direct_socket
from service.arena.games import Arena, dumps
from service.arena.problems import Problem
from service.arena.tournaments import MAX_GAMES, Tournaments
from service.http import callback_schemas as cs
from service.http import connections, limits, quotas
from service.http.schemas import bots as sb
from service.http.schemas import common as sc
from service.http.schemas import games as sg
from service.http.schemas import house as sh
from service.http.schemas import record as sr
from service.http.schemas import tournaments as st

bp = Blueprint("api", __name__)

BEARER = "bearer"
# How deeply a request body may nest arrays and objects (no body of this API needs more
# than 3). Checked before parsing: the standard parser recurses per level, and a body
# of 8,000 ``[`` ended in RecursionError (a 500). openapi.py states the limit.
JSON_MAX_DEPTH = 32
# The largest request body (the default of the app's MAX_CONTENT_LENGTH); the largest
# real body (a tournament of 64 entrants) is under 2 KB.
MAX_BODY_BYTES = 16 * 1024
_ID = re.compile(sc.ID_PATTERN)
_JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*+"|[\[\]{}]', re.DOTALL)


@dataclass
class Operation:
    """What ``openapi.py`` needs to document one view, and what the wrapper enforces."""

    summary: str
    description: str = ""
    tags: tuple[str, ...] = ()
    body: type[Schema] | None = None
    body_required: bool = True
    query: type[Schema] | None = None
    response: type[Schema] | None = None
    status: int = 200
    content_type: str = "application/json"
    # other media types the success answer may come in (media type -> what it holds),
    # documented beside ``content_type`` and admitted by ``negotiate``; the body is text
    also: dict[str, str] = field(default_factory=dict)
    auth: str | None = None  # "required", "optional", "admin" or None
    errors: tuple[int, ...] = ()
    headers_in: tuple[dict[str, Any], ...] = ()
    response_headers: dict[str, Any] = field(default_factory=dict)
    example: dict[str, Any] | None = None
    path_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    limited: bool = True  # counted against the caller's request budget (``limits``)
    # OpenAPI links from the success answer to the operations that use what it names
    # (name -> ``link(...)``): generated clients and stateful testers follow them
    links: dict[str, dict[str, Any]] = field(default_factory=dict)
    # other answers than the success and the errors (status -> OpenAPI response object,
    # its schema a Schema class): a 202 while something is computed, a 304
    more: dict[int, dict[str, Any]] = field(default_factory=dict)


def link(operation_id: str, description: str, **parameters: Any) -> dict[str, Any]:
    """An OpenAPI link: ``operation_id`` (as ``service.http.openapi`` names operations) with
    each parameter a value or a runtime expression such as ``$response.body#/id``."""
    return {"operationId": operation_id, "parameters": parameters,
            "description": description}


def operation(**kw: Any) -> Callable[[Callable[..., Response]], Callable[..., Response]]:
    """Declare a view's contract; load ``body``/``query`` and the caller's bot into kwargs."""
    op = Operation(**kw)
    body_schema = op.body() if op.body else None
    query_schema = op.query() if op.query else None
    # path parameters that are ids: checked before they become part of a Redis key
    # (``/bots/{id}:turns`` once named the bot's turn set: a type error and a 503)
    ids = tuple(name for name, spec in op.path_params.items()
                if spec["schema"].get("pattern") == sc.ID_PATTERN)

    def wrap(view: Callable[..., Response]) -> Callable[..., Response]:
        @functools.wraps(view)
        def inner(**kwargs: Any) -> Response:
            negotiate(op)
            for name in ids:
                if not _ID.fullmatch(kwargs[name]):
                    raise Problem("not-found")
            # No auth: Authorization is ignored entirely (not even looked up), so a
            # client that sends its token everywhere reads what anyone may read.
            bot_id = None
            if op.auth == "admin":
                authenticate_admin()
            elif op.auth is not None:
                bot_id = kwargs["bot_id"] = authenticate(op.auth)
            # a stream or a long-poll takes its caller's slots first (``connections.admit``):
            # refusing one costs no budget count and no parsing
            held = connections.admit(request.endpoint, bot_id, request.args,
                                     limits.client_address())
            try:
                if op.limited:  # after auth: the budget is the bot's, not its token string's
                    limits.count_request(
                        f"b{bot_id}" if bot_id else f"a{limits.client_address()}")
                if query_schema is not None:
                    kwargs["query"] = load(query_schema, request.args.to_dict(), "query")
                if body_schema is not None:
                    kwargs["body"] = load(body_schema, read_json(op.body_required), "body")
                resp = view(**kwargs)
            except BaseException:
                if held is not None:
                    held.release()
                raise
            return held.attach(resp) if held is not None else resp

        inner.operation = op  # type: ignore[attr-defined]
        return inner

    return wrap


# What an operation may answer with besides its own success type: problems, and the pages
# that ``web._negotiate`` serves browsers at the game's and the tournament's URL.
_ERRORS_AND_JSON = ("application/json", "application/problem+json")
_PAGES = frozenset({"api.get_game", "api.get_tournament", "api.get_bot"})


def negotiate(op: Operation) -> None:
    """406 when ``Accept`` admits nothing this operation can answer with (its success type,
    JSON, a problem; the HTML page where one is served); 415 when a body comes with a
    Content-Type that is not JSON (``application/json`` or any ``+json``). No Accept
    admits everything, and an empty body needs no Content-Type."""
    if request.headers.get("Accept", "").strip():
        offers = [op.content_type, *op.also, *_ERRORS_AND_JSON]
        if request.endpoint in _PAGES:
            offers.append("text/html")
        if request.accept_mimetypes.best_match(offers) is None:
            raise Problem("not-acceptable",
                          f"this answers with {', '.join(dict.fromkeys(offers))}")
    if op.body is not None and request.content_length != 0:
        mimetype = request.mimetype
        if not (mimetype == "application/json" or mimetype.endswith("+json")) and \
                request.get_data(cache=True).strip():
            raise Problem("unsupported-media-type",
                          f"send the body as application/json, not {mimetype or 'untyped'}")


def read_json(required: bool) -> Any:
    """The request body as JSON; an empty body is ``{}`` where a body is optional."""
    limit = current_app.config.get("MAX_CONTENT_LENGTH")
    if limit is not None and request.content_length is None:
        # A body without Content-Length (chunked) is read only up to the limit, and
        # werkzeug hands back what it read without saying whether more followed: read
        # one byte beyond the limit, so a longer body is a 413, not truncated JSON.
        request.max_content_length = limit + 1
    raw = request.get_data(cache=True)
    if limit is not None and len(raw) > limit:
        raise Problem("payload-too-large", f"the body is larger than {limit} bytes")
    if not raw.strip():
        if required:
            raise Problem("validation", "a JSON body is required",
                          errors={"_body": ["a JSON object is required"]})
        return {}
    # counting brackets is free; only a body with many of them is scanned for its depth
    if raw.count(b"[") + raw.count(b"{") > JSON_MAX_DEPTH and json_depth(raw) > JSON_MAX_DEPTH:
        raise Problem("malformed-json",
                      f"the body is nested deeper than {JSON_MAX_DEPTH} levels")
    try:
        return json.loads(raw)
    except RecursionError:  # a backstop: the depth check above comes first
        raise Problem("malformed-json",
                      f"the body is nested deeper than {JSON_MAX_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError):
        raise Problem("malformed-json", "the body is not valid JSON") from None


def json_depth(raw: bytes) -> int:
    """The deepest nesting of arrays and objects in ``raw``, brackets inside strings not
    counted; iterative, so any depth is measured without recursion."""
    depth = deepest = 0
    for m in _JSON_TOKEN.finditer(raw):
        c = m.group()
        if c in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        elif c in (b"]", b"}"):
            depth -= 1
    return deepest


def load(schema: Schema, data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise Problem("validation", f"the {where} must be a JSON object",
                      errors={"_schema": ["must be a JSON object"]})
    try:
        return schema.load(data)
    except ValidationError as exc:
        fields_ = ", ".join(sorted(str(k) for k in exc.messages_dict))
        raise Problem("validation", f"invalid {where}: {fields_}",
                      errors=exc.messages_dict) from None


def authenticate(mode: str | None) -> str | None:
    """The bot behind the bearer token, for operations that take one ("required" or
    "optional"). Where it is optional, a token that is present must still be valid: a
    bot with a typo in its token should hear so, not be quietly shown the spectator
    view. Operations without auth never call this."""
    header = request.headers.get("Authorization")
    if not header:
        if mode == "required":
            raise Problem("unauthorized", "send Authorization: Bearer <token>")
        return None
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > 200:
        raise Problem("unauthorized", "the Authorization header must be 'Bearer <token>'")
    bot_id = limits.bot_for_token(token)
    if bot_id is None:
        raise Problem("unauthorized", "unknown token")
    g.bot_id = bot_id
    if request.endpoint != "api.get_me" and arena().owners.is_suspended(bot_id):
        reason = arena().owners.suspension(bot_id) or "suspended by the operator"
        raise Problem("suspended", f"this bot is suspended: {reason}")
    return bot_id


def authenticate_admin() -> None:
    """Only ``Authorization: Bearer <ARENA_ADMIN_TOKEN>`` passes: no header is 401, any
    other token (a bot's included) 403. Compared in constant time (``hmac.compare_digest``)
    so the response time says nothing about how much of a guess was right. With no admin
    token configured, nobody is admin. Each attempt is counted per client address and
    network before it is compared (``limits.admin_attempt``): past
    ``ARENA_ADMIN_FAILURE_LIMIT`` (or the network's limit) it is refused (429) without a
    comparison, however many arrive at once."""
    header = request.headers.get("Authorization")
    if not header:
        raise Problem("unauthorized", "send Authorization: Bearer <admin token>")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > 200:
        raise Problem("unauthorized", "the Authorization header must be 'Bearer <token>'")
    expected = current_app.config.get("ARENA_ADMIN_TOKEN") or ""
    if not limits.admin_attempt(lambda: bool(expected) and hmac.compare_digest(
            token.encode(), expected.encode())):
        raise Problem("forbidden", "this needs the service's admin token")


def tournaments() -> Tournaments:
    return current_app.extensions["tournaments"]


def arena() -> Arena:
    return current_app.extensions["arena"]


def callbacks() -> Callbacks:
    return current_app.extensions["callbacks"]


def respond(schema: Schema | None, data: Any, status: int = 200,
            headers: dict[str, str] | None = None) -> Response:
    body = dumps(schema.dump(data) if schema is not None else data)
    resp = Response(body, status=status, mimetype="application/json")
    for k, v in (headers or {}).items():
        resp.headers[k] = v
    return resp


def view_response(text: str, version: int, status: int = 200) -> Response:
    resp = Response(text, status=status, mimetype="application/json")
    resp.headers["ETag"] = f'"{version}"'
    return resp


# The operations whose answers can hold a seat's own cards (a seat's view, a turn, a
# record while the game is live, an action's answer: fresh, replayed from the retry memory
# or after ``?wait``, a seat's event stream). Each answer of theirs (errors too: one rule,
# nothing to get wrong per view) says ``Cache-Control: no-store`` (no cache, shared or
# private, keeps a hand) and ``Vary: Authorization`` (what it holds depends on the token).
SEAT_ANSWERS = frozenset({"api.get_game", "api.join", "api.act", "api.turn", "api.record",
                          "api.events"})


@bp.after_request
def _seat_answers_are_private(resp: Response) -> Response:
    """``SEAT_ANSWERS`` are never stored by a cache; the HTML page a browser gets at a
    game's URL (``pages``, a shell without cards) keeps its own caching."""
    if request.endpoint in SEAT_ANSWERS and resp.mimetype != "text/html":
        resp.headers["Cache-Control"] = "no-store"
        resp.vary.add("Authorization")
    return resp


TOURNAMENT_ID = {"schema": {"type": "string", "pattern": sc.ID_PATTERN},
                 "description": "tournament id"}
GAME_ID = {"schema": {"type": "string", "pattern": sc.ID_PATTERN}, "description": "game id"}
BOT_ID = {"schema": {"type": "string", "pattern": sc.ID_PATTERN}, "description": "bot id"}
SEAT = {"schema": {"type": "integer", "minimum": 0, "maximum": 3}, "description": "seat"}
ETAG = {"ETag": {"description": "the game's version, quoted", "schema": {"type": "string"}}}
REPLAYED = {"Idempotent-Replayed": {
    "description": "`true` on the answer to a retry of an action already applied (same "
    "`Idempotency-Key` and request): nothing was applied this time. Absent on an answer "
    "that applied the action",
    "schema": {"type": "string", "enum": ["true"]}}}
SERVER_TIMING = {"Server-Timing": {
    "description": "with `wait` > 0, when the action applied: `act;dur=<ms from the request "
    "to the commit>, wait;dur=<ms waited after it>` (W3C Server Timing)",
    "schema": {"type": "string"}}}
IF_MATCH_RE = r'^((W/)?"[0-9]{1,10}"|[0-9]{1,10})$'
# The one text on retries: the ``Idempotency-Key`` header's description and the act
# operation's in openapi.yaml, and docs/bots.md's "Idempotency" section, word for word
# (tests/service/test_idempotency.py checks all three), so they cannot disagree.
IDEMPOTENCY_TEXT = (
    "Send every action with an `Idempotency-Key` (1 to 100 characters, new for each "
    "decision, e.g. `move-<version>`), and when its answer is lost (a timeout, a dropped "
    "connection) send the same request again, with the same key:\n\n"
    "- A retry of your bot's last keyed action in this game (same key, body, `version` "
    "and `If-Match`) is never applied twice. It answers `200` with `Idempotent-Replayed: "
    "true`: the action was applied, once (a `200` without that header applied it just "
    "now: the first try never arrived).\n"
    "- Without `?wait`, the body is the first answer's: the view right after the action "
    "(its `version`, the seat that acted), byte for byte but `time_left`, counted again "
    "from the same `deadline`.\n"
    "- With `?wait=N`, the retry waits as the first request did, from the game as it is "
    "now: it answers with the view when it is your bot's turn at any seat it holds (at "
    "once if it is already; `seat` says which), when the game is over, or after N seconds "
    "with the game as it is then (the view right after the action if nothing has moved). "
    "A retry needs no code of its own.\n"
    "- The service keeps one key per bot and game: the bot's latest keyed action there, "
    "whichever seat it was for. Once a newer keyed action of the bot has applied in the "
    "game, an older key is forgotten and is a new request: send `version` with every "
    "action, so that a late duplicate is refused (`409 version-conflict`), never "
    "applied.\n"
    "- The remembered key with another body, `version` or `If-Match` is `422 "
    "idempotency-key-reused`, and nothing is applied. The same key in another game is "
    "another request there.\n"
    "- Only an applied action is remembered: a refused one (`409`, `412`, `422`) changed "
    "nothing and is judged afresh when sent again.\n"
    "- The key is kept while the game is live and `ARENA_RETRY_GRACE` seconds (600 by "
    "default) after it ends. After that a retry of the game's last move still gets its "
    "answer (the final view, with `Idempotent-Replayed`); any other action on the "
    "finished game is refused."
)
IDEMPOTENCY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": IDEMPOTENCY_TEXT,
    "schema": {"type": "string", "minLength": 1, "maxLength": 100},
}
IF_MATCH = {
    "name": "If-Match",
    "in": "header",
    "required": False,
    "description": "the version the action was decided on: the view's ETag (`\"12\"`), "
    "weak (`W/\"12\"`) or bare (`12`); 412 `precondition-failed` (with `current_version`) "
    "if the game is at another version",
    "schema": {"type": "string", "pattern": IF_MATCH_RE},
}
LAST_EVENT_ID = {
    "name": "Last-Event-ID",
    "in": "header",
    "required": False,
    "description": "resume after this event: " + sc.EVENT_ID_DOC + ". Sent empty or in "
    "another shape: 422",
    "schema": {"type": "string", "pattern": sc.EVENT_ID_RE},
}

# From an answer that names a game (its ``id``) to what a player does with it next. No
# link to the event stream: it stays open until the game ends.
GAME_LINKS = {
    "GetGame": link("getGamesGameId", "the game", game_id="$response.body#/id"),
    "WaitForTurn": link("getGamesGameIdTurn", "wait for a turn in it",
                        game_id="$response.body#/id"),
    "Act": link("postGamesGameIdActions", "act in it", game_id="$response.body#/id"),
    "GetRecord": link("getGamesGameIdRecord", "its record", game_id="$response.body#/id"),
}

_SCHEMAS: dict[type[Schema], Schema] = {}


def sch(cls: type[Schema]) -> Schema:
    if cls not in _SCHEMAS:
        _SCHEMAS[cls] = cls()
    return _SCHEMAS[cls]


# --- health -------------------------------------------------------------------------------


@bp.get("/healthz")
@operation(summary="The process is up", tags=("health",), response=sc.Health, limited=False)
def healthz() -> Response:
    return respond(sch(sc.Health), {"status": "ok"})


@bp.get("/readyz")
@operation(summary="Redis is reachable", tags=("health",), response=sc.Health, limited=False)
def readyz() -> Response:
    arena().store.r.ping()
    return respond(sch(sc.Health), {"status": "ok"})


# --- bots ---------------------------------------------------------------------------------


@bp.post("/bots")
@operation(
    summary="Register a bot",
    description="Returns the bot and its bearer token. The token is shown only here. "
    "Every bot belongs to an owner (`owner`): sent with `Authorization: Bearer <token of "
    "one of your bots>`, the new bot joins that bot's owner (your bots seat each other at "
    "once, and are never matched or rated against each other); without a token it makes "
    "a new owner. How new owners are admitted is the operator's choice "
    "(`ARENA_OWNER_ADMISSION`): open (default), by an invitation code (`invitation`; "
    "403 `owner-admission` without a valid one), or closed (403 `owner-admission`). New "
    "owners are limited per client network (IPv4 /24, IPv6 /64; "
    "`ARENA_OWNERS_PER_NETWORK` an hour, default 20; then 429). A suspended bot's token "
    "registers nothing (403 `suspended`).",
    tags=("bots",),
    body=sb.BotCreate,
    response=sb.BotCreated,
    status=201,
    auth="optional",
    errors=(403,),
    example={"name": "random-bot"},
    links={"GetBot": link("getBotsBotId", "the bot just registered",
                          bot_id="$response.body#/id")},
)
def create_bot(bot_id: str | None, body: dict[str, Any]) -> Response:
    quotas.bot_registration()
    bot = arena().register_bot(body["name"], body.get("person", False), owner_bot=bot_id,
                               address=limits.client_address(),
                               invitation=body.get("invitation"))
    return respond(sch(sb.BotCreated), bot, 201, {"Location": f"/bots/{bot['id']}"})


@bp.get("/bots/me")
@operation(summary="The bot behind the token", description="With `callback`: your "
           "webhook URL and whether it is verified (null: none).", tags=("bots",),
           response=cs.BotMe, auth="required")
def get_me(bot_id: str) -> Response:
    return respond(sch(cs.BotMe), {**arena().bot(bot_id),
                                   "callback": callbacks().summary(bot_id)})


@bp.get("/bots/me/turns")
@operation(
    summary="Wait for any game where it is your turn",
    description="Long-poll: answers at once with the games where it is your turn (except "
    "those in `playing`), or waits (woken by Redis pub/sub, the moment a game becomes "
    "your turn) until there is one or `timeout` seconds pass. Every answer lists your "
    "pending `invitations` (games other owners' bots asked you to play: accept or "
    "decline each); a new one arriving during the wait ends it, and with "
    "`invitations_after` one newer than that answers at once.",
    tags=("bots",),
    query=sb.BotTurnsQuery,
    response=sb.BotTurns,
    auth="required",
)
def my_turns(bot_id: str, query: dict[str, Any]) -> Response:
    playing = frozenset(query["playing"].split(",")) if query.get("playing") else frozenset()
    # BotTurns' own shape already (``Invitations.out``): no per-field dump of up to 100
    # pending invitations on every poll
    return respond(None, arena().wait_turns(bot_id, query["timeout"], playing,
                                            query.get("invitations_after")))


@bp.get("/bots/<bot_id>")
@operation(summary="A bot", tags=("bots",), response=sb.Bot, errors=(404,),
           path_params={"bot_id": BOT_ID})
def get_bot(bot_id: str) -> Response:
    return respond(sch(sb.Bot), arena().bot(bot_id))


# --- games --------------------------------------------------------------------------------


@bp.post("/games")
@operation(
    summary="Create a game",
    description="2 or 4 players, an optional seed and house rules, and which seats are taken "
    "by which bots (null: open). By default the creator takes seat 0. Consent: bots of "
    "your own owner (and the house bots, within `ARENA_HOUSE_GAMES_PER_CHALLENGER` games "
    "an hour per owner) sit down at once; every other named bot is invited (`invited`), "
    "and the game waits until each has accepted. A bot whose policy refuses you is a "
    "403 `invitation-refused`; one with too many pending invitations a 429.",
    tags=("games",),
    body=sg.GameCreate,
    response=sg.GameSummary,
    status=201,
    auth="required",
    errors=(403, 404),
    example={"players": 4, "seed": 7, "variants": {"target": 14}},
    links={
        **GAME_LINKS,
        "JoinSeat1": link("postGamesGameIdSeatsSeat", "take seat 1 (open unless given)",
                          game_id="$response.body#/id", seat="1"),
    },
)
def create_game(bot_id: str, body: dict[str, Any]) -> Response:
    quotas.game_creation(bot_id)
    game = arena().create_game(bot_id, body)
    return respond(sch(sg.GameSummary), game, 201, {"Location": f"/games/{game['id']}"})


@bp.get("/games")
@operation(summary="List games, newest first", tags=("games",), query=sg.ListQuery,
           response=sg.GameList)
def list_games(query: dict[str, Any]) -> Response:
    page = arena().list_games(query.get("status"), query["limit"], query.get("cursor"))
    return respond(sch(sg.GameList), page)


@bp.get("/games/<game_id>")
@operation(
    summary="A game as you may see it",
    description="With the token of a bot seated here: that seat's view (with its hand, and "
    "the legal actions on its turn). Without: the spectator view.",
    tags=("games",),
    query=sg.GameQuery,
    response=sg.View,
    auth="optional",
    errors=(403, 404),
    response_headers=ETAG,
    path_params={"game_id": GAME_ID},
)
def get_game(game_id: str, bot_id: str | None, query: dict[str, Any]) -> Response:
    a = arena()
    game = a.get(game_id)
    view = callbacks().with_failure(a.view(game, bot_id, query.get("seat")), bot_id)
    return view_response(dumps(view), game.version)


@bp.post("/games/<game_id>/seats/<int:seat>")
@operation(
    summary="Join an open seat",
    tags=("games",),
    body=sc.Empty,
    body_required=False,
    response=sg.View,
    auth="required",
    errors=(404, 409),
    response_headers=ETAG,
    path_params={"game_id": GAME_ID, "seat": SEAT},
    links=GAME_LINKS,
)
def join(game_id: str, seat: int, bot_id: str, body: dict[str, Any]) -> Response:
    view = arena().join(game_id, seat, bot_id)
    return view_response(dumps(view), view["version"])


@bp.post("/games/<game_id>/actions")
@operation(
    summary="Act: stand, beg, give one, run the pack, or play a card",
    description="The seat in turn acts; the answer is its new view. Send `Idempotency-Key` "
    "to retry safely, and `version` (or `If-Match`) to refuse the action if the game "
    "has moved on. Errors name the rule (R1–R23) and never a hidden card.\n\n"
    "With `?wait=N` the same request also waits for your next turn: the service applies "
    "the action, then answers when it is your turn again, the game is over, or N seconds "
    "have passed — one request per move instead of an action and a long-poll. The answer "
    "is always a view of the same shape (`your_turn` says whether it is your move; a "
    "timed-out answer shows the game as it is then). \"Your turn\" is the turn of any seat "
    "your bot holds in the game, whichever `seat` the action was for: a bot holding both "
    "seats of a team is answered when its partner seat comes into turn, with that seat's "
    "view (`seat` says which).\n\n"
    "**Retries.** " + IDEMPOTENCY_TEXT,
    tags=("games",),
    query=sg.ActQuery,
    body=sg.ActionIn,
    response=sg.View,
    auth="required",
    errors=(403, 404, 409, 412),
    headers_in=(IDEMPOTENCY, IF_MATCH),
    response_headers={**ETAG, **REPLAYED, **SERVER_TIMING},
    example={"action": "AS", "version": 12},
    path_params={"game_id": GAME_ID},
)
def act(game_id: str, bot_id: str, query: dict[str, Any], body: dict[str, Any]) -> Response:
    started = time.perf_counter()
    idem = request.headers.get("Idempotency-Key")
    if idem is not None and not (0 < len(idem) <= 100):
        raise Problem("validation", "Idempotency-Key must be 1 to 100 characters",
                      errors={"Idempotency-Key": ["must be 1 to 100 characters"]})
    if_match = _if_match(request.headers.get("If-Match"))
    timing: dict[str, float] = {}
    view = arena().act(game_id, bot_id, body, if_match, idem, query["wait"], timing)
    resp = view_response(dumps(view), view["version"])
    if "replayed" in timing:
        resp.headers["Idempotent-Replayed"] = "true"
    if query["wait"] > 0 and "committed" in timing:
        done = time.perf_counter()
        act_ms = (timing["committed"] - started) * 1000
        wait_ms = (done - timing["committed"]) * 1000
        resp.headers["Server-Timing"] = f"act;dur={act_ms:.2f}, wait;dur={wait_ms:.2f}"
    return resp


def _if_match(raw: str | None) -> int | None:
    if raw is None:
        return None
    if not re.match(IF_MATCH_RE, raw):
        raise Problem("validation", "If-Match must be a game version such as \"12\"",
                      errors={"If-Match": ["must be a version number"]})
    return int(raw.removeprefix("W/").strip('"'))


@bp.get("/games/<game_id>/turn")
@operation(
    summary="Wait for your turn (long-poll)",
    description="Answers at once if it is your turn, the game is over, or its version is "
    "greater than `after`; otherwise waits (woken by Redis pub/sub) until one of those "
    "happens or `timeout` seconds (at most 30) pass. Without a seat: waits for any change.",
    tags=("games",),
    query=sg.TurnQuery,
    response=sg.TurnAnswer,
    auth="optional",
    errors=(403, 404),
    path_params={"game_id": GAME_ID},
)
def turn(game_id: str, bot_id: str | None, query: dict[str, Any]) -> Response:
    answer = arena().wait_turn(game_id, bot_id, query.get("seat"), query.get("after"),
                               query["timeout"])
    # TurnAnswer's own shape: the view is built in View's shape already (``view_of``)
    return respond(None, {"timed_out": answer["timed_out"], "view": answer["view"]})


@bp.get("/games/<game_id>/events")
@operation(
    summary="The game's events as server-sent events",
    description="Every event has an id `ply.index` and a type (`event:`), and is redacted for "
    "the viewer (a seat sees only its own cards). Reconnect with `Last-Event-ID` to resume "
    "exactly; a `: keep-alive` comment comes every 5 s; the stream ends after game_over.",
    tags=("games",),
    query=sg.EventsQuery,
    response=None,
    content_type="text/event-stream",
    auth="optional",
    errors=(403, 404),
    headers_in=(LAST_EVENT_ID,),
    path_params={"game_id": GAME_ID},
)
def events(game_id: str, bot_id: str | None, query: dict[str, Any]) -> Response:
    last = request.headers.get("Last-Event-ID")
    if last is None:
        last = query.get("last_event_id")
    if last is not None and not re.match(sc.EVENT_ID_RE, last):
        raise Problem("validation", "Last-Event-ID must look like 12.3",
                      errors={"Last-Event-ID": ["must be an event id such as 12.3"]})
    gen = arena().stream(game_id, bot_id, query.get("seat"), last,
                         direct_socket(request.environ))
    resp = Response(gen, mimetype="text/event-stream")  # no-store: ``SEAT_ANSWERS``
    resp.headers["X-Accel-Buffering"] = "no"
    return resp


@bp.get("/games/<game_id>/record")
@operation(
    summary="The game's record",
    description="Complete once the game is over; while it is live, only what the asking seat "
    "(or a spectator) may know.",
    tags=("games",),
    query=sg.GameQuery,
    response=sr.Record,
    auth="optional",
    errors=(403, 404),
    path_params={"game_id": GAME_ID},
)
def record(game_id: str, bot_id: str | None, query: dict[str, Any]) -> Response:
    return respond(sch(sr.Record), arena().record(game_id, bot_id, query.get("seat")))


# --- tournaments ----------------------------------------------------------------------------


@bp.post("/tournaments")
@operation(
    summary="Create a tournament (admin)",
    description="Round robin or Swiss over registered bots, 2- or 4-player games (in a "
    "4-player game each entrant holds both seats of its team), games per pairing, duplicate "
    "deals (each deal of a round played at every table of the round, by different entrants, "
    "results compared across tables; on by default from 4 entrants; `trusted` replays a "
    "deal with the teams swapped instead), house rules and a move time limit. The service "
    "creates the games itself as earlier ones finish; "
    "entrants find them through `GET /bots/me/turns`. Needs the admin token "
    f"(`ARENA_ADMIN_TOKEN`). At most {MAX_GAMES} games in all (pairings x rounds x "
    "games per pairing): more is a 422 naming the field that would bring it within the limit. "
    "A `seed` an earlier tournament used is refused, 409 `seed-reused` (its deals are "
    "public once that tournament is over), unless `trusted` (docs/ratings.md).",
    tags=("tournaments",),
    body=st.TournamentCreate,
    response=st.Tournament,
    status=201,
    auth="admin",
    errors=(403, 404, 409),
    example={"name": "weekly", "format": "round_robin",
             "entrants": ["3f9a1c2b7d10", "8e7d6c5b4a39", "0a1b2c3d4e5f", "7c6b5a493827"],
             "players": 2, "games_per_pairing": 2, "duplicate": True,
             "variants": {"target": 7}, "move_limit": 10},
    links={
        "GetTournament": link("getTournamentsTournamentId", "the tournament",
                              tournament_id="$response.body#/id"),
        "GetStandings": link("getTournamentsTournamentIdStandings", "its standings",
                             tournament_id="$response.body#/id"),
    },
)
def create_tournament(body: dict[str, Any]) -> Response:
    t = tournaments().create(body)
    return respond(sch(st.Tournament), t, 201, {"Location": f"/tournaments/{t['id']}"})


@bp.get("/tournaments")
@operation(summary="List tournaments, newest first", tags=("tournaments",),
           query=st.TournamentListQuery, response=st.TournamentList)
def list_tournaments(query: dict[str, Any]) -> Response:
    return respond(sch(st.TournamentList),
                   tournaments().list(query["limit"], query.get("cursor")))


@bp.get("/tournaments/<tournament_id>")
@operation(
    summary="A tournament: settings, status, rounds with their games and results",
    description="A game's seed (and the tournament's) is shown only once it is over: it "
    "fixes every card. A game of a duplicate deal shows its result and seed only once "
    "every table of the deal has finished.",
    tags=("tournaments",),
    response=st.Tournament,
    errors=(404,),
    path_params={"tournament_id": TOURNAMENT_ID},
)
def get_tournament(tournament_id: str) -> Response:
    return respond(sch(st.Tournament), tournaments().detail(tournament_id))


@bp.get("/tournaments/<tournament_id>/standings")
@operation(
    summary="Standings and ratings, with the rating history per round",
    description="Ranked by, in order (each a tiebreak of the ones before, higher first): "
    "1. match score (per pairing and round 1 for winning more of its games, then more "
    "points in them; 0.5 each if still level; 1 per bye); 2. matchpoints (duplicate deals "
    "compared across tables); 3. games won; 4. point difference (points for minus "
    "against); 5. rating ordinal (mu - 3 sigma); 6. bot id, ascending (the only key that "
    "cannot tie). "
    "Ratings are OpenSkill (Plackett-Luce), one per bot (in a 4-player game the two seats "
    "of an entrant are one player), shown as mu, sigma and ordinal = mu - 3 sigma. They "
    "take the games one at a time in slot order (whichever table finished first), each a "
    "win of one entrant over the other, so the same results always give the same "
    "ratings; `GET /tournaments/{id}` shows each game's place in that order (`recorded`) "
    "and both entrants' ratings before and after it (`rating`), enough to recompute "
    "every rating here.",
    tags=("tournaments",),
    response=st.Standings,
    errors=(404,),
    path_params={"tournament_id": TOURNAMENT_ID},
)
def get_standings(tournament_id: str) -> Response:
    return respond(sch(st.Standings), tournaments().standings(tournament_id))


EXPORT_DOC = (
    "One answer with the settings, the standings (as `/standings`), every game in slot order "
    "(as `GET /tournaments/{id}`, with its round and `record`, the path of its record) and "
    "the rating history per round. The duplicate-deal embargo holds as in "
    "`GET /tournaments/{id}`: while any table of a deal is live, its games show no seed and "
    "no result.")
CSV_DOC = (
    "One table of the export (`GET /tournaments/{tournament_id}/export`) as RFC 4180 CSV "
    "with a header row, chosen by `table`: `standings`, `games`, `ratings` or `bracket` "
    "(default `standings`); null is an empty cell, a per-team value two columns "
    "(`scores_0`, `scores_1`). Its own operation so that a generated client reads it as "
    "text. The embargo holds as in the JSON export.")


@bp.get("/tournaments/<tournament_id>/export")
@operation(
    summary="The whole tournament for archives: JSON",
    description=EXPORT_DOC + " CSV tables are `GET /tournaments/{tournament_id}/export.csv`; "
    "`?format=csv` here (kept for older clients) redirects there (307) with the same "
    "`table`, as does an Accept header that admits `application/json` but prefers "
    "`text/csv` (one that admits only `text/csv` is 406 here).",
    tags=("tournaments",),
    query=st.ExportQuery,
    response=st.TournamentExport,
    more={307: {"description": "`format=csv` (or an Accept header preferring text/csv): "
                "the same table at `/tournaments/{tournament_id}/export.csv`",
                "headers": {"Location": {"description": "the CSV export's path and query",
                                         "schema": {"type": "string"}}}}},
    errors=(404,),
    path_params={"tournament_id": TOURNAMENT_ID},
)
def export_tournament(tournament_id: str, query: dict[str, Any]) -> Response:
    fmt = query.get("format")
    if fmt is None and request.headers.get("Accept", "").strip():
        best = request.accept_mimetypes.best_match(["application/json", "text/csv"])
        fmt = "csv" if best == "text/csv" else "json"
    if fmt == "csv":
        table = query.get("table", "standings")
        resp = Response(status=307)
        resp.headers["Location"] = f"/tournaments/{tournament_id}/export.csv?table={table}"
        return resp
    return respond(None, sch(st.TournamentExport).dump(tournaments().export(tournament_id)))


@bp.get("/tournaments/<tournament_id>/export.csv")
@operation(
    summary="One table of the tournament for spreadsheets: CSV",
    description=CSV_DOC,
    tags=("tournaments",),
    query=st.ExportCsvQuery,
    content_type="text/csv",
    response_headers={"Content-Disposition": {
        "description": "`attachment; filename=\"tournament-<id>-<table>.csv\"`",
        "schema": {"type": "string"}}},
    errors=(404,),
    path_params={"tournament_id": TOURNAMENT_ID},
)
def export_tournament_csv(tournament_id: str, query: dict[str, Any]) -> Response:
    data = sch(st.TournamentExport).dump(tournaments().export(tournament_id))
    table = query.get("table", "standings")
    resp = Response(csv_table(data, table), mimetype="text/csv")
    resp.headers["Content-Disposition"] = \
        f'attachment; filename="tournament-{tournament_id}-{table}.csv"'
    return resp


STOP_DOC = ("A repeat is answered with the tournament as it is (safe to retry); a finished "
            "or cancelled tournament is 409 `tournament-over`.")


def organizer(summary: str, description: str, **differs: Any) -> dict[str, Any]:
    """The ``@operation`` keywords of a tournament's organizer operations (cancel, pause,
    resume, withdraw): each takes no body, answers the tournament and may be refused as
    403, 404 or 409, so a view states only its text and what ``differs`` (``auth``,
    more ``path_params``)."""
    return {"summary": summary, "description": description, "tags": ("tournaments",),
            "body": sc.Empty, "body_required": False, "response": st.Tournament,
            "auth": "admin", "errors": (403, 404, 409),
            "path_params": {"tournament_id": TOURNAMENT_ID}, **differs}


@bp.post("/tournaments/<tournament_id>/cancel")
@operation(**organizer(
    summary="Cancel a tournament (admin): live games are voided, nothing more is scheduled",
    description="Every live game ends at once, voided: the game is `finished` with no "
    "winner (a move on it is refused), its slot `void` with no result, counted nowhere "
    "(standings, matchpoints, ratings, leaderboard). Games not yet started become `void`. "
    "Games that had finished keep their results and ratings. The status becomes "
    "`cancelled`; the seed, and every game of a duplicate deal, become public like a "
    "finished tournament's. " + STOP_DOC,
))
def cancel_tournament(tournament_id: str, body: dict[str, Any]) -> Response:
    return respond(sch(st.Tournament), control.cancel(tournaments(), tournament_id))


@bp.post("/tournaments/<tournament_id>/pause")
@operation(**organizer(
    summary="Pause a tournament (admin): no new game starts until it is resumed",
    description="Games already live play on to their end with their move clocks running; "
    "their results are recorded. No game starts while the status is `paused`. " + STOP_DOC,
))
def pause_tournament(tournament_id: str, body: dict[str, Any]) -> Response:
    return respond(sch(st.Tournament), control.pause(tournaments(), tournament_id))


@bp.post("/tournaments/<tournament_id>/resume")
@operation(**organizer(
    summary="Resume a paused tournament (admin): games start again",
    description="Back to `running`: games start again, up to `parallel` at once. " + STOP_DOC,
))
def resume_tournament(tournament_id: str, body: dict[str, Any]) -> Response:
    return respond(sch(st.Tournament), control.resume(tournaments(), tournament_id))


@bp.post("/tournaments/<tournament_id>/entrants/<entrant_id>/withdraw")
@operation(**organizer(
    summary="Withdraw your bot from a tournament (the entrant's own token)",
    description="The entrant leaves the tournament (`withdrawn`): each of its live games "
    "ends at once and is forfeited, and so is every game of it not yet played. A forfeited "
    "game is won by the opponent (won, lost, played and the match score count it), adds no "
    "points, hands, timeouts or matchpoints to anyone, and is a rated loss for the entrant "
    "that left (tournament and leaderboard; docs/ratings.md). Games it finished before keep "
    "their results. The same happens to an "
    "entrant under the no-show rule (`no_show`) or disqualified after `max_timeouts`. "
    "Only the entrant's own token may withdraw it (403 `forbidden-entrant`); a repeat "
    "answers the tournament as it is; a finished or cancelled tournament is 409 "
    "`tournament-over`.",
    auth="required",
    path_params={"tournament_id": TOURNAMENT_ID,
                 "entrant_id": {**BOT_ID, "description": "the entrant's bot id"}},
))
def withdraw_entrant(tournament_id: str, entrant_id: str, bot_id: str,
                     body: dict[str, Any]) -> Response:
    return respond(sch(st.Tournament),
                   control.withdraw(tournaments(), tournament_id, entrant_id, bot_id))


@bp.get("/leaderboard")
@operation(
    summary="Ratings over every tournament game, best ordinal first",
    tags=("tournaments",),
    response=st.Leaderboard,
)
def leaderboard() -> Response:
    return respond(sch(st.Leaderboard), tournaments().leaderboard())


# --- house bots ------------------------------------------------------------------------------


@bp.post("/house/games")
@operation(
    summary="Play the house bots: one call seats you against the service's own bots",
    description="Creates a game with you in seat 0 and house bots (the built-in random, "
    "heuristic or search strategies, run by this service) in the other seats: opponents "
    "in seats 1 and 3, your partner in seat 2. Without a token, a new account is "
    "registered for you first and returned with its token (shown only here). The game has "
    "a move limit. 503 when this service runs no house bots.",
    tags=("games",),
    body=sh.HouseGameCreate,
    response=sh.HouseGame,
    status=201,
    auth="optional",
    example={"players": 2, "opponent": "heuristic", "variants": {"target": 7}},
)
def create_house_game(bot_id: str | None, body: dict[str, Any]) -> Response:
    a = arena()
    seats = house.seats_for(a.store, bot_id, body["players"], body["opponent"],
                            body.get("partner"))
    quotas.house_game(bot_id)  # after the 503 of no house: that creates nothing
    player = None
    if bot_id is None:
        player = a.register_bot(body["name"], person=True)
        seats[0] = player["id"]
    game = a.create_game(seats[0], {
        "players": body["players"], "variants": body.get("variants") or {},
        "seats": seats, "move_limit": body["move_limit"],
    })
    return respond(sch(sh.HouseGame), {"game": game, "seat": 0, "player": player}, 201,
                   {"Location": f"/games/{game['id']}"})


def operations(app_rules: Iterable[Any], views: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """(flask rule, method, Operation) for every declared view, in a stable order."""
    out = []
    for rule in app_rules:
        op = getattr(views.get(rule.endpoint), "operation", None)
        if op is None:
            continue
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            out.append((rule.rule, method.lower(), op))
    return sorted(out, key=lambda t: (t[0], t[1]))
