"""Errors as RFC 9457 problem details, one kind per stable ``type``.

Views and the game layer raise ``Problem`` (``service.arena.core.problems``, which holds the one
list of kinds) or let a domain exception escape; the app factory registers
``register_error_handlers`` once, so every error leaves the service as
``application/problem+json`` with the same shape.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from flask import Flask, Response, request
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from werkzeug.exceptions import HTTPException

from service.arena.core.problems import KINDS, Problem, from_illegal
from service.engine import IllegalAction
from service.metrics import REDIS_ERRORS, count_problem

PROBLEM_JSON = "application/problem+json"
log = logging.getLogger(__name__)


def problem_body(problem: Problem) -> dict[str, Any]:
    """The problem details of ``problem`` for the request being answered."""
    out: dict[str, Any] = {
        "type": f"/problems/{problem.kind}",
        "title": KINDS[problem.kind][1],
        "status": problem.status,
    }
    if problem.detail:
        out["detail"] = problem.detail
    out["instance"] = request.path if request else None
    out.update(problem.extra)
    return out


def problem_response(problem: Problem) -> Response:
    """The one place a Problem becomes an HTTP response."""
    count_problem(problem.kind)
    resp = Response(
        json.dumps(problem_body(problem), separators=(",", ":")),
        status=problem.status,
        mimetype=PROBLEM_JSON,
    )
    for k, v in problem.headers.items():
        resp.headers[k] = v
    if problem.status == 401:
        resp.headers.setdefault("WWW-Authenticate", 'Bearer realm="allfours"')
    return resp


_HTTP_KINDS = {
    400: "bad-request",
    404: "not-found",
    405: "method-not-allowed",
    406: "not-acceptable",
    413: "payload-too-large",
    415: "unsupported-media-type",
}


def register_error_handlers(app: Flask) -> None:
    """Map every exception a request can raise to a problem response, in one place."""

    @app.errorhandler(Problem)
    def _problem(exc: Problem) -> Response:
        return problem_response(exc)

    @app.errorhandler(IllegalAction)
    def _illegal(exc: IllegalAction) -> Response:
        return problem_response(from_illegal(exc))

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException) -> Response:
        code = exc.code or 500
        kind = _HTTP_KINDS.get(code)
        if kind is None:
            kind = "internal" if code >= 500 else "bad-request"
        headers = {}
        if code == 405:
            allow = exc.get_headers()
            headers = {k: v for k, v in allow if k == "Allow"}
        detail = exc.description if kind != "not-found" else None
        return problem_response(Problem(kind, detail, headers=headers))

    @app.errorhandler(RedisConnectionError)
    @app.errorhandler(RedisTimeoutError)
    def _redis_down(exc: RedisError) -> Response:
        log.warning("redis unavailable: %s", exc)
        REDIS_ERRORS.labels("request").inc()
        return problem_response(Problem("service-unavailable", headers={"Retry-After": "1"}))

    @app.errorhandler(Exception)
    def _internal(exc: Exception) -> Response:
        if isinstance(exc, (RedisError, RedisClusterException)) or _failing_over(exc):
            # e.g. a slot not covered while a replica is promoted
            log.warning("redis error: %s", exc)
            REDIS_ERRORS.labels("request").inc()
            return problem_response(
                Problem("service-unavailable", headers={"Retry-After": "1"})
            )
        log.exception("unhandled error")
        return problem_response(Problem("internal"))


def _failing_over(exc: BaseException) -> bool:
    """A ``RuntimeError`` the cluster client raised while it handled a lost node: its
    node table is a dict that one thread rebuilds while another iterates it ("dictionary
    keys changed during iteration", a known race in redis-py's and valkey-py's cluster
    clients under OS threads; gevent's greenlets do not switch inside it). The request
    met a failover, not a defect of its own: a 503 to retry, like the error it handled."""
    return (isinstance(exc, RuntimeError) and "during iteration" in str(exc)
            and isinstance(exc.__context__, (RedisError, RedisClusterException)))
