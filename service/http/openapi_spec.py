"""``openapi.yaml`` generated from the code: the routes' ``@operation`` declarations and
the marshmallow schemas. ``tests/service/test_openapi.py`` fails when the committed file
differs from what this writes, so the contract cannot drift.

Regenerate with ``python -m service.http.openapi > openapi.yaml``.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from flask import Flask

from service.arena.problems import KINDS
from service.http import callback_schemas as cs
from service.http import limits, quotas
from service.http.openapi_clients import event_stream_schema, for_generators
from service.http.routes import JSON_MAX_DEPTH, MAX_BODY_BYTES, Operation, operations
from service.http.schemas import common as sc
from service.http.schemas import record as sr
from service.http.schemas import variants as sv

TITLE = "All Fours Arena"
VERSION = "0.1.0"

_RATES = f"""\
**Rate limits.** Each bot has a budget of requests per fixed window: by default
{limits.RATE_LIMIT} requests per {limits.RATE_WINDOW} s (`ARENA_RATE_LIMIT`, `ARENA_RATE_WINDOW`),
counted per bot once its token is known, and per client address for requests without
one; `/healthz`, `/readyz`, `/openapi.yaml`, `/docs` and `/metrics` are not counted. Every
answer to a counted request carries the IETF fields (draft-ietf-httpapi-ratelimit-headers)
`RateLimit-Policy: "default";q=<quota>;w=<window>` and
`RateLimit: "default";r=<requests left>;t=<seconds until the window resets>`, whatever
its status: fresh actions, `?wait` answers, replays of a retried action, long-polls and
streams, and the problems of requests read past their token (400, 403 `forbidden-seat`,
404 of a well-formed id, 405, 408, 409, 412, 413, 422, 429 `rate-limited`). Refused before
the count, and without the fields: 401, 403 `suspended` and `forbidden` (admin), 406, 415,
a 404 for an id of the wrong form, 429 `too-many-connections` and 503 `over-capacity`; a
503 `service-unavailable` may lack them (the count itself needed Redis). Pace yourself
by them (when `r` is 0, wait `t` seconds) and you never get the 429. Over the budget:
429 `/problems/rate-limited` with `Retry-After`.
Failed authentication is limited per client address and per network \
(IPv4 /24, IPv6 /64), never per token, and never refuses a valid token: a token is \
looked up first, and only an unknown one counts. After {limits.AUTH_FAILURE_LIMIT} \
unknown tokens from an address (or {limits.AUTH_FAILURE_NETWORK_LIMIT} from its network) \
in {limits.AUTH_FAILURE_WINDOW} s, a further unknown token is 429 with `Retry-After` \
instead of 401. Admin-token attempts are counted before the comparison: past \
{limits.ADMIN_FAILURE_LIMIT} wrong ones from an address (or \
{limits.ADMIN_FAILURE_NETWORK_LIMIT} from its network) every admin token from there is \
429 until the window ends, without being compared.
"""

_QUOTAS = f"""
**Creation quotas.** What a client creates is kept for days, so creating is counted too,
per hour (`ARENA_QUOTA_WINDOW`): by default {quotas.QUOTA_BOTS} bots registered per client
address (`ARENA_QUOTA_BOTS`), {quotas.QUOTA_GAMES} games created per bot and \
{quotas.QUOTA_CLIENT_GAMES} per
client address (`ARENA_QUOTA_GAMES`, `ARENA_QUOTA_CLIENT_GAMES`), {quotas.QUOTA_HOUSE_GAMES}
house games per client address and per bot (`ARENA_QUOTA_HOUSE_GAMES`); an IPv6 client is
its /64. Past one: 429 `/problems/rate-limited` with `Retry-After` (until the hour's window
ends), and nothing is created. A bot that never plays expires after a week
(`ARENA_BOT_UNUSED_TTL`); a finished casual game after 30 days (`ARENA_GAME_RETENTION`).
"""

DESCRIPTION = """\
Bots play Trinidad All Fours against each other over HTTP. The rules, with the ids R1–R23
that errors cite, are in the project's `docs/rules.md` (each rule at its anchor, e.g.
`docs/rules.md#r14`); the protocol for bot authors is `docs/bots.md`.

1. `POST /bots` registers a bot and returns its bearer token (once).
2. `POST /games` creates a game; others join open seats with `POST /games/{id}/seats/{seat}`.
3. Loop: `GET /games/{id}/turn` (long-poll) until `view.your_turn`, then
   `POST /games/{id}/actions` with one of `view.legal_actions`.

Tournaments (`POST /tournaments`, admin only) create their games themselves; an entrant
finds its turns with `GET /bots/me/turns`.

**Move deadlines.** A game with a `move_limit` gives each decision that many seconds
(`view.deadline`, `view.time_left`; the service's clock). When time runs out the service
plays for the seat — whether or not any client is connected — and records a timeout in
the record (`timeouts`) and the tournament standings. The default actions:
`stand` (stand or beg); `give_one` if legal, else `run_pack` (give one or run the pack);
the lowest legal card when playing (lowest rank, Two lowest; ties clubs, diamonds,
hearts, spades). A move that arrives before the deadline always wins over the timeout.
With a `time_bank` (seconds per seat) a decision slower than `move_limit` draws the
excess from its seat's bank (`view.bank_left`), and the deadline is the decision's
start + `move_limit` + `bank_left`: the service plays only once the bank is empty too
(docs/bots.md, "The clock").

**Media types.** Send a body as JSON (`Content-Type: application/json`, or another
`+json` type; an empty body needs none), else 415. Answers are `application/json`,
`application/problem+json` for errors, `text/event-stream` for `/games/{game_id}/events`,
`text/csv` for `/tournaments/{tournament_id}/export.csv`;
an `Accept` header that admits none of an operation's types gets 406 (no `Accept`, or
`*/*`, admits all). A browser asking for `text/html` at `/games/{game_id}`,
`/tournaments/{tournament_id}` or `/bots/{bot_id}` gets the page for people instead.

**Closed shapes.** Every response object lists all its members
(`additionalProperties: false`); optional members are described where they appear.

**Tokens.** Where an operation has no security requirement, `Authorization` is
ignored entirely: any token, valid or not, answers exactly as no token (so a client may send
its token on every request). Where a token is optional (a game's view, `/turn`,
`/events`, `/record`) one that is present must be valid: an unknown or malformed token
is 401, never a quiet spectator view. Where a token is required, a missing or unknown
one is 401; the admin operation answers 401 without a token and 403 with any other.

""" + _RATES + _QUOTAS + """
Every view carries a `version`; send it back (`version` or `If-Match`) to refuse an action
if the game moved on, and an `Idempotency-Key` to retry safely. Every error is
`application/problem+json` (RFC 9457) with a stable `type`:
""" + "\n".join(
    f"- `/problems/{kind}` ({status}): {title}" for kind, (status, title) in KINDS.items()
)

_STATUS_TEXT = {
    400: "Malformed JSON or bad request (`/problems/malformed-json`, `/problems/bad-request`); "
    f"a body may be nested at most {JSON_MAX_DEPTH} levels (arrays and objects); a body "
    "whose framing cannot be read (a malformed chunk size, a missing chunk terminator, a "
    "bad trailer, a bad Content-Length) is `/problems/malformed-body` and the connection "
    "closes",
    401: "Missing, malformed or unknown bearer token (`/problems/unauthorized`)",
    403: "Your bot does not hold that seat (`/problems/forbidden-seat`), the call needs "
    "the admin token (`/problems/forbidden`), or only the entrant itself may do it "
    "(`/problems/forbidden-entrant`)",
    404: "No such game, bot, seat or tournament (`/problems/not-found`)",
    409: "Conflict with the game as it is now: `/problems/illegal-action` (with the `rule` "
    "broken, e.g. R14, and `rule_doc`, where it is explained: `docs/rules.md#r14`), "
    "`/problems/not-your-turn` (R23), `/problems/version-conflict` (with "
    "`current_version`), `/problems/seat-taken`, `/problems/game-not-started`; or with the "
    "tournament as it is now: `/problems/tournament-over` (finished or cancelled)",
    406: "The Accept header admits none of the media types this operation answers with "
    "(`/problems/not-acceptable`): send `application/json` (or `*/*`, or no Accept)",
    408: "The body did not arrive within the service's body deadline (`ARENA_BODY_TIMEOUT`, "
    "10 s by default) after the request head (`/problems/request-timeout`); the "
    "connection closes",
    412: "If-Match is stale (`/problems/precondition-failed`, with `current_version`)",
    413: f"Body too large (`/problems/payload-too-large`): a body may be at most {MAX_BODY_BYTES} "
    "bytes, with or without Content-Length",
    415: "The body is not JSON by its Content-Type (`/problems/unsupported-media-type`): "
    "send `Content-Type: application/json` (or another `+json` type) with a body; an "
    "empty body needs no Content-Type",
    422: "Invalid request (`/problems/validation`, with `errors` per field), or an "
    "Idempotency-Key reused in the same game with another request "
    "(`/problems/idempotency-key-reused`)",
    429: "Rate limited (`/problems/rate-limited`): the bot's (or address's) request budget "
    "is spent, or this client address failed authentication too often; or this client "
    "(address, IPv6 /64) or bot holds as many open event streams, long-polls or "
    "connections as it may (`/problems/too-many-connections`); retry after Retry-After",
    503: "Redis unavailable (`/problems/service-unavailable`), or the service is at its "
    "connection limit (`/problems/over-capacity`); retry after Retry-After",
}
# Errors that may come after the request was counted, so carry the budget's fields (a 403
# ``forbidden-seat`` does, a 403 ``suspended`` is refused before the count; docs/bots.md).
_COUNTED_ERRORS = frozenset({400, 403, 404, 405, 408, 409, 412, 413, 422})
_RETRY_AFTER = {"Retry-After": {"description": "seconds to wait", "schema": {"type": "string"}}}
_RATE_LIMIT_FIELDS = {
    "RateLimit-Policy": {
        "description": "the request budget: `\"default\";q=<requests>;w=<window seconds>` "
        f"(by default q={limits.RATE_LIMIT}, w={limits.RATE_WINDOW}); "
        "draft-ietf-httpapi-ratelimit-headers",
        "schema": {"type": "string", "pattern": r'^"default";q=[0-9]+;w=[0-9]+$'}},
    "RateLimit": {
        "description": "where the caller stands: `\"default\";r=<requests left in this "
        "window>;t=<seconds until it resets>`; wait t seconds when r is 0",
        "schema": {"type": "string", "pattern": r'^"default";r=[0-9]+;t=[0-9]+$'}},
}


_SUCCESS = {200: "OK", 201: "Created", 204: "No Content"}


def _path(rule: str) -> str:
    return re.sub(r"<(?:[a-z]+:)?([a-z_]+)>", r"{\1}", rule)


def _error(status: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "description": _STATUS_TEXT[status],
        "content": {"application/problem+json": {"schema": "Problem"}},
    }
    if status in (429, 503):
        out["headers"] = _RETRY_AFTER
    if status == 401:
        out["headers"] = {
            "WWW-Authenticate": {"description": "Bearer", "schema": {"type": "string"}}
        }
    return out


def _operation(op: Operation, method: str, path_params: list[str], op_id: str) -> dict[str, Any]:
    params: list[dict[str, Any]] = []
    for name in path_params:
        spec = op.path_params.get(name, {"schema": {"type": "string"}})
        params.append({"name": name, "in": "path", "required": True, **spec})
    if op.query is not None:
        params.append({"in": "query", "schema": op.query})
    params.extend(op.headers_in)
    out: dict[str, Any] = {
        "operationId": op_id,
        "summary": op.summary,
        "tags": list(op.tags),
        "parameters": params,
    }
    if op.description:
        out["description"] = op.description
    if op.body is not None:
        media: dict[str, Any] = {"schema": op.body}
        if op.example is not None:
            media["example"] = op.example
        out["requestBody"] = {"required": op.body_required, "content": {"application/json": media}}
    if op.content_type == "application/json":
        content = {"application/json": {"schema": op.response}} if op.response else {}
    elif op.content_type == "text/event-stream":
        content = {op.content_type: {
            "schema": event_stream_schema(sr.EVENTS, sc.EVENT_ID_RE)}}
    else:
        content = {op.content_type: {"schema": {"type": "string"}}}
    for media, what in op.also.items():
        content[media] = {"schema": {"type": "string", "description": what}}
    ok: dict[str, Any] = {"description": _SUCCESS[op.status]}
    if content or op.status != 204:
        ok["content"] = content
    if op.response_headers or op.limited:
        ok["headers"] = {**op.response_headers, **(_RATE_LIMIT_FIELDS if op.limited else {})}
    if op.status == 201:
        ok["headers"] = {**ok.get("headers", {}), "Location": {
            "description": "the new resource's path", "schema": {"type": "string"}}}
    if op.links:
        ok["links"] = op.links
    responses: dict[str, Any] = {str(op.status): ok}
    responses.update({str(code): answer for code, answer in op.more.items()})
    codes = set(op.errors) | {406, 429, 503}
    if op.auth == "admin":
        codes |= {401, 403}
        out["security"] = [{"admin": []}]
    elif op.auth is not None:
        codes.add(401)
        codes.add(403)  # a suspended bot's token (`suspended`, service.arena.owners)
        # optional: anonymous ({}) first, as the generators that read it look for it
        out["security"] = [{"bearer": []}] if op.auth == "required" else [{}, {"bearer": []}]
    if op.body is not None:
        codes |= {400, 408, 413, 415, 422}
    if op.query is not None or op.headers_in:
        codes.add(422)
    for code in sorted(codes):
        responses[str(code)] = _error(code)
    if op.limited:
        responses["429"]["headers"] = {**_RETRY_AFTER, **_RATE_LIMIT_FIELDS}
        for code in sorted(codes & _COUNTED_ERRORS):  # refusals made after the count
            responses[str(code)]["headers"] = {k: k for k in _RATE_LIMIT_FIELDS}  # $refs
    out["responses"] = responses
    return out


def build_spec(app: Flask) -> APISpec:
    spec = APISpec(
        title=TITLE,
        version=VERSION,
        openapi_version="3.1.0",
        plugins=[MarshmallowPlugin()],
        info={"description": DESCRIPTION, "license": {"name": "MIT", "identifier": "MIT"}},
    )
    spec.components.security_scheme(
        "bearer", {"type": "http", "scheme": "bearer", "description": "token from POST /bots"}
    )
    spec.components.security_scheme(
        "admin",
        {"type": "http", "scheme": "bearer",
         "description": "the service's admin token (ARENA_ADMIN_TOKEN)"},
    )
    spec.components.schema("Problem", schema=sc.ProblemSchema)
    for name, header in _RATE_LIMIT_FIELDS.items():  # shared by the counted problems
        spec.components.header(name, header)
    spec.components.schema("Variants", schema=sv.VariantsOut)
    spec.components.schema("CallbackRequest", schema=cs.CallbackRequest)
    spec.components.schema("CallbackAnswer", schema=cs.CallbackAnswer)
    spec.components.schema("VerifyRequest", schema=cs.VerifyRequest)
    spec.components.schema("VerifyAnswer", schema=cs.VerifyAnswer)
    for schema in sr.EVENTS.values():
        spec.components.schema(schema.__name__, schema=schema)
    spec.components.schema("Event", {
        "description": "One server-sent event's data, by its `type`.",
        "oneOf": [{"$ref": f"#/components/schemas/{c.__name__}"} for c in sr.EVENTS.values()],
        "discriminator": {"propertyName": "type", "mapping": {
            t: f"#/components/schemas/{c.__name__}" for t, c in sr.EVENTS.items()}},
    })
    by_path: dict[str, dict[str, Any]] = {}
    for rule, method, op in operations(app.url_map.iter_rules(), app.view_functions):
        path = _path(rule)
        names = re.findall(r"{([a-z_]+)}", path)
        op_id = method + "".join(
            p.capitalize() for p in re.split(r"[/_{}.-]+", path) if p
        )
        by_path.setdefault(path, {})[method] = _operation(op, method, names, op_id)
    known = {op["operationId"] for ops in by_path.values() for op in ops.values()}
    for ops in by_path.values():
        for op in ops.values():
            for response in op["responses"].values():
                for name, target in response.get("links", {}).items():
                    if target["operationId"] not in known:
                        raise ValueError(f"link {name} names no operation: {target}")
    for path, ops in by_path.items():
        spec.path(path=path, operations=ops)
    return spec


def _seats_per_players(doc: dict[str, Any]) -> None:
    """JSON Schema cannot say "one seat per player" from marshmallow; add it by hand."""
    game = doc["components"]["schemas"]["GameCreate"]
    game["allOf"] = [
        {
            "if": {"properties": {"players": {"const": n}}, "required": ["players"]},
            "then": {"properties": {"seats": {"minItems": n, "maxItems": n}}},
        }
        for n in (2, 4)
    ]


def _tournament_rules(doc: dict[str, Any]) -> None:
    """``TournamentCreate``'s cross-field rules (its ``validates_schema``), which
    marshmallow cannot export: ``rounds`` is for Swiss only (not round robin, not
    knockout); with trusted duplicate
    twins (``trusted`` and ``duplicate`` not false) ``games_per_pairing`` is even; and
    ``duplicate: true`` without ``trusted`` needs 4 entrants (two tables a round)."""
    create = doc["components"]["schemas"]["TournamentCreate"]
    create["allOf"] = [
        {  # rounds: Swiss only (a knockout's follow from its entrants)
            "if": {"properties": {"format": {"enum": ["round_robin", "knockout"]}},
                   "required": ["format"]},
            "then": {"not": {"required": ["rounds"]}},
        },
        {
            "if": {"properties": {"trusted": {"const": True},
                                  "duplicate": {"not": {"const": False}}},
                   "required": ["trusted"]},
            "then": {"properties": {"games_per_pairing": {"multipleOf": 2}}},
        },
        {  # deals shared across tables need two tables a round
            "if": {"properties": {"duplicate": {"const": True},
                                  "trusted": {"not": {"const": True}}},
                   "required": ["duplicate"]},
            "then": {"properties": {"entrants": {"minItems": 4}}},
        },
    ]


_WEBHOOK_HEADERS = [
    {"name": "Arena-Timestamp", "in": "header", "required": True,
     "description": "unix seconds when the request was signed (the service's clock): refuse "
     "one more than a minute from yours",
     "schema": {"type": "string", "pattern": "^[0-9]{1,12}$"}},
    {"name": "Arena-Signature", "in": "header", "required": True,
     "description": "`sha256=` and the lower-case hex HMAC-SHA256, keyed with your secret's "
     "UTF-8 bytes (from `PUT /bots/me/callback`), of the timestamp, a `.`, and the exact "
     "body bytes; compare in constant time",
     "schema": {"type": "string", "pattern": "^sha256=[0-9a-f]{64}$"}},
    {"name": "Arena-Delivery", "in": "header", "required": True,
     "description": "the request's id (the body's `delivery`): refuse one you have seen",
     "schema": {"type": "string"}},
    {"name": "Arena-Event", "in": "header", "required": True,
     "description": "`verify`, `turn`, `start`, `end` or `invitation` (the body's `event`)",
     "schema": {"type": "string", "enum": ["verify", "turn", "start", "end", "invitation"]}},
]

_WEBHOOK_TEXT = """\
Sent by the service to a bot's callback URL (`PUT /bots/me/callback`) from any of its
processes, over one pool of keep-alive connections. The connection goes only to a public
address or one inside the operator's `ARENA_CALLBACK_NETWORKS` (checked on the address
resolved at connection time); redirects are not followed (a 3xx is a failed call) and at
most `ARENA_CALLBACK_MAX_BYTES` (16384 by default) of the answer are read, uncompressed.
The whole call — connecting, retries, reading — must fit in the time before the move
deadline (less a margin) and in `ARENA_CALLBACK_TIMEOUT` (10 s by default). A call is
retried (at most `ARENA_CALLBACK_RETRIES` times, 2 by default, each a new `delivery` id
and signature) only when no answer arrived: the connection was refused, reset, or timed
out while connecting. An answer of any kind is final. Nothing but `verify` is sent to a
URL until it has passed its verification, and at most `ARENA_CALLBACK_HOST_RATE` calls a
second (300 by default) go to one host, across every bot: a call past it is not made
(`host-rate-limited`).
"""


def webhooks() -> dict[str, Any]:
    """The requests the service sends (OpenAPI 3.1 ``webhooks``), so a bot author can
    generate the server side too."""
    body = {"required": True, "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/CallbackRequest"}}}}
    turn = {
        "operationId": "callbackTurn",
        "summary": "Your turn: answer with the action to play",
        "description": _WEBHOOK_TEXT + """
Answer `200` with `{"action": "<one of view.legal_actions>"}` before `deadline`. The
service applies it as `POST /games/{game_id}/actions` with `version` = the request's
`version` and `Idempotency-Key: callback-<version>`: the same rules, refusals and
idempotency, so a turn delivered twice (a process died mid-call and another called
again) applies at most one action, and an answer to a position that has moved on is
refused, never applied to the new one. Any other answer — another status, a body that is
not an action, an illegal action, no answer in time — applies nothing: the seat keeps its
turn (you may still act by pull) and at the deadline gets the default action. Each
delivery's outcome is in `GET /bots/me/callback/deliveries`, and the next `turn` in that
game carries the last failed one as `last_failure`.
""",
        "parameters": _WEBHOOK_HEADERS,
        "requestBody": body,
        "responses": {
            "200": {"description": "the action to play", "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/CallbackAnswer"},
                "example": {"action": "AS"}}}},
            "default": {"description": "anything else: nothing is applied (see above)"},
        },
    }

    def note(event: str, what: str) -> dict[str, Any]:
        return {"post": {
            "operationId": f"callback{event.capitalize()}",
            "summary": what,
            "description": _WEBHOOK_TEXT + "\nThe answer is ignored (any 2xx is recorded "
            "as `delivered`). Queued by the process that saw the game start or end and "
            "retried where no answer came; a process that dies between the change and "
            "queueing it loses the notification (the game itself is unaffected).",
            "parameters": _WEBHOOK_HEADERS,
            "requestBody": body,
            "responses": {"2XX": {"description": "received"}},
        }}

    verify = {
        "operationId": "callbackVerify",
        "summary": "Verify your URL: echo the challenge",
        "description": _WEBHOOK_TEXT + """
The first request a new callback URL gets, about a second after `PUT /bots/me/callback`
(so you have kept the secret from its answer), signed like every other. Answer `200` with
`{"challenge": "<the request's challenge>"}` (or the bare challenge as the whole body, as
`text/plain`). Until a URL has passed it is sent nothing else: its seats' turns fall to
the move deadline's default action and `start`/`end` wait. Another answer (another status,
no echo, no answer in time) fails the attempt: it is sent again after 4, 15 and 60 s, then
the URL is `failed` until `POST /bots/me/callback/verify`. Each attempt is a delivery record
(`event: verify`); `GET /bots/me/callback` shows `verified` and the `verification`.
""",
        "parameters": _WEBHOOK_HEADERS,
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/VerifyRequest"}}}},
        "responses": {
            "200": {"description": "the challenge, echoed", "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/VerifyAnswer"},
                                     "example": {"challenge": "pVQ3f1aT9x0bYk2N5cE8sH4u"}},
                "text/plain": {"schema": {"type": "string"}}}},
            "default": {"description": "anything else: the URL is not verified"},
        },
    }
    return {
        "verify": {"post": verify},
        "turn": {"post": turn},
        "start": note("start", "A game you sit in has begun (every seat taken)"),
        "end": note("end", "A game you sit in is over (`view` shows every card)"),
        "invitation": note("invitation", "Another owner's bot invites you to a game "
                           "(`invitation`): accept or decline it by API before it expires"),
    }


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """No anchors/aliases (some tools mishandle them) and block style for long text.
    libyaml's emitter where PyYAML has it: the same text for much less CPU."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str)


def spec_yaml(app: Flask) -> str:
    """The OpenAPI document as YAML text (keys in a stable order)."""
    raw = build_spec(app).to_dict()
    _seats_per_players(raw)
    _tournament_rules(raw)
    raw["webhooks"] = webhooks()
    for_generators(raw)
    doc = {k: raw[k] for k in ("openapi", "info", "paths", "components") if k in raw}
    doc.update(raw)
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False,
                     allow_unicode=True, width=100)
