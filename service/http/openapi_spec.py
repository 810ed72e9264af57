"""``openapi.yaml`` generated from the code: the routes' ``@operation`` declarations and
the marshmallow schemas. ``tests/service/http/test_openapi.py`` fails when the committed file
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

from service.arena.core.problems import KINDS
from service.http import limits, quotas, versions
from service.http.api import JSON_MAX_DEPTH, MAX_BODY_BYTES, Operation, operations
from service.http.games import record_schemas as sr
from service.http.openapi_clients import event_stream_schema, for_generators
from service.http.openapi_webhooks import webhooks
from service.http.schemas import common as sc
from service.http.schemas import variants as sv
from service.http.webhooks import schemas as cs

TITLE = "All Fours Arena"
VERSION = versions.CURRENT  # the API version (the `Arena-Api-Version` header) is the document's

# operationIds by view (blueprint.function): the name every generated method takes. A view
# not listed is named after its function (``get_game`` -> ``getGame``).
OPERATION_IDS = {
    "games.join": "joinSeat",
    "games.turn": "waitForTurn",
    "games.act": "act",
    "games.events": "streamGameEvents",
    "games.record": "getRecord",
    "games.my_turns": "listMyTurns",
    "tournaments.events": "streamTournamentEvents",
    "tournaments.house_bots": "listHouseBots",
    "tournaments.leaderboard": "getLeaderboard",
    "tournaments.get_standings": "getStandings",
    "tournaments.tournament_schedule": "getTournamentSchedule",
    "tournaments.export_tournament_csv": "exportTournamentCsv",
    "accounts.create_bot": "registerBot",
    "accounts.suspensions": "listSuspensions",
    "accounts.lift_bot": "liftBotSuspension",
    "accounts.lift_owner": "liftOwnerSuspension",
    "accounts.my_invitations": "listMyInvitations",
    "accounts.put_policy": "setPolicy",
    "analyses.ask_analysis": "requestAnalysis",
    "ladder.ladder_history": "getLadderHistory",
    "ladder.ladder_standings": "getLadderStandings",
    "ladder.get_entry": "getLadderEntry",
    "webhooks.put_callback": "setCallback",
    "webhooks.get_deliveries": "listDeliveries",
    "archive.owner_me": "getMyOwner",
    "health.healthz": "healthz",
    "health.readyz": "readyz",
}

# Tags, declared with what they group (a tag a view uses and this does not list is declared
# with a plain sentence, so a new domain never breaks the document).
TAGS = {
    "bots": "Register bots, their settings, invitations, callbacks and turns",
    "games": "Create, join, watch and play games; records and analyses",
    "tournaments": "Organize, enter and follow tournaments; the leaderboard",
    "ladders": "Rated games against bots of similar strength, on demand",
    "admin": "The operator's operations (the admin token)",
    "health": "Liveness and readiness probes",
}

SERVERS = [{"url": "http://localhost:8000",
            "description": "`allfours serve` on this machine (its default port)"}]

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

Tournaments create their games themselves: any owner organizes one with a token of one of
its bots (`POST /tournaments`); a bot finds one (`GET /tournaments?status=registering`),
enters it with its own token (`POST /tournaments/{id}/entrants`) and finds its turns, and
notices of its tournaments, with `GET /bots/me/turns`.

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
`/tournaments/{tournament_id}`, `/bots/{bot_id}`, `/ladders` or `/ladders/{name}` gets the
page for people instead.

**Versions.** Send `Arena-Api-Version: """ + versions.CURRENT + """` (optional; without
it, the newest version answers) and every answer says which version answered it. A
version this service does not serve is 400 `/problems/unknown-api-version`. Within a
version, answers may gain members, operations may gain optional parameters, and new
problem types and event kinds may appear; anything else (removing or renaming a member, a
new required parameter, a changed meaning) comes as a new dated version, and an older
version is served for at least 12 months after its successor, its answers carrying
`Deprecation` and `Sunset` headers (RFC 9745, RFC 8594) meanwhile (docs/versions.md).

**Open answers.** A response object may gain members within a version: ignore members you
do not know (the schemas do not say `additionalProperties: false` on answers). Requests
stay strict: an unknown member of a request body is 422. An optional member of a request
may be left out or sent as `null`, which means the same.

**Problem types.** Every problem's `type` is a page: `GET /problems/<kind>` says what
happened and what a bot should do, as HTML, `text/markdown` or JSON (`Accept`).

**Tokens.** Where an operation has no security requirement (`security: []`),
`Authorization` is ignored entirely: any token, valid or not, answers exactly as no token
(so a client may send its token on every request). Where a token is optional (a game's
view, `/turn`, `/events`, `/record`) one that is present must be valid: an unknown or
malformed token is 401, never a quiet spectator view; but an empty one, or `None`,
`null` or `undefined` (what a generated client sends when it has none), is no token.
Where a token is required, a missing or unknown one is 401; the admin operations answer
401 without a token and 403 with any other (saying so when the service has no admin token
configured); the organizer's operations take a bot's token (its owner's tournaments) or
the admin token (every tournament).

""" + _RATES + _QUOTAS + """
Every view carries a `version`; send it back (`version` or `If-Match`) to refuse an action
if the game moved on, and an `Idempotency-Key` to retry safely. Every error is
`application/problem+json` (RFC 9457) with a stable `type`:
""" + "\n".join(
    f"- `/problems/{kind}` ({status}): {title}" for kind, (status, title) in KINDS.items()
)

_STATUS_TEXT = {
    400: "Malformed JSON or bad request (`/problems/malformed-json`, `/problems/bad-request`); "
    "an `Arena-Api-Version` this service does not serve (`/problems/unknown-api-version`); "
    f"a body may be nested at most {JSON_MAX_DEPTH} levels (arrays and objects); a body "
    "whose framing cannot be read (a malformed chunk size, a missing chunk terminator, a "
    "bad trailer, a bad Content-Length) is `/problems/malformed-body` and the connection "
    "closes; a request whose client address the service cannot tell (a proxy that does "
    "not pass it on) is `/problems/bad-request`: every limit counts a client by it",
    401: "Missing, malformed or unknown bearer token (`/problems/unauthorized`)",
    403: "Your bot does not hold that seat (`/problems/forbidden-seat`), the call needs "
    "the admin token (`/problems/forbidden`), or only the entrant itself may do it "
    "(`/problems/forbidden-entrant`), or only the tournament's organizer "
    "(`/problems/not-organizer`), or a tournament's entry condition refuses the bot "
    "(`/problems/entry-...`, each condition its own type)",
    404: "No such game, bot, seat or tournament (`/problems/not-found`)",
    409: "Conflict with the game as it is now: `/problems/illegal-action` (with the `rule` "
    "broken, e.g. R14, and `rule_doc`, where it is explained: `docs/rules.md#r14`), "
    "`/problems/not-your-turn` (R23), `/problems/version-conflict` (with "
    "`current_version`), `/problems/seat-taken`, `/problems/game-not-started`; or with the "
    "tournament as it is now: `/problems/tournament-over` (finished or cancelled), "
    "`/problems/entry-closed`, `/problems/tournament-full`, "
    "`/problems/entry-one-per-owner`",
    406: "The Accept header admits none of the media types this operation answers with "
    "(`/problems/not-acceptable`): send `application/json` (or `*/*`, or no Accept)",
    408: "The body did not arrive within the service's body deadline (`ARENA_BODY_TIMEOUT`, "
    "10 s by default) after the request head (`/problems/request-timeout`); the "
    "connection closes",
    412: "If-Match is stale (`/problems/precondition-failed`, with `current_version`)",
    413: f"Body too large (`/problems/payload-too-large`): a body may be at most {MAX_BODY_BYTES} "
    "bytes, with or without Content-Length",
    414: "The request line is too long (`/problems/uri-too-long`); answered before the "
    "request is read, so the connection closes and `instance` is an id of the occurrence",
    431: "The request's header fields are too large (`/problems/header-fields-too-large`); "
    "answered before the request is read, so the connection closes and `instance` is an "
    "id of the occurrence",
    415: "The body is not JSON by its Content-Type (`/problems/unsupported-media-type`): "
    "send `Content-Type: application/json` (or another `+json` type) with a body; an "
    "empty body needs no Content-Type",
    422: "Invalid request (`/problems/validation`, with `errors` per field), or an "
    "Idempotency-Key reused in the same game with another request "
    "(`/problems/idempotency-key-reused`)",
    429: "Rate limited (`/problems/rate-limited`): the bot's (or address's) request budget "
    "is spent, or this client address failed authentication too often; or this client "
    "(address, IPv6 /64) or bot holds as many open event streams, long-polls or "
    "connections as it may (`/problems/too-many-connections`); or a tournament quota "
    "(`/problems/tournament-quota`, `/problems/entry-quota`); retry after Retry-After",
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
_VERSION_PARAM = "ArenaApiVersion"  # apispec makes a component's name a $ref
_VERSION_HEADER = {versions.HEADER: versions.HEADER}


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
    params.append(_VERSION_PARAM)
    out: dict[str, Any] = {
        "operationId": op_id,
        "summary": op.summary,
        "tags": list(op.tags),
        "parameters": params,
    }
    out["description"] = op.description or op.summary
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
    ok["headers"] = {**op.response_headers, **(_RATE_LIMIT_FIELDS if op.limited else {}),
                     **_VERSION_HEADER}
    if op.status == 201:
        ok["headers"] = {**ok.get("headers", {}), "Location": {
            "description": "the new resource's path", "schema": {"type": "string"}}}
    if op.links:
        ok["links"] = op.links
    responses: dict[str, Any] = {str(op.status): ok}
    for code, answer in op.more.items():
        more = dict(answer)
        if op.limited:  # a 202 or 304 is counted like the success it stands for
            more["headers"] = {**more.get("headers", {}), **_RATE_LIMIT_FIELDS}
        responses[str(code)] = more
    # 414 and 431 come from the worker before any route is known: any operation may get them
    codes = set(op.errors) | {400, 406, 414, 429, 431, 503}
    if op.auth == "admin":
        codes |= {401, 403}
        out["security"] = [{"admin": []}]
    elif op.auth == "organizer":
        codes |= {401, 403}
        out["security"] = [{"bearer": []}, {"admin": []}]
    elif op.auth is not None:
        codes.add(401)
        codes.add(403)  # a suspended bot's token (`suspended`, service.arena.accounts.owners)
        # optional: anonymous ({}) first, as the generators that read it look for it
        out["security"] = [{"bearer": []}] if op.auth == "required" else [{}, {"bearer": []}]
    else:
        out["security"] = []  # public: no token needed, and one sent is ignored
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


def operation_id(endpoint: str) -> str:
    """The operationId of a view: ``OPERATION_IDS``, else its function's name in camelCase."""
    if endpoint in OPERATION_IDS:
        return OPERATION_IDS[endpoint]
    first, *rest = endpoint.rsplit(".", 1)[-1].split("_")
    return first + "".join(w.capitalize() for w in rest)


def build_spec(app: Flask) -> APISpec:
    spec = APISpec(
        title=TITLE,
        version=VERSION,
        openapi_version="3.1.0",
        plugins=[MarshmallowPlugin()],
        info={"description": DESCRIPTION, "license": {"name": "MIT", "identifier": "MIT"},
              "contact": {"name": "the operator of the service that served this document"}},
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
    spec.components.parameter("ArenaApiVersion", "header", {
        "name": versions.HEADER, "required": False,
        "description": "the API version to answer under (a date); omitted: the newest. A "
        "version this service does not serve is 400 `/problems/unknown-api-version`",
        "schema": {"type": "string", "enum": sorted(versions.SERVED)}})
    spec.components.header(versions.HEADER, {
        "description": "the API version this answer was made under (docs/versions.md)",
        "schema": {"type": "string", "pattern": versions.VERSION_RE}})
    for name, header in _RATE_LIMIT_FIELDS.items():  # shared by the counted problems
        spec.components.header(name, header)
    spec.components.schema("Variants", schema=sv.VariantsOut)
    spec.components.schema("CallbackRequest", schema=cs.CallbackRequest)
    spec.components.schema("CallbackAnswer", schema=cs.CallbackAnswer)
    spec.components.schema("VerifyRequest", schema=cs.VerifyRequest)
    spec.components.schema("TournamentNoticeRequest", schema=cs.TournamentNoticeRequest)
    spec.components.schema("VerifyAnswer", schema=cs.VerifyAnswer)
    for schema in sr.EVENTS.values():
        spec.components.schema(schema.__name__, schema=schema)
    by_path: dict[str, dict[str, Any]] = {}
    endpoints = {(r.rule, m.lower()): r.endpoint for r in app.url_map.iter_rules()
                 for m in r.methods or ()}
    for rule, method, op in operations(app.url_map.iter_rules(), app.view_functions):
        path = _path(rule)
        names = re.findall(r"{([a-z_]+)}", path)
        by_path.setdefault(path, {})[method] = _operation(
            op, method, names, operation_id(endpoints[rule, method]))
    ids = [op["operationId"] for ops in by_path.values() for op in ops.values()]
    if len(ids) != len(set(ids)):
        raise ValueError(f"operationIds repeat: {sorted(i for i in ids if ids.count(i) > 1)}")
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


def _absent(member: str) -> dict[str, Any]:
    """Not sent: left out, or null (an optional member sent as null is not sent)."""
    return {"properties": {member: {"type": "null"}}}


def _tournament_rules(doc: dict[str, Any]) -> None:
    """``TournamentCreate``'s cross-field rules (its ``validates_schema``), which
    marshmallow cannot export: ``rounds`` is for Swiss only (not round robin, knockout or
    arena); ``duration`` for an arena, which needs one; ``code`` for a private
    registration only; with trusted duplicate
    twins (``trusted`` and ``duplicate`` not false) ``games_per_pairing`` is even; and
    ``duplicate: true`` without ``trusted`` needs 4 entrants (two tables a round)."""
    create = doc["components"]["schemas"]["TournamentCreate"]
    create["allOf"] = [
        {  # rounds: Swiss only (a knockout's follow from its entrants; an arena has one)
            "if": {"properties": {"format": {"enum": ["round_robin", "knockout", "arena"]}},
                   "required": ["format"]},
            "then": _absent("rounds"),
        },
        {  # an arena has a duration, and only an arena
            "if": {"properties": {"format": {"const": "arena"}}, "required": ["format"]},
            "then": {"required": ["duration"],
                     "properties": {"duration": {"not": {"type": "null"}}}},
            "else": _absent("duration"),
        },
        {  # a join code: private tournaments only
            "if": {"not": {"properties": {"registration": {"const": "private"}},
                           "required": ["registration"]}},
            "then": _absent("code"),
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
    raw["servers"] = SERVERS
    used = dict.fromkeys(t for ops in raw["paths"].values() for op in ops.values()
                         for t in op.get("tags", ()))
    raw["tags"] = [{"name": t, "description": TAGS.get(t, f"The {t} operations")}
                   for t in [*[t for t in TAGS if t in used], *[t for t in used
                                                                   if t not in TAGS]]]
    doc = {k: raw[k] for k in ("openapi", "info", "servers", "tags", "paths", "components")
           if k in raw}
    doc.update(raw)
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False,
                     allow_unicode=True, width=100)
