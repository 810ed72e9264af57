"""The API page for people at ``/docs``: ``openapi.yaml`` read as a document.

Rendered on the server from the same spec the service publishes (``spec_yaml``), as plain
HTML — headings, tables, code — with no script at all: a screen reader, a keyboard or a
phone reads it as any page of the site, and axe-core finds nothing to flag. swagger-ui,
whose page has controls nested in controls and text below the contrast a reader needs,
stays at ``/docs/try/`` for trying requests out.

The descriptions are the spec's own small Markdown (paragraphs, lists, ``code``,
``**bold**``, ``*emphasis*``): ``markdown`` turns exactly that into HTML, escaping
everything else, so no text of the spec can become markup.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from markupsafe import Markup, escape

METHODS = ("get", "post", "put", "patch", "delete")
# The tags in the order a bot author meets them; any other tag follows.
TAG_ORDER = ("bots", "games", "tournaments", "ladders", "service", "admin")
_INLINE = re.compile(r"`([^`]+)`|\*\*([^*]+)\*\*|(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])")
_ITEM = re.compile(r"^(\s*)(?:[-*]|\d+\.)\s+")


def inline(text: str) -> str:
    """One line or paragraph's inline Markdown, escaped."""
    out, at = [], 0
    for m in _INLINE.finditer(text):
        out.append(str(escape(text[at:m.start()])))
        code, bold, em = m.groups()
        if code is not None:
            out.append(f"<code>{escape(code)}</code>")
        elif bold is not None:
            out.append(f"<strong>{escape(bold)}</strong>")
        else:
            out.append(f"<em>{escape(em)}</em>")
        at = m.end()
    out.append(str(escape(text[at:])))
    return "".join(out)


def markdown(text: str | None) -> Markup:
    """Paragraphs and lists (``-``, ``*`` or ``1.`` items, continued by indented lines)."""
    if not text:
        return Markup("")
    html: list[str] = []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = block.split("\n")
        if _ITEM.match(lines[0]):
            ordered = bool(re.match(r"^\s*\d+\.", lines[0]))
            items: list[str] = []
            for line in lines:
                if _ITEM.match(line):
                    items.append(_ITEM.sub("", line))
                elif items:
                    items[-1] += " " + line.strip()
            tag = "ol" if ordered else "ul"
            html.append(f"<{tag}>" + "".join(f"<li>{inline(i)}</li>" for i in items)
                        + f"</{tag}>")
        else:
            html.append(f"<p>{inline(' '.join(x.strip() for x in lines))}</p>")
    return Markup("".join(html))


def type_of(schema: dict[str, Any] | None) -> Markup:
    """A schema's type in words, a named schema as a link to its section."""
    if not schema:
        return Markup("any")
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return Markup(f'<a href="#schema-{escape(name)}">{escape(name)}</a>')
    for key in ("oneOf", "anyOf", "allOf"):
        if key in schema:
            joiner = " and " if key == "allOf" else " or "
            return Markup(joiner.join(str(type_of(s)) for s in schema[key]))
    kind = schema.get("type")
    if isinstance(kind, list):  # OpenAPI 3.1: ["string", "null"]
        kind = " or ".join(str(k) for k in kind)
    if kind == "array":
        return Markup(f"array of {type_of(schema.get('items'))}")
    text = str(escape(kind or "object"))
    if "enum" in schema:
        text += ": " + ", ".join(f"<code>{escape(v)}</code>" for v in schema["enum"])
    limits = [f"{k} {schema[k]}" for k in ("minimum", "maximum", "minLength", "maxLength",
                                           "minItems", "maxItems") if k in schema]
    if "pattern" in schema:
        limits.append(f"pattern <code>{escape(schema['pattern'])}</code>")
    if limits:
        text += f' <span class="muted">({", ".join(limits)})</span>'
    return Markup(text)


def _body_schema(content: dict[str, Any] | None) -> tuple[str, dict[str, Any]] | None:
    for media, spec in (content or {}).items():
        return media, spec.get("schema") or {}
    return None


def _operation(path: str, method: str, op: dict[str, Any]) -> dict[str, Any]:
    security = op.get("security")
    auth = "none"
    if security:
        schemes = {k for s in security for k in s}
        optional = any(not s for s in security)
        auth = ("admin token" if "admin" in schemes else
                "a bot's token, optional" if optional else "a bot's token")
    body = (op.get("requestBody") or {})
    responses = []
    for status, resp in (op.get("responses") or {}).items():
        if "$ref" in resp:  # a shared problem answer
            resp = {"description": resp["$ref"].rsplit("/", 1)[-1]}
        found = _body_schema(resp.get("content"))
        responses.append({"status": status, "description": markdown(resp.get("description")),
                          "type": type_of(found[1]) if found else Markup(""),
                          "media": found[0] if found else ""})
    found = _body_schema(body.get("content"))
    return {
        "id": op.get("operationId") or f"{method}-{path}",
        "method": method.upper(), "path": path, "summary": op.get("summary", ""),
        "description": markdown(op.get("description")), "auth": auth,
        "parameters": [{"name": p["name"], "where": p["in"], "required": p.get("required", False),
                        "type": type_of(p.get("schema")),
                        "description": markdown(p.get("description"))}
                       for p in op.get("parameters", []) if "name" in p],
        "body": ({"type": type_of(found[1]), "media": found[0],
                  "required": body.get("required", False)} if found else None),
        "responses": responses,
    }


def _schema(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    required = set(schema.get("required") or [])
    return {
        "name": name, "description": markdown(schema.get("description")),
        "type": type_of({k: v for k, v in schema.items() if k != "properties"})
        if "properties" not in schema else Markup("object"),
        "properties": [{"name": k, "required": k in required, "type": type_of(v),
                        "description": markdown(v.get("description"))}
                       for k, v in (schema.get("properties") or {}).items()],
    }


def document(spec_text: str) -> dict[str, Any]:
    """What the page shows, from the spec's YAML: the introduction, the operations grouped
    by tag, the webhooks the service sends, and every named schema."""
    spec = yaml.safe_load(spec_text)
    groups: dict[str, list[dict[str, Any]]] = {}
    for path, item in spec.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                tag = (item[method].get("tags") or ["other"])[0]
                groups.setdefault(tag, []).append(_operation(path, method, item[method]))
    order = [t for t in TAG_ORDER if t in groups] + sorted(set(groups) - set(TAG_ORDER))
    hooks = [_operation(name, method, item[method])
             for name, item in (spec.get("webhooks") or {}).items()
             for method in METHODS if method in item]
    schemas = spec.get("components", {}).get("schemas", {})
    return {
        "title": spec["info"]["title"], "version": spec["info"]["version"],
        "intro": markdown(spec["info"].get("description")),
        "groups": [(tag, groups[tag]) for tag in order],
        "webhooks": hooks,
        "schemas": [_schema(name, schemas[name]) for name in sorted(schemas)],
    }
