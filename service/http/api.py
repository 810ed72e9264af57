"""The operation machinery every HTTP domain's views share: ``@operation`` declares a
view's contract (the request schemas it loads, so bad input becomes a validation problem
before the view runs; the one success schema; the errors it can answer with; whether it
needs a token), and the helpers that read a request and shape an answer.
``service.http.openapi_spec`` reads the same declarations to write ``openapi.yaml``, so
the contract cannot drift from the code. The views themselves live in one blueprint per
domain: ``service.http.games``, ``accounts``, ``tournaments``, ``ladder``, ``webhooks``,
``analyses``, and ``health``.
"""

from __future__ import annotations

import functools
import hmac
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from flask import Request, Response, current_app, g, request
from marshmallow import Schema, ValidationError

from service.arena.core.problems import Problem
from service.arena.games.commands import Arena, dumps
from service.arena.tournaments.service import Tournaments
from service.arena.webhooks.callbacks import Callbacks
from service.http import connections, limits, versions
from service.http.schemas import common as sc

BEARER = "bearer"
# How deeply a request body may nest arrays and objects (no body of this API needs more
# than 3). Checked before parsing: the standard parser recurses per level, and a body
# of 8,000 ``[`` ended in RecursionError (a 500). openapi.py states the limit.
JSON_MAX_DEPTH = 32
# The largest request body (the default of the app's MAX_CONTENT_LENGTH); the largest
# real body (a tournament of 64 entrants) is under 2 KB.
MAX_BODY_BYTES = 16 * 1024
# Loaded queries kept per operation (see ``load_query``), and how many at most.
QUERY_MEMO = 256
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
    # "required", "optional", "admin", "organizer" (a bot's token or the admin's) or None
    auth: str | None = None
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
    query_memo: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
    # a body schema's own check of the common valid body (``ActionIn.fast_load``), if any
    fast_load = getattr(op.body, "fast_load", None)

    def wrap(view: Callable[..., Response]) -> Callable[..., Response]:
        @functools.wraps(view)
        def inner(**kwargs: Any) -> Response:
            req = _request()
            negotiate(op)
            for name in ids:
                if not _ID.fullmatch(kwargs[name]):
                    raise Problem("not-found")
            # No auth: Authorization is ignored entirely (not even looked up), so a
            # client that sends its token everywhere reads what anyone may read.
            bot_id = None
            if op.auth == "admin":
                authenticate_admin()
            elif op.auth == "organizer":
                caller = kwargs["caller"] = authenticate_organizer()
                bot_id = None if caller == ADMIN else caller
            elif op.auth is not None:
                bot_id = kwargs["bot_id"] = authenticate(op.auth)
            # a stream or a long-poll takes its caller's slots first (``connections.admit``):
            # refusing one costs no budget count and no parsing
            held = connections.admit(req.endpoint, bot_id, req.args,
                                     limits.client_address())
            try:
                if op.limited:  # after auth: the budget is the bot's, not its token string's
                    limits.count_request(
                        f"b{bot_id}" if bot_id else None)
                versions.check()
                if query_schema is not None:
                    kwargs["query"] = load_query(query_schema, query_memo)
                if body_schema is not None:
                    data = read_json(op.body_required)
                    accepted = fast_load(data) if fast_load is not None and \
                        isinstance(data, dict) else None
                    kwargs["body"] = accepted if accepted is not None else \
                        load(body_schema, data, "body")
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
_PAGES = frozenset({"games.get_game", "tournaments.get_tournament", "accounts.get_bot",
                    "ladder.list_ladders", "ladder.get_ladder"})


def negotiate(op: Operation) -> None:
    """406 when ``Accept`` admits nothing this operation can answer with (its success type,
    JSON, a problem; the HTML page where one is served); 415 when a body comes with a
    Content-Type that is not JSON (``application/json`` or any ``+json``). No Accept
    admits everything, and an empty body needs no Content-Type."""
    req = _request()
    if req.headers.get("Accept", "").strip():
        offers = [op.content_type, *op.also, *_ERRORS_AND_JSON]
        if req.endpoint in _PAGES:
            offers.append("text/html")
        if req.accept_mimetypes.best_match(offers) is None:
            raise Problem("not-acceptable",
                          f"this answers with {', '.join(dict.fromkeys(offers))}")
    if op.body is not None and req.content_length != 0:
        mimetype = req.mimetype
        if not (mimetype == "application/json" or mimetype.endswith("+json")) and \
                req.get_data(cache=True).strip():
            raise Problem("unsupported-media-type",
                          f"send the body as application/json, not {mimetype or 'untyped'}")


def read_json(required: bool) -> Any:
    """The request body as JSON; an empty body is ``{}`` where a body is optional."""
    req = _request()
    limit = current_app.config.get("MAX_CONTENT_LENGTH")
    length = req.content_length
    if length is not None and 0 < length <= (limit or length) and \
            "_cached_data" not in req.__dict__:
        # The usual body: its length given and within the limit. Read at once, in one
        # call under the body deadline (``connections.read_body``), rather than through
        # werkzeug's stream, which reads into a fresh 64 KB buffer and asks again for
        # the end; kept where ``get_data`` keeps what it read, for anyone asking later.
        raw = req._cached_data = connections.read_body(req.environ, length)
    else:
        if limit is not None and length is None:
            # A body without Content-Length (chunked) is read only up to the limit, and
            # werkzeug hands back what it read without saying whether more followed:
            # read one byte beyond the limit, so a longer body is a 413, not truncated
            # JSON.
            req.max_content_length = limit + 1
        raw = req.get_data(cache=True)
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


def load_query(schema: Schema, memo: dict[tuple[tuple[str, str], ...], dict[str, Any]]
               ) -> dict[str, Any]:
    """The request's query, loaded by ``schema``. Clients send the same few queries over
    and over (a bot's ``?wait=30`` on every move), and what a query loads to depends on
    its text alone: a query loaded before is taken from ``memo`` (up to ``QUERY_MEMO`` of
    them; a copy, so a view may change its own) instead of through marshmallow again.
    Only a valid query whose values are all plain (no lists) is kept; an invalid one is
    a problem every time, as it was the first."""
    raw = request.args.to_dict()
    key = tuple(raw.items())
    loaded = memo.get(key)
    if loaded is None:
        loaded = load(schema, raw, "query")
        if all(isinstance(v, str | int | float | None) for v in loaded.values()):
            if len(memo) >= QUERY_MEMO:
                memo.clear()
            memo[key] = loaded
        else:
            return loaded
    return dict(loaded)


# what clients send when they have no token to send (str(None), JS's null and undefined)
_NO_TOKEN = frozenset({"", "none", "null", "undefined"})


def authenticate(mode: str | None) -> str | None:
    """The bot behind the bearer token, for operations that take one ("required" or
    "optional"). Where it is optional, a token that is present must still be valid: a
    bot with a typo in its token should hear so, not be quietly shown the spectator
    view. Operations without auth never call this."""
    req = _request()
    header = req.headers.get("Authorization")
    if not header:
        if mode == "required":
            raise Problem("unauthorized", "send Authorization: Bearer <token>")
        return None
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if mode != "required" and scheme.lower() == "bearer" and token.lower() in _NO_TOKEN:
        # a generated client with no token set sends "Bearer None" (or an empty one): no
        # token, where none is needed; never a token any bot could hold
        return None
    if scheme.lower() != "bearer" or not token or len(token) > 200:
        raise Problem("unauthorized", "the Authorization header must be 'Bearer <token>'")
    bot_id = limits.bot_for_token(token)
    if bot_id is None:
        raise Problem("unauthorized", "unknown token")
    g.bot_id = bot_id
    owners = arena().owners
    if req.endpoint != "accounts.get_me" and owners.is_suspended(bot_id):
        reason = owners.suspension(bot_id) or "suspended by the operator"
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
    if not expected:  # say so: nothing any caller sends can pass here
        raise Problem("forbidden", "this needs the service's admin token, and this service "
                      "has none configured (ARENA_ADMIN_TOKEN is unset), so nobody may")
    if not limits.admin_attempt(lambda: hmac.compare_digest(token.encode(),
                                                            expected.encode())):
        raise Problem("forbidden", "this needs the service's admin token")


ADMIN = "admin"  # the caller of an ``auth="organizer"`` operation that sent the admin token


def authenticate_organizer() -> str:
    """``auth="organizer"``: a bot's token (its owner acts: organizes, controls its own
    tournaments) or the admin token, which overrides every organizer check; ``ADMIN`` for
    the latter, else the bot id. A token that is neither is 401 as any unknown token; the
    admin comparison is the constant-time one of ``authenticate_admin``, and is made only
    when the token is no bot's, so a bot's token never counts as a failed admin attempt."""
    header = request.headers.get("Authorization") or ""
    _, _, token = header.partition(" ")
    token = token.strip()
    expected = current_app.config.get("ARENA_ADMIN_TOKEN") or ""
    if expected and token and len(token) <= 200 and not limits.is_bot_token(token):
        authenticate_admin()
        return ADMIN
    bot = authenticate("required")
    assert bot is not None
    return bot


def _request() -> Request:
    """The request itself rather than its proxy: each attribute read through Flask's
    ``request`` proxy first fails on the proxy (an ``AttributeError`` built and dropped)
    and is then looked up again, so a function that reads several takes the object once."""
    return request._get_current_object()  # type: ignore[attr-defined,no-any-return]


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


TOURNAMENT_ID = {"schema": {"type": "string", "pattern": sc.ID_PATTERN},
                 "description": "tournament id"}
GAME_ID = {"schema": {"type": "string", "pattern": sc.ID_PATTERN}, "description": "game id"}
BOT_ID = {"schema": {"type": "string", "pattern": sc.ID_PATTERN}, "description": "bot id"}

_SCHEMAS: dict[type[Schema], Schema] = {}


def sch(cls: type[Schema]) -> Schema:
    if cls not in _SCHEMAS:
        _SCHEMAS[cls] = cls()
    return _SCHEMAS[cls]


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
