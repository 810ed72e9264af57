"""Security headers on every answer: what a browser may do with what the service sends.

The API's answers are JSON, problem+json, YAML and an event stream, none of them meant
to be rendered as a page, framed or sniffed into something else; so every answer says
``X-Content-Type-Options: nosniff`` and ``X-Frame-Options: DENY``, and carries a
Content-Security-Policy that allows nothing unless the answer set its own. The pages for
people (``service.web``) set their own policy, as does the API page at ``/docs``:
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
from pathlib import Path

from flask import Flask, Response, request

# Nothing may load, run or frame: for answers that are data, not pages.
API_POLICY = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
DOCS_PREFIX = "/docs"
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


def install(app: Flask) -> None:
    """Add the headers to every answer of ``app`` (errors included)."""

    @app.after_request
    def _security_headers(resp: Response) -> Response:
        headers = resp.headers
        headers.setdefault("X-Content-Type-Options", "nosniff")
        headers.setdefault("X-Frame-Options", "DENY")
        if "Content-Security-Policy" not in headers:
            if (request.path.startswith(DOCS_PREFIX) and resp.mimetype == "text/html"
                    and not resp.is_streamed):
                headers["Content-Security-Policy"] = docs_policy(resp.get_data())
            else:
                headers["Content-Security-Policy"] = API_POLICY
        return resp
