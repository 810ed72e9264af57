"""What the gevent worker answers itself, before gunicorn parses a request or the app runs:
a refusal at its connection cap or past a client's share (``shed``), the held budget's
refusal at the socket, an unparsable request head (``head_error_answer``), each as the
app's problem+json would be, with its access line and metrics (``Refusals``); and the
look at a new connection's request line without taking it (``peek_line``,
``wants_probe``) that decides which. ``service.http.gevent_worker`` explains when."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import secrets
import socket
import time
import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any

import gevent

SHED_READ_S = 1.0  # how long a refused connection's request head is waited for
RETRY_AFTER_S = 1
_PROBE_LINES = tuple(b"GET %s" % p for p in (b"/healthz", b"/readyz", b"/metrics"))

_REASONS = {400: "Bad Request", 408: "Request Timeout", 414: "URI Too Long",
            429: "Too Many Requests", 431: "Request Header Fields Too Large",
            503: "Service Unavailable"}
_TITLES = {  # as service.arena.core.problems.KINDS has them (not imported in gunicorn's master)
    "over-capacity": (503, "The service is at its connection limit; retry shortly"),
    "shutting-down": (503, "This server is shutting down; retry shortly"),
    "too-many-connections": (429, "Too many open streams, long-polls or connections"),
    "malformed-body": (400, "The request body cannot be read"),
    "bad-request": (400, "Bad request"),
    "uri-too-long": (414, "The request line is too long"),
    "header-fields-too-large": (431, "The request's header fields are too large"),
}


def request_path(head: bytes) -> str | None:
    """The path of the request line at the start of ``head`` (None: not one)."""
    line = head.split(b"\r\n", 1)[0].split(b" ")
    return line[1].split(b"?", 1)[0].decode("latin-1") if len(line) == 3 else None


def problem_answer(kind: str, detail: str, path: str | None,
                   retry_after: int | None = None, request_id: str | None = None) -> bytes:
    """A whole HTTP answer that closes the connection: a problem (RFC 9457), with the
    request's path as ``instance`` when its request line could be read, else an id of
    this occurrence (``urn:uuid:``): RFC 9457's instance names the occurrence, and a
    client that reads it as a string must never meet null."""
    status, title = _TITLES[kind]
    instance = path if path is not None else f"urn:uuid:{uuid.uuid4()}"
    body = json.dumps({"type": f"/problems/{kind}", "title": title, "status": status,
                       "detail": detail, "instance": instance},
                      separators=(",", ":")).encode()
    retry = b"Retry-After: %d\r\n" % retry_after if retry_after is not None else b""
    rid = b"X-Request-ID: %s\r\n" % request_id.encode() if request_id else b""
    return (b"HTTP/1.1 %d %s\r\nContent-Type: application/problem+json\r\n%s%s"
            b"Connection: close\r\nCache-Control: no-store\r\n"
            b"Content-Length: %d\r\n\r\n%s"
            % (status, _REASONS[status].encode(), retry, rid, len(body), body))


def shed_response(head: bytes, kind: str = "over-capacity",
                  request_id: str | None = None) -> bytes:
    """The answer to a connection refused at the cap (503 ``over-capacity``) or past its
    client's share (429 ``too-many-connections``)."""
    if kind == "over-capacity":
        detail = ("this worker holds as many connections as it may "
                  "(ARENA_WORKER_CONNECTIONS); retry shortly")
    else:
        detail = ("this client holds as many of this worker's connections as it may "
                  "(ARENA_CLIENT_SHARE); retry shortly")
    return problem_answer(kind, detail, request_path(head), RETRY_AFTER_S, request_id)


_REQUEST_ID = re.compile(rb"\r\nx-request-id:[ \t]*([A-Za-z0-9._:-]{1,64})[ \t]*\r\n", re.I)


def shed(client: Any, kind: str = "over-capacity",
         request_id: Callable[[bytes], str | None] = lambda head: None,
         answer: Callable[[bytes, str | None], bytes] | None = None
         ) -> tuple[bytes, str | None]:
    """Refuse ``client`` quickly: read what it sent (so closing does not reset the
    connection under the answer), answer (``shed_response``, or ``answer(head, request
    id)``), close. Returns what was read (the request's head, when it came in time) and
    the answer's request id (``request_id`` of the head), for the refusal's access line."""
    head = b""
    rid = None
    try:
        client.settimeout(SHED_READ_S)
        with contextlib.suppress(OSError):
            head = client.recv(8192)
        rid = request_id(head)
        client.sendall(answer(head, rid) if answer is not None
                       else shed_response(head, kind, rid))
        client.shutdown(2)
    except OSError:
        pass
    finally:
        client.close()
    return head, rid


class Refusals:
    """The access line and the metrics of a connection the worker refused itself (see the
    module docstring): what the app's ``service.http.observe`` does for the requests it
    answers, for those it never sees. Made in the worker once the app is loaded."""

    def __init__(self, app: Any, access_log: bool) -> None:
        from service import logs, metrics

        self._logs = logs
        self._metrics = metrics
        self._access_log = access_log
        self._urls = app.url_map.bind("arena") if hasattr(app, "url_map") else None
        self._prefix = f"{os.getpid():x}.{secrets.token_hex(3)}-shed"
        self._counter = itertools.count(1)

    def request_id(self, head: bytes) -> str:
        """The client's ``X-Request-ID`` when it is a plain token (as the app takes it),
        else one made here."""
        found = _REQUEST_ID.search(head.split(b"\r\n\r\n", 1)[0] + b"\r\n")
        return found.group(1).decode() if found else f"{self._prefix}{next(self._counter):x}"

    def rule(self, method: str, path: str | None) -> Any:
        """The URL rule ``path`` matches, else None."""
        if path is None or self._urls is None:
            return None
        try:
            rule, _ = self._urls.match(urllib.parse.unquote(path), method, return_rule=True)
        except Exception:  # not found, not allowed, a redirect: no rule of its own
            return None
        return rule

    def route(self, method: str, path: str | None) -> str:
        """The URL rule ``path`` matches (never the raw path: see ``observe``), else
        ``unmatched``."""
        rule = self.rule(method, path)
        return "unmatched" if rule is None else str(rule.rule)

    def waits(self, head: bytes) -> bool:
        """Whether the request line at the start of ``head`` is a stream or a long-poll
        that the held budget counts and may refuse (``connections.waiting_kind``; not an
        action with ``?wait``, which is served without its wait instead)."""
        from service.http.connections import waiting_kind

        line = head.split(b"\r\n", 1)[0].split(b" ")
        if len(line) != 3:
            return False
        target = line[1].decode("latin-1")
        path, _, query = target.partition("?")
        rule = self.rule(line[0].decode("latin-1"), path)
        if rule is None or rule.endpoint == "games.act":
            return False
        args = {k: v[0] for k, v in urllib.parse.parse_qs(query).items()}
        return waiting_kind(rule.endpoint, args) is not None

    def noted(self, head: bytes, rid: str | None, kind: str, limit: str,
              started: float) -> None:
        """One refusal: its access line, its request and problem counts, and
        ``allfours_connections_refused_total{limit}``."""
        seconds = time.perf_counter() - started
        line = head.split(b"\r\n", 1)[0].split(b" ")
        method = line[0].decode("latin-1") if len(line) == 3 else "-"
        route = self.route(method, request_path(head))
        status = _TITLES[kind][0]
        metrics = self._metrics
        metrics.observe_request(route, method, status, seconds)
        metrics.count_problem(kind)
        metrics.connection_refused(limit)
        if self._access_log:
            self._logs.access({"request_id": rid, "method": method, "route": route,
                               "status": status, "duration_ms": round(seconds * 1000, 3),
                               "limit": limit})



def peek_line(client: Any, wait_s: float = SHED_READ_S, most: int = 256) -> bytes:
    """The start of the connection's first request, up to its line's end or ``most``
    bytes, looked at without taking it off the socket (``MSG_PEEK``), for at most
    ``wait_s`` seconds (b"": nothing came, or the connection ended)."""
    until = time.monotonic() + wait_s
    seen = b""
    try:
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return seen
            client.settimeout(left)
            seen = client.recv(most, socket.MSG_PEEK)
            if not seen or b"\r\n" in seen or len(seen) >= most:
                return seen
            gevent.sleep(0.005)  # the rest of the line is on its way
    except OSError:
        return seen
    finally:
        with contextlib.suppress(OSError):
            client.settimeout(None)


def wants_probe(client: Any, wait_s: float = SHED_READ_S) -> bool:
    """Whether the connection's first request line is a probe (``GET /healthz``,
    ``/readyz``, ``/metrics``), looked at without taking it off the socket (``MSG_PEEK``),
    for at most ``wait_s`` seconds."""
    seen = peek_line(client, wait_s, 64)
    if b"\r\n" not in seen and len(seen) < 64:
        return False  # no whole line in time: not served from the reserve
    return any(seen.startswith(p) and seen[len(p):len(p) + 1] in (b" ", b"?")
               for p in _PROBE_LINES)


def head_error_answer(exc: BaseException) -> bytes | None:
    """The problem answer to a request head gunicorn could not parse (None: leave it to
    gunicorn, e.g. a TLS or proxy-protocol error)."""
    from gunicorn.http import errors

    text = str(exc)
    if isinstance(exc, errors.LimitRequestLine):
        return problem_answer("uri-too-long", text, None)
    if isinstance(exc, errors.LimitRequestHeaders):
        return problem_answer("header-fields-too-large", text, None)
    req = getattr(exc, "req", None)
    path = getattr(req, "path", None)
    if isinstance(exc, (errors.InvalidChunkSize, errors.ChunkMissingTerminator,
                        errors.InvalidChunkExtension, errors.UnsupportedTransferCoding)) or (
            isinstance(exc, errors.InvalidHeader)
            and getattr(exc, "hdr", "") in ("CONTENT-LENGTH", "TRANSFER-ENCODING")):
        return problem_answer("malformed-body", f"the request body cannot be read: {text}",
                              path)
    if isinstance(exc, (errors.InvalidRequestLine, errors.InvalidRequestMethod,
                        errors.InvalidHTTPVersion, errors.InvalidHeader,
                        errors.InvalidHeaderName, errors.ObsoleteFolding)):
        return problem_answer("bad-request", text, path)
    return None


