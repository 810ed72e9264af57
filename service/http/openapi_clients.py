"""What the common client generators need of ``openapi.yaml`` (issue 24), applied to the
document ``service.http.openapi`` builds from the schemas. Each rule here answers a way a
generator, run with its default settings, made an unusable client of the contract as
marshmallow exports it; tests/clients/test_generated_clients.py runs the generators.

* Request bodies carry no ``default``: openapi-typescript 7 (``defaultNonNullable``)
  makes every property with a default required, so a bot could not send one house rule
  alone. The default moves into the description (``Default: 14.``); the service applies
  it as before, and the response shapes (``Variants``) keep theirs.
* Enums whose members are not words (``players: 2 | 4``, the problem types) get
  ``x-enum-varnames``, which openapi-python-client, @hey-api/openapi-ts and
  openapi-typescript's ``--enum`` read, so members are ``TWO_PLAYERS``, not ``VALUE_2``.
  The wire values do not change.
* The event stream's schema is the schema of one event (OpenAPI 3.1 reads a
  ``text/event-stream`` schema so): its ``id``, ``event`` and ``data``, the data a JSON
  string whose ``contentSchema`` is that kind's event, so schemathesis validates each.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

# names per property where the number alone says little; others get NUMBER_WORDS
ENUM_NAMES: dict[str, dict[int, str]] = {
    "players": {2: "TWO_PLAYERS", 4: "FOUR_PLAYERS"},
    "game_point_value": {1: "ONE_POINT", 2: "TWO_POINTS"},
    "team": {0: "TEAM_0", 1: "TEAM_1"},
}
NUMBER_WORDS = {0: "ZERO", 1: "ONE", 2: "TWO", 3: "THREE", 4: "FOUR"}
_REF = "#/components/schemas/"


def _refs(node: Any) -> Iterator[str]:
    """Every component a (part of the) document names with ``$ref``."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF):
            yield ref[len(_REF):]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _closure(names: set[str], schemas: dict[str, Any]) -> set[str]:
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen or name not in schemas:
            continue
        seen.add(name)
        todo.extend(_refs(schemas[name]))
    return seen


def request_only_components(doc: dict[str, Any]) -> set[str]:
    """Components reached from a request body and from no response (nor webhook)."""
    schemas = doc["components"]["schemas"]
    bodies: set[str] = set()
    answers: set[str] = set()
    for ops in doc.get("paths", {}).values():
        for op in ops.values():
            bodies |= set(_refs(op.get("requestBody", {})))
            answers |= set(_refs(op.get("responses", {})))
    answers |= set(_refs(doc.get("webhooks", {})))
    return _closure(bodies, schemas) - _closure(answers, schemas)


def _move_defaults(schema: dict[str, Any]) -> None:
    for prop in schema.get("properties", {}).values():
        if "default" not in prop:
            continue
        said = f"Default: {json.dumps(prop.pop('default'))}."
        text = prop.get("description", "").rstrip()
        prop["description"] = f"{text}. {said}" if text and not text.endswith(".") \
            else f"{text} {said}".strip()


def _enum_names(node: Any, prop: str | None = None) -> None:
    if isinstance(node, dict):
        values = node.get("enum")
        if isinstance(values, list) and None not in values and "x-enum-varnames" not in node:
            if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
                names = ENUM_NAMES.get(prop or "", {})
                node["x-enum-varnames"] = [names.get(v) or NUMBER_WORDS.get(v, f"N{v}")
                                           for v in values]
            elif all(isinstance(v, str) and v.startswith("/problems/") for v in values):
                node["x-enum-varnames"] = [v.removeprefix("/problems/").replace("-", "_")
                                           .upper() for v in values]
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    _enum_names(sub, name)
            else:
                _enum_names(value, prop if key in ("items", "allOf", "oneOf", "anyOf",
                                                   "schema") else None)
    elif isinstance(node, list):
        for value in node:
            _enum_names(value, prop)


def for_generators(doc: dict[str, Any]) -> None:
    """Apply the rules above to a built document, in place."""
    schemas = doc["components"]["schemas"]
    for name in sorted(request_only_components(doc)):
        _move_defaults(schemas[name])
    _enum_names(doc)


def event_stream_schema(events: dict[str, type], id_pattern: str) -> dict[str, Any]:
    """The schema of one server-sent event of ``GET /games/{game_id}/events``, one branch
    per kind (the SSE ``event:`` field is the data's ``type``)."""
    def one(kind: str, schema: type) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["event", "data"],
            "properties": {
                "id": {"type": "string", "pattern": id_pattern,
                       "description": "the event id (`Last-Event-ID` resumes after it)"},
                "event": {"const": kind},
                "data": {"type": "string", "contentMediaType": "application/json",
                         "contentSchema": {"$ref": f"{_REF}{schema.__name__}"}},
                "retry": {"type": "integer", "minimum": 0},
            },
            "additionalProperties": False,
        }

    return {
        "description": "one server-sent event: `event` is its kind, `data` one JSON `Event` "
        "of that kind (#/components/schemas/Event, `type` = `event`), `id` its event id. "
        "Between events the stream sends comments (`:` lines) as keep-alives, and `retry:` "
        "alone at the start and before a shutdown",
        "oneOf": [one(kind, schema) for kind, schema in events.items()],
    }
