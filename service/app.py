"""The app factory: configuration from the environment, Redis, routes, error handlers.

Nothing here keeps game data: every request reads and writes Redis, so any number of
processes (gunicorn workers, machines) can serve any request. The only per-process
objects are the Redis connection pool and the generated OpenAPI text.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from flask import Flask, Response, request
from flask_swagger_ui import get_swaggerui_blueprint

from . import api, redis_client, security_headers, web
from .arena import Arena
from .openapi import spec_yaml
from .problems import Problem, register_error_handlers
from .store import PendingHit, Store, pending_hit, token_hash
from .tournaments import Tournaments

DEFAULTS: dict[str, Any] = {
    "REDIS_URL": "redis://127.0.0.1:6379/0",
    "ARENA_KEY_PREFIX": "af:",
    "ARENA_ADMIN_TOKEN": None,  # creating tournaments needs it; unset: nobody may
    "ARENA_RATE_LIMIT": 1200,  # requests per window per token (or per address); 0: off
    "ARENA_RATE_WINDOW": 60,  # seconds
    "ARENA_SSE_KEEPALIVE": 5.0,  # seconds between ": keep-alive" comments
    "ARENA_REDIS_TIMEOUT": redis_client.COMMAND_TIMEOUT_S,  # seconds; then 503
    "MAX_CONTENT_LENGTH": api.MAX_BODY_BYTES,  # bytes, chunked bodies too
}

_UNLIMITED = ("/healthz", "/readyz", "/openapi.yaml", "/docs")
# Views whose first Redis call reads a game: their rate-limit hit rides along with that
# read (one round trip, ``Store.get_game_and_idem``) instead of a round trip of its own.
_FUSED = frozenset({"api.act", "api.turn", "api.get_game"})


def config_from_env(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """Settings from the environment; numbers are parsed, unknown names ignored."""
    env = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for name, default in DEFAULTS.items():
        if name in env:
            value: Any = env[name]
            if isinstance(default, bool) or default is None:
                pass
            elif isinstance(default, int):
                value = int(value)
            elif isinstance(default, float):
                value = float(value)
            out[name] = value
    return out


def create_app(config: dict[str, Any] | None = None) -> Flask:
    """Build the service. ``config`` overrides the environment, which overrides defaults."""
    app = Flask(__name__)
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.config.update(DEFAULTS)
    app.config.update(config_from_env())
    app.config.update(config or {})

    redis_timeout = float(app.config["ARENA_REDIS_TIMEOUT"])
    client = redis_client.connect(app.config["REDIS_URL"], redis_timeout)
    store = Store(client, app.config["ARENA_KEY_PREFIX"])
    arena = app.extensions["arena"] = Arena(store, float(app.config["ARENA_SSE_KEEPALIVE"]))
    # the pub/sub listener: a connection of its own (see redis_client.listener)
    arena.wakeups.client = redis_client.listener(app.config["REDIS_URL"], redis_timeout)
    arena.wakeups.confirm_s = redis_timeout
    app.extensions["tournaments"] = Tournaments(arena)

    register_error_handlers(app)
    app.register_blueprint(api.bp)
    app.register_blueprint(web.bp)  # the pages for people: /, /games/{id} (HTML)
    docs = get_swaggerui_blueprint(
        "/docs", "/openapi.yaml",
        # no validator badge: it loads an image from validator.swagger.io
        config={"app_name": "All Fours Arena API", "validatorUrl": None},
    )
    security_headers.install(app, docs)
    app.register_blueprint(docs)

    who_cache: dict[str, str] = {}

    def check(count: int, ttl_ms: int) -> None:
        limit, window = app.config["ARENA_RATE_LIMIT"], app.config["ARENA_RATE_WINDOW"]
        if count > limit:
            retry = max(1, -(-ttl_ms // 1000))
            raise Problem(
                "rate-limited",
                f"more than {limit} requests in {window} s",
                headers={"Retry-After": str(retry)},
            )

    @app.before_request
    def _rate_limit() -> None:
        pending_hit.set(None)
        limit, window = app.config["ARENA_RATE_LIMIT"], app.config["ARENA_RATE_WINDOW"]
        if not limit or request.path.startswith(_UNLIMITED):
            return
        auth = request.headers.get("Authorization", "")
        if auth:
            who = who_cache.get(auth)
            if who is None:
                if len(who_cache) >= 10_000:
                    who_cache.clear()
                who = who_cache[auth] = "t" + token_hash(auth)[:24]
        else:
            who = "a" + (request.remote_addr or "-")
        if request.endpoint in _FUSED:
            pending_hit.set(PendingHit(who, window, check, limit))
            return
        check(*store.hit(who, window))

    @app.after_request
    def _no_hit_after_redis_failed(resp: Response) -> Response:
        """Redis has just failed this request (503): counting its rate-limit hit in the
        teardown would wait out the Redis timeout a second time before the answer."""
        if resp.status_code == 503:
            pending_hit.set(None)
        return resp

    @app.teardown_request
    def _count_unread(_exc: BaseException | None) -> None:
        """A fused hit no game read took (the request failed before reading): count it."""
        hit = pending_hit.get()
        if hit is not None:
            pending_hit.set(None)
            # Redis down: the request has been answered (503) already
            with contextlib.suppress(Exception):
                store.hit(hit.who, hit.window_s)

    @app.get("/openapi.yaml")
    def openapi_yaml() -> Response:
        text = app.extensions.get("openapi_yaml")
        if text is None:
            text = app.extensions["openapi_yaml"] = spec_yaml(app)
        return Response(text, mimetype="application/yaml")

    return app
