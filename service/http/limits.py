"""Rate limits: a request budget per bot, and a tight count of failed authentication per
client address, so that neither a runaway client nor a token guesser can take the
service for itself.

**The budget** (``ARENA_RATE_LIMIT`` requests per ``ARENA_RATE_WINDOW`` seconds, a fixed
window) is counted per bot once its token is known (``b<bot id>``), per client address
for requests without one (``a<address>``), in one Redis counter per window
(``{p}rl:{who}:{window number}``). Every limited answer says where the caller stands in
the IETF fields (draft-ietf-httpapi-ratelimit-headers)::

    RateLimit-Policy: "default";q=<quota>;w=<window seconds>
    RateLimit: "default";r=<requests left>;t=<seconds until the window resets>

and a 429 adds ``Retry-After``. A client that reads them never needs the 429.

**Failed authentication** is counted per client address only: a token is looked up (a
read) and only a failure writes, to the address's counter. Once the address has
``ARENA_AUTH_FAILURE_LIMIT`` failures in ``ARENA_AUTH_FAILURE_WINDOW`` seconds, every
token lookup it asks for is refused with 429 *before* the token is looked at, so a right
guess cannot be told apart from a wrong one. Admin-token failures have their own,
tighter count (``ARENA_ADMIN_FAILURE_LIMIT``). Operations without auth never look at the
token, so a token sent there is no guess. The client address is ``request.remote_addr``:
behind a reverse proxy, set ``ARENA_TRUSTED_PROXIES`` to the number of proxies whose
``X-Forwarded-For`` may be believed (werkzeug's ``ProxyFix``); without it every client of
the proxy would share one count, and with it set where no proxy is, a client could name
any address it likes.

``reject`` is the one place a request is refused for its rate (a counter of rejections
belongs there).
"""

from __future__ import annotations

import functools
import math
import time
from contextvars import ContextVar
from typing import Any, NoReturn

from flask import Flask, Response, current_app, request

from service import metrics
from service.http.problems import Problem
from service.storage.store import PendingHit, Store, pending_hit

# The defaults, sized from the project's own runner at full speed (see docs/operations.md's
# configuration section and bench/request_rates.py).
# Measured (bench/request_rates.py, 2 cores under load): a tournament runner's bot peaks
# at 848 requests in 10 s (1.7-1.9 requests a move), an ``allfours bot`` at 65 moves/s
# (1.1 requests a move); 3,000 in 10 s is 300 requests/s, 3.5 times the busiest 10 s
# seen, and a bot that does spend it waits at most 10 s.
RATE_LIMIT = 3000  # requests per window per bot (or per address without a token)
RATE_WINDOW = 10  # seconds
AUTH_FAILURE_LIMIT = 30  # unknown bot tokens per window per client address
ADMIN_FAILURE_LIMIT = 5  # wrong admin tokens per window per client address
AUTH_FAILURE_WINDOW = 300  # seconds
POLICY = "default"

# Views whose first Redis call reads a game: their budget hit rides along with that read
# (one round trip, ``Store.get_game_and_idem``) instead of a round trip of its own.
FUSED = frozenset({"api.act", "api.turn", "api.get_game"})


def reject(detail: str, ttl_ms: int) -> NoReturn:
    """Refuse this request for its rate: 429 with ``Retry-After`` (whole seconds, at least
    1) — the one place every rate-limit rejection goes through (and is counted)."""
    metrics.RATE_LIMITED.inc()
    raise Problem("rate-limited", detail, headers={"Retry-After": str(_seconds(ttl_ms))})


def client_address() -> str:
    return request.remote_addr or "-"


def _store() -> Store:
    return current_app.extensions["arena"].store


def _seconds(ttl_ms: int) -> int:
    return max(1, -(-ttl_ms // 1000))


def reset_ms(ttl_ms: int, window: int) -> int:
    """Milliseconds until this fixed window ends. The counter is named after its window
    (``unix time // window``), so the next window starts at the boundary, which may be
    sooner than the counter's own expiry (set from its first request)."""
    to_boundary = math.ceil((window - time.time() % window) * 1000)
    return max(1, min(ttl_ms, to_boundary))


# The budget counted in this request, for its answer: (limit, window, count, ms to reset).
_quota: ContextVar[tuple[int, int, int, int] | None] = ContextVar("rate_quota", default=None)


def _check(limit: int, window: int, count: int, ttl_ms: int) -> None:
    """The budget after this request was counted: remembered for the answer's fields,
    and refused when over."""
    ttl_ms = reset_ms(ttl_ms, window)
    _quota.set((limit, window, count, ttl_ms))
    if count > limit:
        reject(f"more than {limit} requests in {window} s", ttl_ms)


def count_request(who: str) -> None:
    """Count one request against ``who``'s budget (``b<bot>`` or ``a<address>``); for a
    view that reads a game first, the count rides with that read."""
    _quota.set(None)
    cfg = current_app.config
    limit, window = cfg["ARENA_RATE_LIMIT"], cfg["ARENA_RATE_WINDOW"]
    if not limit:
        return
    check = functools.partial(_check, limit, window)
    if request.endpoint in FUSED:
        pending_hit.set(PendingHit(who, window, check, limit))
        return
    check(*_store().hit(who, window))


def add_quota_fields(resp: Response) -> Response:
    """``after_request``: ``RateLimit-Policy`` and ``RateLimit`` for the budget counted in
    this request (a 429 included). A hit still pending (the request failed before its
    game read) is counted now, so that every limited answer carries them."""
    hit = pending_hit.get()
    if hit is not None:
        pending_hit.set(None)
        try:
            count, ttl_ms = _store().hit(hit.who, hit.window_s)
        except Exception:  # Redis down: the answer (a 503) is made already
            return resp
        _quota.set((hit.limit, hit.window_s, count, reset_ms(ttl_ms, hit.window_s)))
    quota = _quota.get()
    if quota is not None:
        _quota.set(None)
        limit, window, count, ttl_ms = quota
        resp.headers.add("RateLimit-Policy", f'"{POLICY}";q={limit};w={window}')
        resp.headers.add("RateLimit", f'"{POLICY}";r={max(0, limit - count)};t={_seconds(ttl_ms)}')
    return resp


# --- failed authentication ---------------------------------------------------------------


def bot_for_token(token: str) -> str | None:
    """The bot behind ``token`` (None: unknown, counted as a failure of this address);
    429 if the address has failed too often."""
    cfg = current_app.config
    limit, window = cfg["ARENA_AUTH_FAILURE_LIMIT"], cfg["ARENA_AUTH_FAILURE_WINDOW"]
    bot_id, blocked_ms = _store().guarded_bot_for_token(token, "fail:" + client_address(),
                                                        limit, window)
    if blocked_ms:
        reject(f"more than {limit} failed authentications from this address in {window} s",
               reset_ms(blocked_ms, window))
    return bot_id


def admin_guard() -> None:
    """Before the admin token is compared: 429 if this address has failed too often."""
    cfg = current_app.config
    limit, window = cfg["ARENA_ADMIN_FAILURE_LIMIT"], cfg["ARENA_AUTH_FAILURE_WINDOW"]
    if not limit:
        return
    count, ttl_ms = _store().peek("adminfail:" + client_address(), window)
    if count >= limit:
        reject(f"more than {limit} failed admin authentications from this address in "
               f"{window} s", reset_ms(ttl_ms, window))


def admin_failed() -> None:
    """Count a wrong admin token against this address."""
    cfg = current_app.config
    if cfg["ARENA_ADMIN_FAILURE_LIMIT"]:
        _store().hit("adminfail:" + client_address(), cfg["ARENA_AUTH_FAILURE_WINDOW"])


def install(app: Flask) -> None:
    """Trust ``X-Forwarded-For`` from that many proxies, and add the fields to answers."""
    proxies = int(app.config.get("ARENA_TRUSTED_PROXIES") or 0)
    if proxies > 0:
        from werkzeug.middleware.proxy_fix import ProxyFix

        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=proxies)  # type: ignore[method-assign]
    app.before_request(_begin)
    app.after_request(add_quota_fields)


def _begin() -> None:
    """Nothing counted yet in this request (a worker's context outlives requests)."""
    _quota.set(None)


DEFAULTS: dict[str, Any] = {
    "ARENA_RATE_LIMIT": RATE_LIMIT,
    "ARENA_RATE_WINDOW": RATE_WINDOW,
    "ARENA_AUTH_FAILURE_LIMIT": AUTH_FAILURE_LIMIT,
    "ARENA_ADMIN_FAILURE_LIMIT": ADMIN_FAILURE_LIMIT,
    "ARENA_AUTH_FAILURE_WINDOW": AUTH_FAILURE_WINDOW,
    "ARENA_TRUSTED_PROXIES": 0,
}
