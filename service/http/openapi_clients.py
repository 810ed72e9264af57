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
* Nullability is ``oneOf`` a schema and ``{type: "null"}``, never a type list
  (``type: [string, "null"]``) nor ``null`` inside an ``enum``: openapi-python-generator
  2.1 read a type list as a required string, and openapi-zod-client 1.18 wrote
  ``z.enum([..., null])``, which does not compile. Every generator reads the ``oneOf``.
* An optional member of a request may be ``null``, read as not sent (``Strict``'s
  ``pre_load``): openapi-python-generator's models send every unset member as null.
* An array of arrays of a ``$ref`` gets the referenced object inline at the inner level:
  openapi-python-generator 2.1 imported the referenced model only one level deep
  (``NameError: CutCard``).
* Header parameters are components, referenced from the operations: openapi-python-generator
  2.1 sends an unset optional inline header as ``None`` (httpx refuses the request before
  it leaves), and leaves a referenced one out (set it with your own httpx hooks).
* A component nothing refers to is dropped (linters flag it, generators make dead types).
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


# keywords that belong to the non-null branch when a nullable schema is split in two
_OUTER = frozenset({"description", "default", "example", "examples", "readOnly", "writeOnly",
                    "deprecated", "title", "x-enum-varnames"})


def _nullable_one_of(node: Any) -> Any:
    """``{type: [X, "null"], ...}`` (and ``enum: [..., null]``) as ``oneOf`` X or null,
    depth first; the description and default stay outside, on the whole."""
    if isinstance(node, list):
        return [_nullable_one_of(v) for v in node]
    if not isinstance(node, dict):
        return node
    node = {k: _nullable_one_of(v) for k, v in node.items()}
    kind = node.get("type")
    if not (isinstance(kind, list) and "null" in kind):
        return node
    rest = [t for t in kind if t != "null"]
    inner = {k: v for k, v in node.items() if k not in _OUTER and k != "type"}
    inner["type"] = rest[0] if len(rest) == 1 else rest
    if isinstance(inner.get("enum"), list):
        inner["enum"] = [v for v in inner["enum"] if v is not None]
        if "x-enum-varnames" in node:
            inner["x-enum-varnames"] = node["x-enum-varnames"]
    outer = {k: v for k, v in node.items() if k in _OUTER and k != "x-enum-varnames"}
    return {"oneOf": [inner, {"type": "null"}], **outer}


def _null_is_not_sent(doc: dict[str, Any]) -> None:
    schemas = doc["components"]["schemas"]
    for name in _closure(request_components(doc), schemas):
        schema = schemas[name]
        required = set(schema.get("required", ()))
        for prop, sub in schema.get("properties", {}).items():
            kind = sub.get("type")
            if prop in required or (isinstance(kind, list) and "null" in kind) \
                    or {"type": "null"} in sub.get("anyOf", ()):
                continue  # required, or nullable already
            inner = {k: v for k, v in sub.items() if k not in _OUTER}
            outer = {k: v for k, v in sub.items() if k in _OUTER}
            text = outer.get("description", "").rstrip()
            said = "null: as if not sent."
            outer["description"] = f"{text}; {said}" if text and not text.endswith(".") \
                else f"{text} {said}".strip()
            schema["properties"][prop] = {"oneOf": [inner, {"type": "null"}], **outer}


def _any_of_null(node: Any) -> None:
    """marshmallow's nullable ``Nested`` is ``anyOf`` [$ref, null]: one reading for all."""
    if isinstance(node, dict):
        branches = node.get("anyOf")
        if isinstance(branches, list) and {"type": "null"} in branches and len(branches) == 2:
            node["oneOf"] = node.pop("anyOf")
        for value in node.values():
            _any_of_null(value)
    elif isinstance(node, list):
        for value in node:
            _any_of_null(value)


def _inline_nested_refs(node: Any, schemas: dict[str, Any]) -> None:
    if isinstance(node, dict):
        items = node.get("items")
        if node.get("type") == "array" and isinstance(items, dict) \
                and items.get("type") == "array" and isinstance(items.get("items"), dict):
            ref = items["items"].get("$ref", "")
            if ref.startswith(_REF):
                items["items"] = json.loads(json.dumps(schemas[ref[len(_REF):]]))
        for value in node.values():
            _inline_nested_refs(value, schemas)
    elif isinstance(node, list):
        for value in node:
            _inline_nested_refs(value, schemas)


def drop_unused(doc: dict[str, Any]) -> None:
    """Remove the components that no operation, webhook or other component names."""
    schemas = doc["components"]["schemas"]
    roots = set(_refs(doc.get("paths", {}))) | set(_refs(doc.get("webhooks", {}))) \
        | set(_refs({k: v for k, v in doc["components"].items() if k != "schemas"}))
    used = _closure(roots, schemas)
    for name in [n for n in schemas if n not in used]:
        del schemas[name]


def for_generators(doc: dict[str, Any]) -> None:
    """Apply the rules above to a built document, in place."""
    schemas = doc["components"]["schemas"]
    _null_is_not_sent(doc)
    for name in sorted(request_only_components(doc)):
        _move_defaults(schemas[name])
    _inline_nested_refs(doc, schemas)
    for key in ("paths", "components", "webhooks"):
        if key in doc:
            doc[key] = _nullable_one_of(doc[key])
    _any_of_null(doc)
    _enum_names(doc)
    open_answers(doc)
    _header_components(doc)
    drop_unused(doc)


def _header_components(doc: dict[str, Any]) -> None:
    params = doc["components"].setdefault("parameters", {})
    for ops in doc.get("paths", {}).values():
        for op in ops.values():
            for i, param in enumerate(op.get("parameters", [])):
                if param.get("in") != "header" or "$ref" in param:
                    continue
                name = param["name"].replace("-", "")
                if params.get(name, param) != param:  # the same header, told otherwise
                    name = op["operationId"][0].upper() + op["operationId"][1:] + name
                params[name] = param
                op["parameters"][i] = {"$ref": f"#/components/parameters/{name}"}


def _unclose(node: Any) -> None:
    if isinstance(node, dict):
        if node.get("additionalProperties") is False:
            del node["additionalProperties"]
        for value in node.values():
            _unclose(value)
    elif isinstance(node, list):
        for value in node:
            _unclose(value)


def open_answers(doc: dict[str, Any]) -> None:
    """Answers may gain members within a version, so no answer schema says
    ``additionalProperties: false`` (datamodel-code-generator made such schemas
    ``extra='forbid'`` models, which would refuse the first new field). What a client
    sends stays closed: a request body, and a bot's answers to the service's webhooks."""
    schemas = doc["components"]["schemas"]
    strict = _closure(request_components(doc), schemas)
    for name, schema in schemas.items():
        if name not in strict:
            _unclose(schema)
    for ops in doc.get("paths", {}).values():
        for op in ops.values():
            _unclose(op.get("responses", {}))
    for ops in doc.get("webhooks", {}).values():
        for op in ops.values():
            _unclose(op.get("requestBody", {}))


def request_components(doc: dict[str, Any]) -> set[str]:
    """Components a client sends: request bodies, and the answers to webhooks."""
    names: set[str] = set()
    for ops in doc.get("paths", {}).values():
        for op in ops.values():
            names |= set(_refs(op.get("requestBody", {})))
    for ops in doc.get("webhooks", {}).values():
        for op in ops.values():
            names |= set(_refs(op.get("responses", {})))
    return names


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
        }

    return {
        "description": "one server-sent event: `event` is its kind, `data` one JSON event "
        "of that kind (its `type` = `event`), `id` its event id. "
        "Between events the stream sends comments (`:` lines) as keep-alives, and `retry:` "
        "alone at the start and before a shutdown",
        "oneOf": [one(kind, schema) for kind, schema in events.items()],
    }
