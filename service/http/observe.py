"""Every request, observed once: metrics, a request id, and one JSON access line.

One WSGI wrapper notes when the request came in; one ``after_request`` hook, which runs
for every answer (errors included), reads the route, status and duration once and hands
them to ``service.metrics`` (tallies) and ``service.logs`` (the access line).

The access line holds ``request_id`` (the client's ``X-Request-ID`` when it is a plain
token of up to 64 characters, else one made here — a per-process prefix and a counter, no
random call per request; returned in ``X-Request-ID`` either way), ``method``, ``route``
(the URL rule, such as ``/games/<game_id>/actions``, never the raw path), ``status``,
``duration_ms``, ``bot`` (the authenticated bot's id), ``game`` (the game id, only when it
has the shape of one) and ``version`` (the game's version, from the answer's ``ETag``).

What can never reach a log line, by construction: no header but ``X-Request-ID`` is read
(so no token), no body, query string or raw path (so no card a client names and no
seed), and no response body (so no view, hand or record). ``ARENA_ACCESS_LOG=0`` turns
the access line off (the request id and the metrics stay).
"""

from __future__ import annotations

import itertools
import os
import re
import secrets
import time
from typing import Any

from flask import Flask, Response, g, request

from service import logs, metrics

REQUEST_ID = "X-Request-ID"
T0 = "allfours.t0"  # WSGI environ: the request's start (``time.perf_counter``)
RID = logs.REQUEST_ID_KEY  # WSGI environ: the request's id (the log lines read it there)
_CLIENT_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
_GAME_ID = re.compile(r"[0-9a-f]{12}")
_prefix = ""
_counter = itertools.count(1)


def _new_prefix() -> str:
    """This process's request id prefix: its pid and a random part (pids repeat across
    restarts and hosts). Made in each process on first use, so forks get their own."""
    global _prefix
    _prefix = f"{os.getpid():x}.{secrets.token_hex(3)}"
    return _prefix


def _forked() -> None:
    global _prefix
    _prefix = ""


os.register_at_fork(after_in_child=_forked)


def install(app: Flask) -> None:
    enabled = str(app.config.get("ARENA_ACCESS_LOG", "1")).lower() not in (
        "0", "false", "no", "off")
    inner = app.wsgi_app
    perf_counter = time.perf_counter
    fullmatch = _CLIENT_ID.fullmatch

    def observed(environ: dict[str, Any], start_response: Any) -> Any:
        """Note the start and the request id, and send the id back with the answer
        (added to the header list as it goes out: the cheapest place)."""
        environ[T0] = perf_counter()
        rid = environ.get("HTTP_X_REQUEST_ID")
        if rid is None or not fullmatch(rid):
            rid = f"{_prefix or _new_prefix()}-{next(_counter):x}"
        environ[RID] = rid

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            headers.append((REQUEST_ID, rid))
            return start_response(status, headers, exc_info)

        return inner(environ, start)

    app.wsgi_app = observed  # type: ignore[method-assign]

    @app.after_request
    def _observe(resp: Response) -> Response:
        req = request._get_current_object()  # type: ignore[attr-defined]
        rule = req.url_rule
        route = rule.rule if rule is not None else "unmatched"
        environ = req.environ
        t0 = environ.get(T0)
        seconds = perf_counter() - t0 if t0 is not None else 0.0
        status = resp.status_code
        metrics.observe_request(route, req.method, status, seconds)
        if not enabled:
            return resp
        fields: dict[str, Any] = {"request_id": environ.get(RID), "method": req.method,
                                  "route": route, "status": status,
                                  "duration_ms": round(seconds * 1000, 3)}
        bot = getattr(g._get_current_object(), "bot_id", None)  # type: ignore[attr-defined]
        if bot is not None:
            fields["bot"] = bot
        args = req.view_args
        game = args.get("game_id") if args else None
        if game is not None and _GAME_ID.fullmatch(game):
            fields["game"] = game
        etag = resp.headers.get("ETag")
        if etag is not None and etag[1:-1].isdigit():  # a game view's version
            fields["version"] = int(etag[1:-1])
        logs.access(fields)
        return resp
