"""``GET /problems/<kind>``: the page a problem's ``type`` URI names (RFC 9457 wants a type
URI a person can open). One text per kind (``service.arena.core.problem_texts``), in the
form the client asks for: HTML for people, Markdown or JSON for tools (``Accept``)."""

from __future__ import annotations

import json
import re

from flask import Blueprint, Response, request
from markupsafe import Markup, escape

from service.arena.core.problem_texts import TEXTS
from service.arena.core.problems import KINDS, Problem

bp = Blueprint("problem_pages", __name__)

_OFFERS = ("text/html", "text/markdown", "application/json")
_CODE = re.compile(r"`([^`]+)`")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def _texts(kind: str) -> tuple[str, str]:
    """The kind's two texts, sentences, their links as the project's paths (the table
    they come from is docs/reference.md's, whose links are relative to docs/)."""
    def fix(text: str) -> str:
        text = _LINK.sub(lambda m: f"[{m[1]}](docs/{'bots.md' if m[2].startswith('#') else ''}"
                         f"{m[2]})", text)
        return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")
    when, todo = TEXTS[kind]
    return fix(when), fix(todo)


def _markdown(kind: str) -> str:
    status, title = KINDS[kind]
    when, todo = _texts(kind)
    return (f"# {title}\n\n`/problems/{kind}` · HTTP {status}\n\n"
            f"## When\n\n{when}\n\n## What a bot should do\n\n{todo}\n")


def _html_text(text: str) -> Markup:
    """The text, escaped, with its `code` spans as ``<code>`` and its links as their
    words followed by the path (``docs/…`` is the project's, not this server's)."""
    html = _CODE.sub(r"<code>\1</code>", str(escape(text)))
    return Markup(_LINK.sub(r"\1 (<code>\2</code>)", html))


def _html(kind: str) -> str:
    status, title = KINDS[kind]
    when, todo = _texts(kind)
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{escape(title)} · All Fours Arena</title>"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"></head>"
        f"<body><main><h1>{escape(title)}</h1>"
        f"<p><code>/problems/{escape(kind)}</code> · HTTP {status}</p>"
        f"<h2>When</h2><p>{_html_text(when)}</p>"
        f"<h2>What a bot should do</h2><p>{_html_text(todo)}</p>"
        "<p><a href=\"/problems\">Every problem type</a> · <a href=\"/docs\">The API</a></p>"
        "</main></body></html>\n")


def _answer(html: str, markdown: str, data: object) -> Response:
    best = request.accept_mimetypes.best_match(_OFFERS) if request.headers.get("Accept") \
        else "text/html"
    if best is None:
        raise Problem("not-acceptable", f"this answers with {', '.join(_OFFERS)}")
    if best == "text/markdown":
        resp = Response(markdown, mimetype="text/markdown")
    elif best == "application/json":
        resp = Response(json.dumps(data), mimetype="application/json")
    else:
        resp = Response(html, mimetype="text/html")
    resp.headers["Vary"] = "Accept"
    resp.headers["Cache-Control"] = "public, max-age=3600"
    return resp


@bp.get("/problems/<kind>")
def problem_page(kind: str) -> Response:
    """What one problem type means and what a bot should do about it."""
    if kind not in KINDS:
        raise Problem("not-found", f"no problem type {kind!r}")
    status, title = KINDS[kind]
    when, todo = _texts(kind)
    return _answer(_html(kind), _markdown(kind), {
        "type": f"/problems/{kind}", "status": status, "title": title,
        "when": when, "what_to_do": todo})


@bp.get("/problems")
def problem_index() -> Response:
    """Every problem type, linked to its page."""
    rows = "".join(f"<li><a href=\"/problems/{k}\"><code>/problems/{k}</code></a> "
                   f"({s}): {escape(t)}</li>" for k, (s, t) in KINDS.items())
    html = ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>Problem types · All Fours Arena</title></head><body><main>"
            f"<h1>Problem types</h1><ul>{rows}</ul></main></body></html>\n")
    markdown = "# Problem types\n\n" + "".join(
        f"- [`/problems/{k}`](/problems/{k}) ({s}): {t}\n" for k, (s, t) in KINDS.items())
    return _answer(html, markdown, [{"type": f"/problems/{k}", "status": s, "title": t}
                                    for k, (s, t) in KINDS.items()])
