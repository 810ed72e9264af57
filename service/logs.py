"""Structured logs: every line one JSON object, and one line per request.

``JsonFormatter`` (a small ``logging.Formatter``: no dependency for a dozen lines) writes
``{"ts", "level", "logger", "message", ...}``; ``service.http.gunicorn_conf`` installs it, as
``logger_class = "service.logs.GunicornLogger"``, for gunicorn's own logger, the root
logger and ``allfours.access``, so under gunicorn every line on stderr is JSON.

The access line itself is put together by ``service.http.observe`` (what it holds, and why it
can hold no token, card or seed, is said there).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson

ACCESS = logging.getLogger("allfours.access")
REQUEST_ID_KEY = "allfours.request_id"  # WSGI environ: the request's id (service.http.observe)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601 to the millisecond), level,
    logger, message, the ``fields`` a caller passed (``extra={"fields": {...}}``), and the
    traceback if any."""

    _second = -1
    _stamp = ""

    def _ts(self, created: float) -> str:
        second = int(created)
        if second != self._second:  # the date part, formatted once a second
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = second
        return f"{self._stamp}.{int((created - second) * 1000):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": self._ts(record.created),
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


def _current_request_id() -> Any:
    """The request id of the request being served, for lines logged during it (put in the
    WSGI environ under ``REQUEST_ID_KEY`` by ``service.http.observe``)."""
    from flask import has_request_context, request

    if not has_request_context():
        return None
    return request.environ.get(REQUEST_ID_KEY)


def use_json(level: str | int = logging.INFO) -> None:
    """JSON on stderr for the root logger and the access line (gunicorn's own lines are
    formatted by ``GunicornLogger``). Also skips what ``logging`` would otherwise work out
    for every record and these lines never show (the logging HOWTO's "Optimization"):
    thread, process and caller."""
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    logging._srcfile = None  # type: ignore[attr-defined]
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


class AccessRecord(logging.LogRecord):
    """An access line's record: every attribute a ``LogRecord`` has, set directly.
    ``LogRecord.__init__`` also works out a file name, module, thread and process for
    every record; an access line has none worth showing, and there is one per request."""

    def __init__(self, fields: dict[str, Any]) -> None:  # no super().__init__: on purpose
        now = time.time()
        self.name = "allfours.access"
        self.msg = "request"
        self.args = None
        self.levelname = "INFO"
        self.levelno = logging.INFO
        self.pathname = self.filename = self.module = ""
        self.exc_info = self.exc_text = self.stack_info = None
        self.lineno = 0
        self.funcName = None
        self.created = now
        self.msecs = int((now - int(now)) * 1000) + 0.0
        self.relativeCreated = 0.0
        self.thread = self.threadName = self.processName = self.process = None
        self.taskName = None
        self.fields = fields


def access(fields: dict[str, Any]) -> None:
    """Log one access line (``allfours.access``, INFO) with ``fields``, handed straight to
    the logger's handlers (``Logger.info`` would also look up the caller's frame)."""
    if ACCESS.isEnabledFor(logging.INFO):
        ACCESS.handle(AccessRecord(fields))


def __getattr__(name: str) -> Any:
    # ``GunicornLogger`` is made on first use: importing gunicorn only where it runs
    if name == "GunicornLogger":
        cls = globals()["GunicornLogger"] = _gunicorn_logger_class()
        return cls
    raise AttributeError(name)
