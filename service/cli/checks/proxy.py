"""The real TCP proxy ``allfours check-bot`` puts between a bot and the service.

Why a proxy rather than hooks in the service: every situation check-bot injects must be
real for the bot — real sockets, the service's real answers — and the service must stay
the one that plays everywhere else. The proxy forwards each HTTP/1.1 request it reads to
the service and logs it (when, which game, which key, what the service answered), and a
situation may install one-shot :class:`Rule` s that, for the request they match:

* ``answer``: answer it themselves (429 or 503 with ``Retry-After``) — nothing reaches
  the service, exactly as when the service refuses;
* ``hold``: keep it until a condition (e.g. the game moved on), then forward it;
* ``drop``: forward it, let the service apply it and answer, then cut the bot's
  connection without a byte of that answer (the answer lost after the action applied);
* ``cut``: close the connection at once, unanswered and not forwarded (for webhook mode,
  where the proxy stands between the service and a webhook bot: a call that met a broken
  connection, which the service retries).

While the service is down (a restart), a request finds no upstream and the bot's
connection is closed unanswered, as a refused connection would leave it.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

_GAME_PATH = re.compile(r"^/games/([^/?]+)")
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection"}
UPSTREAM_TIMEOUT = 90.0  # longer than any long-poll a bot may ask for (30 s) plus slack


@dataclass
class Exchange:
    """One request the bot sent and what became of it."""

    seq: int
    start: float  # time.monotonic() when the request was read
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any  # parsed JSON, or None
    end: float | None = None
    status: int | None = None  # what the bot received (None: nothing: dropped, no service)
    service_status: int | None = None  # what the service answered (None: not forwarded)
    answer: Any = None  # the service's JSON answer
    injected: str | None = None  # the rule that acted on it
    outcome: str = "forwarded"  # forwarded, answered, dropped, no-service, held, cut
    raw: bytes = b""  # the request body as it came (webhook mode replays a request)

    @property
    def game(self) -> str | None:
        m = _GAME_PATH.match(self.path)
        return m.group(1) if m else None

    @property
    def is_action(self) -> bool:
        return self.method == "POST" and self.path.endswith("/actions")

    @property
    def key(self) -> str | None:
        return self.headers.get("idempotency-key")

    @property
    def problem(self) -> str | None:
        if isinstance(self.answer, dict) and isinstance(self.answer.get("type"), str):
            return self.answer["type"]
        return None


@dataclass
class Rule:
    """A one-shot injection: the first request ``match`` accepts gets ``kind`` done to it."""

    name: str
    match: Callable[[Exchange], bool]
    kind: str  # "answer", "hold", "drop", "cut"
    status: int = 503
    retry_after: int = 1
    hold_until: Callable[[], bool] | None = None
    hold_max: float = 30.0
    fired: Exchange | None = None
    done: threading.Event = field(default_factory=threading.Event)


_PROBLEMS = {
    429: ("/problems/rate-limited", "Too many requests"),
    503: ("/problems/service-unavailable", "Service unavailable"),
}


class CheckProxy:
    """A threaded proxy on ``127.0.0.1:<port>`` in front of ``upstream`` (host, port)."""

    def __init__(self, upstream: tuple[str, int], port: int = 0) -> None:
        self.upstream = upstream
        self.log: list[Exchange] = []
        self.rules: list[Rule] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._serve(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", port), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="check-proxy")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> CheckProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add(self, rule: Rule) -> Rule:
        with self._lock:
            self.rules.append(rule)
        return rule

    def exchanges(self, since: float = 0.0, until: float | None = None) -> list[Exchange]:
        with self._lock:
            return [e for e in self.log
                    if e.start >= since and (until is None or e.start <= until)]

    # --- serving -----------------------------------------------------------------------

    def _take_rule(self, ex: Exchange) -> Rule | None:
        with self._lock:
            for rule in self.rules:
                if rule.fired is None and rule.match(ex):
                    rule.fired = ex
                    ex.injected = rule.name
                    return rule
        return None

    def _serve(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rfile = conn.makefile("rb")
        try:
            while True:
                request = _read_request(rfile)
                if request is None:
                    return
                method, target, headers, raw = request
                split = urlsplit(target)
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                with self._lock:
                    ex = Exchange(len(self.log), time.monotonic(), method, split.path,
                                  parse_qs(split.query), headers, body, raw=raw)
                    self.log.append(ex)
                rule = self._take_rule(ex)
                keep = headers.get("connection", "").lower() != "close"
                try:
                    if rule is not None and rule.kind == "cut":
                        ex.outcome, ex.end = "cut", time.monotonic()
                        return
                    if rule is not None and rule.kind == "answer":
                        self._answer(conn, ex, rule, keep)
                        rule.done.set()
                        if not keep:
                            return
                        continue
                    if rule is not None and rule.kind == "hold":
                        ex.outcome = "held"
                        deadline = time.monotonic() + rule.hold_max
                        while time.monotonic() < deadline and not (
                                rule.hold_until and rule.hold_until()):
                            time.sleep(0.1)
                    if not self._forward(conn, ex, method, target, headers, raw, rule, keep):
                        return
                finally:
                    if rule is not None:
                        rule.done.set()
                if not keep:
                    return
        except OSError:
            return
        finally:
            with contextlib.suppress(OSError):
                rfile.close()
                conn.close()

    def _answer(self, conn: socket.socket, ex: Exchange, rule: Rule, keep: bool) -> None:
        kind, title = _PROBLEMS.get(rule.status, ("/problems/service-unavailable", "Refused"))
        problem = {"type": kind, "title": title, "status": rule.status,
                   "detail": f"check-bot: injected {rule.status}; retry after "
                             f"{rule.retry_after} s", "instance": ex.path}
        data = json.dumps(problem).encode()
        head = [f"HTTP/1.1 {rule.status} {title}", "Content-Type: application/problem+json",
                f"Retry-After: {rule.retry_after}", f"Content-Length: {len(data)}",
                f"Connection: {'keep-alive' if keep else 'close'}"]
        conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + data)
        ex.status, ex.answer, ex.outcome, ex.end = rule.status, problem, "answered", \
            time.monotonic()

    def _forward(self, conn: socket.socket, ex: Exchange, method: str, target: str,
                 headers: dict[str, str], raw: bytes, rule: Rule | None, keep: bool) -> bool:
        """Forward one request; False when the bot's connection is closed after it."""
        up = http.client.HTTPConnection(*self.upstream, timeout=UPSTREAM_TIMEOUT)
        try:
            try:
                up.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
                for name, value in headers.items():
                    if name not in _HOP:
                        up.putheader(name, value)
                up.putheader("Content-Length", str(len(raw)))
                up.putheader("Connection", "close")
                up.endheaders(raw or None)
                resp = up.getresponse()
            except OSError:
                ex.outcome, ex.end = "no-service", time.monotonic()
                return False  # the bot meets a connection closed unanswered
            ex.service_status = resp.status
            if resp.getheader("Content-Type", "").startswith("text/event-stream"):
                self._stream(conn, ex, resp)
                return False
            data = resp.read()
            with contextlib.suppress(ValueError):
                ex.answer = json.loads(data) if data else None
            if rule is not None and rule.kind == "drop":
                ex.outcome, ex.end = "dropped", time.monotonic()
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                return False
            head = [f"HTTP/1.1 {resp.status} {resp.reason}"]
            head += [f"{k}: {v}" for k, v in resp.getheaders() if k.lower() not in _HOP]
            head += [f"Content-Length: {len(data)}",
                     f"Connection: {'keep-alive' if keep else 'close'}"]
            conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + data)
            ex.status, ex.end = resp.status, time.monotonic()
            return True
        finally:
            up.close()

    def _stream(self, conn: socket.socket, ex: Exchange, resp: http.client.HTTPResponse
                ) -> None:
        """An event stream is relayed as it comes, then the connection closes."""
        head = [f"HTTP/1.1 {resp.status} {resp.reason}"]
        head += [f"{k}: {v}" for k, v in resp.getheaders() if k.lower() not in _HOP]
        head += ["Connection: close"]
        conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        ex.status = resp.status
        while True:
            chunk = resp.read1(65536)
            if not chunk:
                break
            conn.sendall(chunk)
        ex.end = time.monotonic()


def _read_request(rfile: Any) -> tuple[str, str, dict[str, str], bytes] | None:
    """One request (method, target, lower-cased headers, body) or None at the end."""
    line = rfile.readline(65537)
    while line in (b"\r\n", b"\n"):
        line = rfile.readline(65537)
    if not line:
        return None
    parts = line.decode("latin-1").split()
    if len(parts) != 3:
        return None
    method, target, _version = parts
    headers: dict[str, str] = {}
    while True:
        h = rfile.readline(65537)
        if h in (b"\r\n", b"\n", b""):
            break
        name, _, value = h.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int(rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                break
            body += rfile.read(size)
            rfile.readline()
    else:
        body = rfile.read(int(headers.get("content-length") or 0))
    return method, target, headers, body
