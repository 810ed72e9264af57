"""``openapi.yaml`` generated from the code: the routes' ``@operation`` declarations and
the marshmallow schemas. ``tests/service/test_openapi.py`` fails when the committed file
differs from what this writes, so the contract cannot drift.

Regenerate with ``python -m service.openapi > openapi.yaml``.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import yaml
from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from flask import Flask

from . import schemas as s
from .api import JSON_MAX_DEPTH, MAX_BODY_BYTES, Operation, operations
from .problems import KINDS

TITLE = "All Fours Arena"
VERSION = "0.1.0"

DESCRIPTION = """\
Bots play Trinidad All Fours (rule book: R1–R23) against each other over HTTP.

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

Every view carries a `version`; send it back (`version` or `If-Match`) to refuse an action
if the game moved on, and an `Idempotency-Key` to retry safely. Every error is
`application/problem+json` (RFC 9457) with a stable `type`:
""" + "\n".join(
    f"- `/problems/{kind}` ({status}): {title}" for kind, (status, title) in KINDS.items()
)

_STATUS_TEXT = {
    400: "Malformed JSON or bad request (`/problems/malformed-json`, `/problems/bad-request`); "
    f"a body may be nested at most {JSON_MAX_DEPTH} levels (arrays and objects)",
    401: "Missing, malformed or unknown bearer token (`/problems/unauthorized`)",
    403: "Your bot does not hold that seat (`/problems/forbidden-seat`), or the call needs "
    "the admin token (`/problems/forbidden`)",
    404: "No such game, bot, seat or tournament (`/problems/not-found`)",
    409: "Conflict with the game as it is now: `/problems/illegal-action` (with the `rule` "
    "broken, e.g. R14), `/problems/not-your-turn`, `/problems/version-conflict` (with "
    "`current_version`), `/problems/seat-taken`, `/problems/game-not-started`",
    412: "If-Match is stale (`/problems/precondition-failed`)",
    413: f"Body too large (`/problems/payload-too-large`): a body may be at most {MAX_BODY_BYTES} "
    "bytes, with or without Content-Length",
    422: "Invalid request (`/problems/validation`, with `errors` per field), or an "
    "Idempotency-Key reused with another body (`/problems/idempotency-key-reused`)",
    429: "Rate limited (`/problems/rate-limited`); see Retry-After",
    503: "Redis unavailable (`/problems/service-unavailable`); retry after Retry-After",
}
_RETRY_AFTER = {"Retry-After": {"description": "seconds to wait", "schema": {"type": "string"}}}


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
    else:
        content = {op.content_type: {"schema": {"type": "string"}}}
    ok: dict[str, Any] = {"description": "OK" if op.status == 200 else "Created",
                          "content": content}
    if op.response_headers:
        ok["headers"] = op.response_headers
    if op.links:
        ok["links"] = op.links
    responses: dict[str, Any] = {str(op.status): ok}
    codes = set(op.errors) | {429, 503}
    if op.auth == "admin":
        codes |= {401, 403}
        out["security"] = [{"admin": []}]
    elif op.auth is not None:
        codes.add(401)
        out["security"] = [{"bearer": []}] if op.auth == "required" else [{"bearer": []}, {}]
    if op.body is not None:
        codes |= {400, 413, 422}
    if op.query is not None or op.headers_in:
        codes.add(422)
    for code in sorted(codes):
        responses[str(code)] = _error(code)
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
    spec.components.schema("Problem", schema=s.ProblemSchema)
    by_path: dict[str, dict[str, Any]] = {}
    for rule, method, op in operations(app.url_map.iter_rules(), app.view_functions):
        path = _path(rule)
        names = re.findall(r"{([a-z_]+)}", path)
        op_id = method + "".join(
            p.capitalize() for p in re.split(r"[/_{}-]+", path) if p
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
    marshmallow cannot export: ``rounds`` is for Swiss only, and with duplicate deals (the
    default) ``games_per_pairing`` is even."""
    create = doc["components"]["schemas"]["TournamentCreate"]
    create["allOf"] = [
        {
            "if": {"properties": {"format": {"const": "round_robin"}}, "required": ["format"]},
            "then": {"not": {"required": ["rounds"]}},
        },
        {
            "if": {"not": {"properties": {"duplicate": {"const": False}},
                           "required": ["duplicate"]}},
            "then": {"properties": {"games_per_pairing": {"multipleOf": 2}}},
        },
    ]


class _Dumper(yaml.SafeDumper):
    """No anchors/aliases (some tools mishandle them) and block style for long text."""

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
    doc = {k: raw[k] for k in ("openapi", "info", "paths", "components") if k in raw}
    doc.update(raw)
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False,
                     allow_unicode=True, width=100)


def main() -> int:
    """``python -m service.openapi``: print the spec (the app is built without Redis I/O)."""
    from .app import create_app  # here, not at the top: app imports this module

    sys.stdout.write(spec_yaml(create_app()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
