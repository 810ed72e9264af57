"""``GET /metrics``: the operator's scrape of ``service.metrics`` (behind
``ARENA_METRICS_TOKEN`` when set). The metrics themselves are cross-cutting and know no
route; the route is HTTP's, so it lives here."""

from __future__ import annotations

import hmac

from flask import Flask, Response, request
from prometheus_client import CONTENT_TYPE_LATEST

from service.arena.core.problems import Problem
from service.metrics import exposition, start_flusher


def install(app: Flask) -> None:
    """``GET /metrics`` (behind ``ARENA_METRICS_TOKEN`` when set). Requests are counted
    by ``service.http.observe``."""
    start_flusher()

    @app.get("/metrics")
    def metrics() -> Response:
        expected = app.config.get("ARENA_METRICS_TOKEN") or ""
        if expected:
            scheme, _, token = request.headers.get("Authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise Problem("unauthorized", "send Authorization: Bearer <metrics token>")
            if not hmac.compare_digest(token.strip().encode(), expected.encode()):
                raise Problem("forbidden", "this needs the metrics token")
        body = exposition(app.extensions["arena"].store,
                          float(app.config.get("ARENA_MEMORY_ALARM") or 0))
        return Response(body, mimetype=CONTENT_TYPE_LATEST.split(";")[0],
                        headers={"Cache-Control": "no-store"})
