"""HTTP routes of the games (``service.arena.games``): create, list, view, join, act, wait
for a turn (one game's or any game's), the event stream, the record, and the house's
games for a person."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

from flask import Blueprint, Response, request

from service.arena.accounts import house
from service.arena.core.problems import Problem
from service.arena.games.acting import ActRequest
from service.arena.games.after_finish import Gate
from service.arena.games.commands import dumps
from service.arena.games.fanout import direct_socket
from service.http import limits, quotas
from service.http.accounts import schemas as sb
from service.http.api import (
    GAME_ID,
    arena,
    callbacks,
    link,
    operation,
    respond,
    sch,
    view_response,
)
from service.http.games import house_schemas as sh
from service.http.games import record_schemas as sr
from service.http.games import schemas as sg
from service.http.lists import CONDITIONAL, LINK, not_modified, respond_page
from service.http.lists import ETAG as LIST_ETAG
from service.http.schemas import common as sc

bp = Blueprint("games", __name__)

# The operations whose answers can hold a seat's own cards (a seat's view, a turn, a
# record while the game is live, an action's answer: fresh, replayed from the retry memory
# or after ``?wait``, a seat's event stream). Each answer of theirs (errors too: one rule,
# nothing to get wrong per view) says ``Cache-Control: no-store`` (no cache, shared or
# private, keeps a hand) and ``Vary: Authorization`` (what it holds depends on the token).
SEAT_ANSWERS = frozenset({"games.get_game", "games.join", "games.act", "games.turn", "games.record",
                          "games.events"})


@bp.after_request
def _seat_answers_are_private(resp: Response) -> Response:
    """``SEAT_ANSWERS`` are never stored by a cache; the HTML page a browser gets at a
    game's URL (``pages``, a shell without cards) keeps its own caching."""
    if request.endpoint in SEAT_ANSWERS and resp.mimetype != "text/html":
        headers = resp.headers
        headers["Cache-Control"] = "no-store"
        if "Vary" in headers:
            resp.vary.add("Authorization")
        else:  # the usual case, without parsing an empty Vary into a set and back
            headers["Vary"] = "Authorization"
    return resp


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
# (tests/service/games/test_idempotency.py checks all three), so they cannot disagree.
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
    "GetGame": link("getGame", "the game", game_id="$response.body#/id"),
    "WaitForTurn": link("waitForTurn", "wait for a turn in it",
                        game_id="$response.body#/id"),
    "Act": link("act", "act in it", game_id="$response.body#/id"),
    "GetRecord": link("getRecord", "its record", game_id="$response.body#/id"),
}

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
        "JoinSeat1": link("joinSeat", "take seat 1 (open unless given)",
                          game_id="$response.body#/id", seat="1"),
    },
)
def create_game(bot_id: str, body: dict[str, Any]) -> Response:
    with quotas.game_creation(bot_id):
        game = arena().create_game(bot_id, body)
    return respond(sch(sg.GameSummary), game, 201, {"Location": f"/games/{game['id']}"})


@bp.get("/games")
@operation(summary="List games, newest first", tags=("games",), query=sg.ListQuery,
           response=sg.GameList, response_headers={**LINK, **LIST_ETAG}, **CONDITIONAL)
def list_games(query: dict[str, Any]) -> Response:
    page = arena().list_games(query.get("status"), query["limit"], query.get("cursor"))
    return respond_page(sch(sg.GameList), page)


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
    **CONDITIONAL,
)
def get_game(game_id: str, bot_id: str | None, query: dict[str, Any]) -> Response:
    a = arena()
    game = a.get(game_id)
    if request.headers.get("If-None-Match") and not game.meta.get("embargo"):
        # decided before rendering: the version is the view. Not for a duplicate deal
        # (an embargo lifting changes the view, not the version), nor while the seat's
        # last turn delivery failed (the failure can arrive after the version)
        seat = a.viewer_seat(game, bot_id, query.get("seat"))
        if seat is None or not callbacks().failed_in(bot_id, game_id):
            unchanged = not_modified(f'"{game.version}"')
            if unchanged is not None:
                return unchanged
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
    headers = request.headers
    idem = headers.get("Idempotency-Key")
    if idem is not None and not (0 < len(idem) <= 100):
        raise Problem("validation", "Idempotency-Key must be 1 to 100 characters",
                      errors={"Idempotency-Key": ["must be 1 to 100 characters"]})
    if_match = _if_match(headers.get("If-Match"))
    a = arena()
    # The move that ends a tournament game hands it to the after-finish loop, whose
    # hooks wait until this answer has gone out (``service.arena.games.after_finish``).
    with a.after_finish.gate() as gate:
        outcome = a.perform(ActRequest(game_id, bot_id, body, if_match, idem, query["wait"]))
        view = outcome.view
        resp = view_response(dumps(view), view["version"])
        if gate.holding:
            resp.response = _OpensWhenTaken(resp.response, gate)
            resp.call_on_close(gate.open)  # a body never taken (a HEAD, a failed start)
    if outcome.replayed:
        resp.headers["Idempotent-Replayed"] = "true"
    if query["wait"] > 0 and outcome.committed is not None:
        done = time.perf_counter()
        act_ms = (outcome.committed - started) * 1000
        wait_ms = (done - outcome.committed) * 1000
        resp.headers["Server-Timing"] = f"act;dur={act_ms:.2f}, wait;dur={wait_ms:.2f}"
    return resp


class _OpensWhenTaken(list[bytes]):
    """An answer's body that opens its gate (``service.arena.games.after_finish.Gate``)
    when the server takes it to write it: the server's write follows at once, and under
    gevent no other greenlet (the after-finish loop's included) runs before it, unless
    the socket's buffer is full."""

    def __init__(self, chunks: Any, gate: Gate) -> None:
        super().__init__(chunks)
        self.gate = gate

    def __iter__(self) -> Iterator[bytes]:
        self.gate.open()
        return super().__iter__()


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
    response_headers={"ETag": {
        "description": "once the record is complete (it never changes again): the game's "
        "version, quoted", "schema": {"type": "string"}}},
    **CONDITIONAL,
)
def record(game_id: str, bot_id: str | None, query: dict[str, Any]) -> Response:
    a = arena()
    game = a.get(game_id)
    complete = game.status == "finished" and not a.embargoed(game)
    tag = f'"{game.version}"'
    if complete:  # a complete record is the same for everyone, for good
        unchanged = not_modified(tag)
        if unchanged is not None:
            return unchanged
    resp = respond(sch(sr.Record), a.record(game_id, bot_id, query.get("seat")))
    if complete:
        resp.headers["ETag"] = tag
    return resp



@bp.get("/bots/me/turns")
@operation(
    summary="Wait for any game where it is your turn",
    description="Long-poll: answers at once with the games where it is your turn (except "
    "those in `playing`), or waits (woken by Redis pub/sub, the moment a game becomes "
    "your turn) until there is one or `timeout` seconds pass. Every answer lists your "
    "pending `invitations` (games other owners' bots asked you to play: accept or "
    "decline each); a new one arriving during the wait ends it, and with "
    "`invitations_after` one newer than that answers at once. Likewise `tournaments`: "
    "notices of the tournaments you entered (started, finished, cancelled), with "
    "`notices_after`.",
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
                                            query.get("invitations_after"),
                                            query.get("notices_after")))


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
    player = None
    with quotas.house_game(bot_id):  # after the 503 of no house: that creates nothing
        if bot_id is None:
            # the person's account is admitted from the visitor's own network, as POST
            # /bots would: no visitor shares a count with strangers
            player = a.register_bot(body["name"], person=True,
                                    address=limits.counted_address())
            seats[0] = player["id"]
        game = a.create_game(seats[0], {
            "players": body["players"], "variants": body.get("variants") or {},
            "seats": seats, "move_limit": body["move_limit"],
        })
    return respond(sch(sh.HouseGame), {"game": game, "seat": 0, "player": player}, 201,
                   {"Location": f"/games/{game['id']}"})
