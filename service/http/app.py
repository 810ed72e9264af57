"""The app factory: configuration from the environment, Redis, routes, error handlers.

Nothing here keeps game data: every request reads and writes Redis, so any number of
processes (gunicorn workers, machines) can serve any request. The only per-process
objects are the Redis connection pool and the generated OpenAPI text.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

from flask import Flask, Request, Response, request
from flask.sessions import NullSession, SessionInterface
from flask_swagger_ui import get_swaggerui_blueprint

from service.arena.accounts.invitations import DEFAULTS as INVITATION_DEFAULTS
from service.arena.accounts.owners import DEFAULTS as OWNER_DEFAULTS
from service.arena.analyses import queue as analyses
from service.arena.core import ratings as rating_rules
from service.arena.core.ratings import DEFAULTS as RATING_DEFAULTS
from service.arena.games.commands import Arena
from service.arena.ladder.ladders import DEFAULTS as LADDER_DEFAULTS
from service.arena.ladder.ladders import Ladders
from service.arena.migrations import ratings as rating_migration
from service.arena.tournaments import schedule as tournament_schedule
from service.arena.tournaments.registration import DEFAULTS as REGISTRATION_DEFAULTS
from service.arena.tournaments.registration import Registration
from service.arena.tournaments.service import Tournaments
from service.arena.webhooks.callbacks import DEFAULTS as CALLBACK_DEFAULTS
from service.arena.webhooks.callbacks import Callbacks
from service.http import (
    api,
    budget,
    connections,
    health,
    limits,
    metrics_route,
    observe,
    pages,
    problem_pages,
    quotas,
    security_headers,
    versions,
)
from service.http.accounts import routes as accounts_routes
from service.http.analyses import routes as analyses_routes
from service.http.archive import routes as archive_routes
from service.http.games import routes as games_routes
from service.http.ladder import routes as ladder_routes
from service.http.openapi_spec import spec_yaml
from service.http.problems import register_error_handlers
from service.http.tournaments import routes as tournaments_routes
from service.http.tournaments.schemas import TournamentCreate
from service.http.webhooks import routes as webhooks_routes
from service.http.webhooks.schemas import CallbackAnswer
from service.storage import redis_client
from service.storage.hits import pending_hit
from service.storage.store import RETRY_GRACE_S, Retention, Store

_KEPT = Retention()
# What clients create and how long it is kept, seconds (0: for ever): the reasons are in
# service/storage/store.py ``Retention`` and docs/operations.md "What is kept"
RETENTION_DEFAULTS: dict[str, int] = {
    "ARENA_BOT_UNUSED_TTL": _KEPT.bot_unused_s,
    "ARENA_PERSON_TTL": _KEPT.person_s,
    "ARENA_GAME_RETENTION": _KEPT.game_s,
    "ARENA_PERSON_GAME_RETENTION": _KEPT.person_game_s,
    "ARENA_CANCELLED_GAME_RETENTION": _KEPT.cancelled_s,
    "ARENA_WAITING_GAME_TTL": _KEPT.waiting_s,
    "ARENA_IDLE_GAME_TTL": _KEPT.idle_s,
}

DEFAULTS: dict[str, Any] = {
    "REDIS_URL": "redis://127.0.0.1:6379/0",
    # auto: a Redis/Valkey Cluster node is used as a cluster; single or cluster: forced
    "ARENA_REDIS_MODE": "auto",
    "ARENA_KEY_PREFIX": "af:",
    # the operator's token (suspensions, invitations, any tournament); unset: nobody is admin
    "ARENA_ADMIN_TOKEN": None,
    # tournaments owners organize and bots enter: quotas, retention, house bots filling up
    # (service/arena/tournaments/registration.py); the recurring tournaments (schedule.py)
    **REGISTRATION_DEFAULTS,
    **tournament_schedule.DEFAULTS,
    # requests per window per bot (or per address without a token), failed
    # authentications per address, trusted proxies: see service/http/limits.py; 0: off
    **limits.DEFAULTS,
    # when a bot's rating is ranked (provisional until then): service/arena/core/ratings.py
    **RATING_DEFAULTS,
    # "1": at startup, replay the published ratings under the current rules if they follow
    # older ones (once: service/arena/migrations/ratings.py); "0": only `allfours migrate ratings`
    "ARENA_RATINGS_MIGRATE": "1",
    # bots, games and house games created per hour per client address / bot; 0: off
    # (service/http/quotas.py)
    **quotas.DEFAULTS,
    # service-wide: what anonymous visitors and new owners create a minute (each network
    # with a reserve), and the memory alarm and guard (service/http/budget.py)
    **budget.DEFAULTS,
    **RETENTION_DEFAULTS,
    **LADDER_DEFAULTS,  # the ladders and their matchmaking: see service/arena/ladder/ladders.py
    "ARENA_SSE_KEEPALIVE": 5.0,  # seconds between ": keep-alive" comments
    # seconds a stream's write may take before the stream is dropped (a slow consumer)
    "ARENA_SSE_WRITE_TIMEOUT": 10.0,
    "ARENA_SSE_SEND_BUFFER": 65536,  # bytes of kernel send buffer per stream; 0: autotuned
    # seconds a decision in a game a person's account sits down in, if it has no limit
    "ARENA_PERSON_MOVE_LIMIT": 60.0,
    "ARENA_RETRY_GRACE": RETRY_GRACE_S,  # seconds a finished game's retry memory is kept
    "ARENA_REDIS_TIMEOUT": redis_client.COMMAND_TIMEOUT_S,  # seconds; then 503
    "MAX_CONTENT_LENGTH": api.MAX_BODY_BYTES,  # bytes, chunked bodies too
    "ARENA_METRICS_TOKEN": None,  # set: GET /metrics needs Authorization: Bearer <it>
    "ARENA_ACCESS_LOG": "1",  # "0": no JSON access line per request
    # open connections per worker (gunicorn's worker_connections, service.http.gunicorn_conf):
    # the Redis pool is sized from it (redis_client.pool_size)
    "ARENA_WORKER_CONNECTIONS": 2000,
    # webhook bots: networks callbacks may reach, time budget, retries, answer size cap
    # (service/arena/webhooks/callbacks.py)
    **CALLBACK_DEFAULTS,
    # owners: admission (open|invite|closed), new owners per network, the unused-bot TTL
    # (service/arena/accounts/owners.py)
    **OWNER_DEFAULTS,
    # consent: invitation expiry, the house bots' per-challenger limit, pending invitations
    # per bot (service/arena/accounts/invitations.py)
    **INVITATION_DEFAULTS,
    # deadlines on request heads, bodies and response writes; caps on open streams and
    # long-polls per client and per bot; the probes' reserve (service/http/connections.py)
    **connections.DEFAULTS,
    # post-game analyses: workers per instance, their lease, quality, the ladder's games
    # (service/arena/analyses/queue.py)
    **analyses.DEFAULTS,
}

_UNLIMITED = ("/healthz", "/readyz", "/openapi.yaml", "/docs", "/metrics", "/problems/")


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


class NoSessions(SessionInterface):
    """The service keeps no sessions (no secret key, nothing signed): Flask's default
    interface finds that out on every request and makes a fresh empty session to say so;
    here every request shares one (a ``NullSession`` refuses every change)."""

    _null = NullSession()

    def open_session(self, app: Flask, request: Request) -> None:
        return None

    def make_null_session(self, app: Flask) -> NullSession:
        return self._null

    def save_session(self, app: Flask, session: Any, response: Response) -> None:
        return None  # (never called: Flask saves no null session)


class ArenaFlask(Flask):
    """Flask, with ``ensure_sync``'s answer kept per function. Flask asks it for the view
    and for each of the dozen hooks on every request, and each time has ``inspect`` check
    whether the function is a coroutine function: an answer that never changes for a
    function, asked a dozen times a request."""

    _sync_memo_max = 1024  # the views and hooks are a few hundred; anything else: asked
    session_interface = NoSessions()

    def ensure_sync(self, func: Callable[..., Any]) -> Callable[..., Any]:
        memo: dict[Callable[..., Any], Callable[..., Any]] = self.__dict__.setdefault(
            "_sync_memo", {})
        try:
            return memo[func]
        except KeyError:
            pass
        except TypeError:  # unhashable: asked every time
            return super().ensure_sync(func)
        sync = super().ensure_sync(func)
        if len(memo) < self._sync_memo_max:
            memo[func] = sync
        return sync


def create_app(config: dict[str, Any] | None = None) -> Flask:
    """Build the service. ``config`` overrides the environment, which overrides defaults."""
    app = ArenaFlask(__name__)
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.config.update(DEFAULTS)
    app.config.update(config_from_env())
    app.config.update(config or {})

    redis_timeout = float(app.config["ARENA_REDIS_TIMEOUT"])
    # single Redis or cluster, asked once (redis_client.mode_of)
    mode = redis_client.mode_of(app.config["REDIS_URL"], app.config["ARENA_REDIS_MODE"],
                                redis_timeout)
    client = redis_client.connect(
        app.config["REDIS_URL"], redis_timeout,
        redis_client.pool_size(int(app.config["ARENA_WORKER_CONNECTIONS"])), mode)
    cfg = app.config
    retention = Retention(
        bot_unused_s=int(cfg["ARENA_BOT_UNUSED_TTL"]), person_s=int(cfg["ARENA_PERSON_TTL"]),
        game_s=int(cfg["ARENA_GAME_RETENTION"]),
        person_game_s=int(cfg["ARENA_PERSON_GAME_RETENTION"]),
        cancelled_s=int(cfg["ARENA_CANCELLED_GAME_RETENTION"]),
        waiting_s=int(cfg["ARENA_WAITING_GAME_TTL"]), idle_s=int(cfg["ARENA_IDLE_GAME_TTL"]))
    store = Store(client, cfg["ARENA_KEY_PREFIX"], int(cfg["ARENA_RETRY_GRACE"]),
                  retention=retention)
    arena = app.extensions["arena"] = Arena(store, float(app.config["ARENA_SSE_KEEPALIVE"]))
    arena.person_move_limit = float(app.config["ARENA_PERSON_MOVE_LIMIT"])
    arena.write_timeout_s = float(app.config["ARENA_SSE_WRITE_TIMEOUT"])
    arena.send_buffer = int(app.config["ARENA_SSE_SEND_BUFFER"])
    # the pub/sub listener: a connection of its own (see redis_client.listener)
    arena.wakeups.client = redis_client.listener(app.config["REDIS_URL"], redis_timeout, mode)
    arena.wakeups.confirm_s = redis_timeout
    arena.configure(app.config)  # owners and invitations with this deployment's settings
    tournaments = arena.tournaments = app.extensions["tournaments"] = Tournaments(arena)
    tournaments.provisional_games = int(app.config["ARENA_PROVISIONAL_GAMES"])
    tournaments.provisional_owners = int(app.config["ARENA_PROVISIONAL_OWNERS"])
    tournaments.standing = rating_rules.Standing.from_config(app.config)
    ladders = arena.ladders = app.extensions["ladders"] = Ladders(arena, app.config)
    if str(app.config["ARENA_RATINGS_MIGRATE"]) != "0":  # once per rules version
        rating_migration.ensure(tournaments, ladders)
    callbacks = app.extensions["callbacks"] = Callbacks(
        arena, app.config, read_answer=lambda answer: CallbackAnswer().load(answer))
    arena.on_status.append(callbacks.game_changed)
    arena.invitations.on_invite.append(callbacks.invited)
    registration = tournaments.registration = app.extensions["registration"] = \
        Registration(tournaments, app.config)
    tournaments.on_status.append(registration.status_changed)
    registration.on_notice.append(
        lambda bots, notice: arena.notices.add(bots, notice, notice["tournament_id"]))
    registration.on_notice.append(callbacks.tournament_notice)
    app.extensions["tournament_schedule"] = tournament_schedule.Schedule(
        registration, tournament_schedule.parse(
            app.config["ARENA_TOURNAMENT_SCHEDULE"],
            lambda body: TournamentCreate().load(body)))
    queue = app.extensions["analyses"] = analyses.Analyses(
        store, float(app.config["ARENA_ANALYSIS_LEASE"]))
    queue.per_owner = int(app.config["ARENA_ANALYSIS_QUEUED_PER_OWNER"])
    queue.per_network = int(app.config["ARENA_ANALYSIS_QUEUED_PER_NETWORK"])
    arena.on_finish.append(analyses.auto_analyse(
        queue, str(app.config["ARENA_LADDER_ANALYSE"]) == "1", arena.owners.owners_of))

    register_error_handlers(app)
    observe.install(app)  # per request: metrics, X-Request-ID, one JSON access line
    metrics_route.install(app)  # GET /metrics
    # one blueprint per domain (service.http.api: the operation machinery they share)
    app.register_blueprint(health.bp)  # /healthz, /readyz
    app.register_blueprint(accounts_routes.bp)  # bots, invitations, policy, owners, suspension
    app.register_blueprint(games_routes.bp)  # games, turns, events, records, house games
    app.register_blueprint(tournaments_routes.bp)  # tournaments, the leaderboard
    app.register_blueprint(ladder_routes.bp)  # /ladders/...
    app.register_blueprint(webhooks_routes.bp)  # PUT/GET/DELETE /bots/me/callback...
    app.register_blueprint(analyses_routes.bp)  # GET /games/{id}/analysis, /bots/{id}/...
    app.register_blueprint(archive_routes.bp)  # /bots/{id}/games, /owners/me
    app.register_blueprint(pages.bp)  # the pages for people: /, /games/{id} (HTML)
    app.register_blueprint(problem_pages.bp)  # /problems/<type>: what a problem means
    versions.install(app)  # Arena-Api-Version: read on requests, echoed on answers
    # swagger-ui, to try requests out; /docs itself is the page to read (pages.api_page)
    docs = get_swaggerui_blueprint(
        "/docs/try", "/openapi.yaml",
        # no validator badge: it loads an image from validator.swagger.io
        config={"app_name": "All Fours Arena API", "validatorUrl": None},
    )
    security_headers.install(app, docs)
    app.register_blueprint(docs)

    limits.install(app)
    connections.install(app)  # the body deadline; open streams and long-polls counted

    @app.before_request
    def _rate_limit() -> None:
        """Routes that are not API operations (pages, static files, unknown paths) are
        counted per client address here; operations count themselves after auth."""
        pending_hit.set(None)
        req = request._get_current_object()  # type: ignore[attr-defined]
        if not app.config["ARENA_RATE_LIMIT"] or req.path.startswith(_UNLIMITED):
            return
        if getattr(app.view_functions.get(req.endpoint or ""), "operation", None):
            return
        limits.count_request(None)

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
