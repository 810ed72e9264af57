"""The probes: the process is up (``/healthz``), Redis answers (``/readyz``)."""

from __future__ import annotations

from flask import Blueprint, Response

from service.http.api import (
    arena,
    operation,
    respond,
    sch,
)
from service.http.schemas import common as sc

bp = Blueprint("health", __name__)

@bp.get("/healthz")
@operation(summary="The process is up", tags=("health",), response=sc.Health, limited=False)
def healthz() -> Response:
    return respond(sch(sc.Health), {"status": "ok"})


@bp.get("/readyz")
@operation(summary="Redis is reachable", tags=("health",), response=sc.Health, limited=False)
def readyz() -> Response:
    arena().store.r.ping()
    return respond(sch(sc.Health), {"status": "ok"})

