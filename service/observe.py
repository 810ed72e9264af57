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

from . import logs, metrics

REQUEST_ID = "X-Request-ID"
T0 = "allfours.t0"  # the WSGI environ key of a request's start (``time.perf_counter``)
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


def request_id() -> str:
    """The id of the request being served (made on first use)."""
    rid = g.get("request_id")
    if rid is None:
        given = request.headers.get(REQUEST_ID)
        if given is not None and _CLIENT_ID.fullmatch(given):
            rid = given
        else:
            rid = f"{_prefix or _new_prefix()}-{next(_counter):x}"
        g.request_id = rid
    return rid


def install(app: Flask) -> None:
    enabled = str(app.config.get("ARENA_ACCESS_LOG", "1")).lower() not in (
        "0", "false", "no", "off")
    inner = app.wsgi_app
    perf_counter = time.perf_counter

    def timed(environ: dict[str, Any], start_response: Any) -> Any:
        environ[T0] = perf_counter()
        return inner(environ, start_response)

    app.wsgi_app = timed  # type: ignore[method-assign]

    @app.after_request
    def _observe(resp: Response) -> Response:
        req = request._get_current_object()  # type: ignore[attr-defined]
        rule = req.url_rule
        route = rule.rule if rule is not None else "unmatched"
        t0 = req.environ.get(T0)
        seconds = perf_counter() - t0 if t0 is not None else 0.0
        status = resp.status_code
        metrics.observe_request(route, req.method, status, seconds)
        rid = request_id()
        headers = resp.headers
        headers[REQUEST_ID] = rid
        if not enabled:
            return resp
        fields: dict[str, Any] = {"request_id": rid, "method": req.method, "route": route,
                                  "status": status, "duration_ms": round(seconds * 1000, 3)}
        bot = g.get("bot_id")
        if bot is not None:
            fields["bot"] = bot
        args = req.view_args
        game = args.get("game_id") if args else None
        if game is not None and _GAME_ID.fullmatch(game):
            fields["game"] = game
        etag = headers.get("ETag")
        if etag is not None and etag[1:-1].isdigit():  # a game view's version
            fields["version"] = int(etag[1:-1])
        logs.access(fields)
        return resp
