"""Security headers on every answer: what a browser may do with what the service sends.

The API's answers are JSON, problem+json, YAML and an event stream, none of them meant
to be rendered as a page, framed or sniffed into something else; so every answer says
``X-Content-Type-Options: nosniff`` and ``X-Frame-Options: DENY``, and carries a
Content-Security-Policy that allows nothing unless the answer set its own. The pages for
people (``service.http.pages``) set their own policy, as does the API page at ``/docs``:
swagger-ui's page (from flask-swagger-ui, assets served locally) starts the UI from one
inline script, which its policy allows by that script's hash (the script holds the page's
own URL, so the hash is taken from each answer) rather than by ``'unsafe-inline'``;
and its scripts add ``<style>`` elements of fixed text (the logo's colours), allowed by
their hashes too, read from the bundled scripts themselves so an upgrade keeps working.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flask import Blueprint, Flask, Response

# Nothing may load, run or frame: for answers that are data, not pages.
API_POLICY = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
_DOCS_POLICY = (
    "default-src 'self'; script-src 'self' {hashes}; style-src 'self' {styles}; "
    "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
_INLINE_SCRIPT = re.compile(rb"<script>(.*?)</script>", re.DOTALL)
_STYLE_ELEMENT = re.compile(rb'createElement\("style",null,"([^"\\]*)"\)')


def _sha256(text: bytes) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text).digest()).decode() + "'"


@functools.cache
def _swagger_styles() -> str:
    """Hashes of the ``<style>`` texts swagger-ui's scripts create."""
    try:
        import flask_swagger_ui

        dist = Path(flask_swagger_ui.__file__).parent / "dist"
        found = {m.group(1) for js in dist.glob("*.js")
                 for m in _STYLE_ELEMENT.finditer(js.read_bytes())}
    except (ImportError, OSError):
        return ""
    return " ".join(sorted(_sha256(text) for text in found))


def docs_policy(html: bytes) -> str:
    """The /docs page's policy: its own origin, plus its inline scripts by hash."""
    hashes = " ".join(_sha256(m.group(1)) for m in _INLINE_SCRIPT.finditer(html))
    return _DOCS_POLICY.format(hashes=hashes, styles=_swagger_styles()).replace(" ;", ";")


class SecurityHeaders:
    """WSGI wrapper: adds the headers as the answer starts, unless the answer set them.

    At the WSGI level rather than in an ``after_request`` hook: appending to the list of
    header pairs costs next to nothing, where werkzeug's ``Headers`` lookups on every
    answer were a measurable part of a small request (``bench/http_cost.py``)."""

    def __init__(self, wsgi_app: Callable[..., Any]) -> None:
        self.wsgi_app = wsgi_app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            names = {name.lower() for name, _ in headers}
            for name, value in _DEFAULTS:
                if name.lower() not in names:
                    headers.append((name, value))
            return start_response(status, headers, exc_info)

        return self.wsgi_app(environ, start)


_DEFAULTS = (
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Content-Security-Policy", API_POLICY),
)


def docs_hook(resp: Response) -> Response:
    """For the swagger-ui blueprint (``/docs``): its page's own policy."""
    if resp.mimetype == "text/html" and not resp.is_streamed:
        resp.headers["Content-Security-Policy"] = docs_policy(resp.get_data())
    return resp


def install(app: Flask, docs: Blueprint) -> None:
    """Add the headers to every answer of ``app`` (errors included); ``docs`` is the
    swagger-ui blueprint, not yet registered."""
    docs.after_request(docs_hook)
    app.wsgi_app = SecurityHeaders(app.wsgi_app)  # type: ignore[method-assign]
