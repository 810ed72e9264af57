"""Structured logs: every line one JSON object, and one line per request.

``JsonFormatter`` (a small ``logging.Formatter``: no dependency for a dozen lines) writes
``{"ts", "level", "logger", "message", ...}``; ``service.gunicorn_conf`` installs it, as
``logger_class = "service.logs.GunicornLogger"``, for gunicorn's own logger, the root
logger and ``allfours.access``, so under gunicorn every line on stderr is JSON.

The access line (``install``) carries ``request_id`` (the client's ``X-Request-ID`` when it
is a plain token of up to 64 characters, else one made here; returned in ``X-Request-ID``
either way), ``method``, ``route`` (the URL rule, such as ``/games/<game_id>/actions``,
never the raw path), ``status``, ``duration_ms``, ``bot`` (the authenticated bot), ``game``
(the game id, only when it has the shape of one) and ``version`` (the game's version, from
the answer's ``ETag``).

What is never logged, by construction: no header but ``X-Request-ID`` is read (so no
token), no body, query string or raw path (so no card a client names and no seed), and no
response body (so no view, hand or record). ``ARENA_ACCESS_LOG=0`` turns the access line
off.
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
import os
import re
import secrets
import time
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from flask import Flask, Response

ACCESS = logging.getLogger("allfours.access")
REQUEST_ID = "X-Request-ID"
_CLIENT_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
_GAME_ID = re.compile(r"[0-9a-f]{12}")
_UTC = dt.UTC


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, message, the
    ``fields`` a caller passed (``extra={"fields": {...}}``), and the traceback if any."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, _UTC).isoformat(
                timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if fields:
            out.update(fields)
        elif record.name != "gunicorn.error":
            rid = _current_request_id()
            if rid is not None:
                out["request_id"] = rid
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


def _current_request_id() -> str | None:
    """The request id of the request being served, for lines logged during it."""
    try:
        from flask import g, has_request_context
    except ImportError:  # pragma: no cover - flask is a dependency
        return None
    if not has_request_context():
        return None
    return g.get("request_id")


def use_json(level: str | int = logging.INFO) -> None:
    """JSON on stderr for the root logger and the access line (gunicorn's own lines are
    formatted by ``GunicornLogger``)."""
    handler = logging.StreamHandler()  # stderr
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h.formatter, JsonFormatter)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    ACCESS.handlers[:] = [handler]
    ACCESS.setLevel(logging.INFO)
    ACCESS.propagate = False


def _gunicorn_logger_class() -> type:
    from gunicorn.glogging import Logger

    class GunicornLogger(Logger):
        """gunicorn's logger with its lines (and the app's) as JSON. Set as
        ``logger_class`` rather than through ``logconfig_dict``, which would also turn on
        gunicorn's own access log (the app writes its own, with more in it)."""

        def setup(self, cfg: Any) -> None:
            super().setup(cfg)
            for handler in self.error_log.handlers:
                handler.setFormatter(JsonFormatter())
            use_json(self.loglevel)

    return GunicornLogger


def install(app: Flask) -> None:
    """Give every request an id (``X-Request-ID``) and, unless ``ARENA_ACCESS_LOG=0``,
    log one access line for it."""
    from flask import g, request

    from .metrics import T0

    enabled = str(app.config.get("ARENA_ACCESS_LOG", "1")).lower() not in (
        "0", "false", "no", "off")
    prefix = f"{os.getpid():x}{secrets.token_hex(3)}"
    counter = itertools.count(1)
    perf_counter = time.perf_counter

    def _request_id() -> None:
        given = request.headers.get(REQUEST_ID)
        if given is None or not _CLIENT_ID.fullmatch(given):
            given = f"{prefix}-{next(counter):x}"
        g.request_id = given

    # first of the before_request functions, so a request refused by an earlier one (the
    # rate limiter's 429) has its id too
    app.before_request_funcs.setdefault(None, []).insert(0, _request_id)

    @app.after_request
    def _access(resp: Response) -> Response:
        rid = g.get("request_id")
        if rid is None:  # answered before our before_request ran (a 429, say)
            rid = g.request_id = f"{prefix}-{next(counter):x}"
        resp.headers[REQUEST_ID] = rid
        if not enabled or not ACCESS.isEnabledFor(logging.INFO):
            return resp
        rule = request.url_rule
        t0 = request.environ.get(T0)
        fields: dict[str, Any] = {
            "request_id": rid,
            "method": request.method,
            "route": rule.rule if rule is not None else None,
            "status": resp.status_code,
            "duration_ms": round((perf_counter() - t0) * 1000, 3) if t0 else None,
        }
        bot = g.get("bot_id")
        if bot is not None:
            fields["bot"] = bot
        args = request.view_args
        game = args.get("game_id") if args else None
        if game is not None and _GAME_ID.fullmatch(game):
            fields["game"] = game
        etag = resp.headers.get("ETag")
        if etag is not None and etag[1:-1].isdigit():  # a game view's version
            fields["version"] = int(etag[1:-1])
        ACCESS.info("request", extra={"fields": fields})
        return resp


def __getattr__(name: str) -> Any:
    # ``GunicornLogger`` is made on first use: importing gunicorn only where it runs
    if name == "GunicornLogger":
        cls = globals()["GunicornLogger"] = _gunicorn_logger_class()
        return cls
    raise AttributeError(name)
