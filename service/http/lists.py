"""The one list shape and the conditional GET every polled resource shares.

Every list answers ``{"items": [...], "next_cursor": ...}`` (null once through) and, when
there is a next page, ``Link: <same path and query, with cursor>; rel="next"``
(RFC 8288): a client follows either. A cursor is opaque: pass back what you were given.

A polled resource sends an ``ETag``; ``If-None-Match`` with it is answered ``304 Not
Modified`` with no body. Where the resource has a version (a game), the 304 is decided
before anything is rendered (``not_modified``); elsewhere the ETag is a digest of the
answer (``conditional``), which saves the transfer, not the work.
"""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import urlencode

from flask import Response, request
from marshmallow import Schema, fields, validate

from service.http.api import respond
from service.http.schemas.common import Strict

LIMIT_MAX = 100
LINK = {"Link": {"description": "`<this path and query with the next page's cursor>; "
                 "rel=\"next\"` (RFC 8288) when there is a next page: the same as "
                 "`next_cursor`", "schema": {"type": "string"}}}
ETAG = {"ETag": {"description": "a tag of this answer, quoted: send it back in "
                 "`If-None-Match` to be answered 304 (no body) while it is unchanged",
                 "schema": {"type": "string"}}}
IF_NONE_MATCH = {"name": "If-None-Match", "in": "header", "required": False,
                 "description": "an `ETag` of an earlier answer: 304, with no body, while "
                 "the answer would be the same", "schema": {"type": "string"}}
NOT_MODIFIED = {304: {"description": "Not Modified: the answer is still the one your "
                      "`If-None-Match` names; no body", "headers": ETAG}}
# What a conditional GET operation adds to its ``@operation`` (``**CONDITIONAL``).
CONDITIONAL: dict[str, Any] = {"headers_in": (IF_NONE_MATCH,), "more": NOT_MODIFIED}


class PageQuery(Strict):
    """``limit`` and ``cursor`` of a list whose cursor is a position (an offset)."""

    limit = fields.Int(validate=validate.Range(1, LIMIT_MAX), load_default=LIMIT_MAX,
                       metadata={"description": "items per page"})
    cursor = fields.Int(validate=validate.Range(0, 2**31), metadata={
        "description": "`next_cursor` of the previous page (opaque)"})


def page_of(rows: list[Any], limit: int, cursor: int | None) -> tuple[list[Any], int | None]:
    """One page of a list held whole (short lists: a log capped in length, a bot's
    pending invitations): (its items, the next cursor or None)."""
    start = cursor or 0
    end = start + limit
    return rows[start:end], (end if end < len(rows) else None)


def with_next(resp: Response, next_cursor: Any) -> Response:
    """``Link: rel="next"`` to this request's path and query with ``cursor`` replaced."""
    if next_cursor is not None:
        args = [(k, v) for k, v in request.args.items(multi=True) if k != "cursor"]
        args.append(("cursor", str(next_cursor)))
        resp.headers["Link"] = f'<{request.path}?{urlencode(args)}>; rel="next"'
    return resp


def respond_page(schema: Schema | None, data: dict[str, Any], status: int = 200,
                 headers: dict[str, str] | None = None) -> Response:
    """A list's answer: the body, its ``Link`` header and its ETag (``conditional``)."""
    resp = with_next(respond(schema, data, status, headers), data.get("next_cursor"))
    return conditional(resp)


def _asked(etag: str) -> bool:
    raw = request.headers.get("If-None-Match")
    if not raw:
        return False
    bare = etag.removeprefix("W/")
    return any(t == "*" or t.removeprefix("W/") == bare
               for t in (t.strip() for t in raw.split(",")))


def not_modified(etag: str) -> Response | None:
    """A 304 when ``If-None-Match`` names ``etag`` (weak comparison, RFC 9110), else
    None: call before rendering, with the resource's version as its ETag."""
    if request.method not in ("GET", "HEAD") or not _asked(etag):
        return None
    resp = Response(status=304, mimetype="application/json")
    resp.headers["ETag"] = etag
    return resp


def conditional(resp: Response) -> Response:
    """A 200 JSON answer with a weak ETag of its body, or a 304 when the client has it."""
    if resp.status_code != 200 or request.method not in ("GET", "HEAD"):
        return resp
    tag = 'W/"' + hashlib.blake2b(resp.get_data(), digest_size=12).hexdigest() + '"'
    return not_modified(tag) or _tagged(resp, tag)


def _tagged(resp: Response, tag: str) -> Response:
    resp.headers["ETag"] = tag
    return resp


__all__ = ["CONDITIONAL", "ETAG", "LINK", "PageQuery", "conditional", "not_modified",
           "page_of", "respond_page", "with_next"]
