"""Rate limits: a request budget per bot, and a tight count of failed authentication per
client address, so that neither a runaway client nor a token guesser can take the
service for itself.

**The budget** (``ARENA_RATE_LIMIT`` requests per ``ARENA_RATE_WINDOW`` seconds, a fixed
window) is counted per bot once its token is known (``b<bot id>``), per client for
requests without one (``a<client>``: an IPv4 address, an IPv6 /64, ``client_key``), in
one Redis counter per window (``{p}rl:{who}:{window number}``). Every limited answer
says where the caller stands in the IETF fields (draft-ietf-httpapi-ratelimit-headers)::

    RateLimit-Policy: "default";q=<quota>;w=<window seconds>
    RateLimit: "default";r=<requests left>;t=<seconds until the window resets>

and a 429 adds ``Retry-After``. A client that reads them never needs the 429.

**Failed authentication** is counted per client address *and* per network (the
address's IPv4 /24 or IPv6 /64; an IPv4-mapped IPv6 address counts as its IPv4), each in
a counter that expires ``ARENA_AUTH_FAILURE_WINDOW`` seconds after its first failure
(``{p}rl:fail:<address>:<window>``, ``{p}rl:failnet:<network>:<window>``). A token is
looked up first, always: a valid token is served whatever other clients of its address
or network have sent (only its own request budget applies), so nobody can lock a bot
out by guessing from its address. Only a failed lookup is counted, in the same Redis
step (``AUTH``), and compared by the value its own increment returned, so concurrent
failures cannot all see a count below the limit. Past ``ARENA_AUTH_FAILURE_LIMIT``
failures of the address, or ``ARENA_AUTH_FAILURE_NETWORK_LIMIT`` of its network, a
failure answers 429 with Retry-After instead of 401. A new address in the same network
shares the network's count, so stepping across the 256 addresses of a /24 (or the 2^64
of a /64) buys little more than one address has.

Why a limit, then, that a right guess passes? Tokens are 32 random bytes
(``secrets.token_urlsafe(32)``): guessing one is infeasible at any rate, so the limit is
not what keeps tokens secret. It bounds the load and noise of a client that keeps
sending bad tokens (a broken bot, a scanner) and makes it visible (429s), and it must
never turn into a way to refuse others' valid tokens. Past the limit a right guess is
still served (so a right guess *can* be told apart there, as it can below it): the 429
tells a guesser only that its guesses so far were wrong, which the 401s said already.

**The admin token** is one secret, so its failures are counted tighter
(``ARENA_ADMIN_FAILURE_LIMIT`` per address, ``ARENA_ADMIN_FAILURE_NETWORK_LIMIT`` per
network) and *before* the comparison: each attempt takes a number from the atomic
increment and only attempts within both limits are compared at all (``admin_attempt``);
300 concurrent wrong guesses with a limit of 5 compare exactly 5. Here a right guess
cannot be told apart from a wrong one once the limit is reached (both 429), which means
the admin token too is refused from an address or network that has used up its
failures until the window ends: the operator calls from elsewhere, waits, or sets the
network limit to 0. A right admin token gives its count back, so the admin's own calls
use up nothing. Operations without auth never look at the token, so a token sent there
is no guess. The client address is ``request.remote_addr``:
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
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, NoReturn

from flask import Flask, Response, current_app, request

from service import metrics
from service.addresses import client_of, network_of, unmapped
from service.arena.core.problems import Problem
from service.storage.hits import PendingHit, pending_hit
from service.storage.store import Store

# The defaults, sized from the project's own runner at full speed (see docs/operations.md's
# configuration section and bench/request_rates.py).
# Measured (bench/request_rates.py, 2 cores under load): a tournament runner's bot peaks
# at 848 requests in 10 s (1.7-1.9 requests a move), an ``allfours bot`` at 65 moves/s
# (1.1 requests a move); 3,000 in 10 s is 300 requests/s, 3.5 times the busiest 10 s
# seen, and a bot that does spend it waits at most 10 s.
RATE_LIMIT = 3000  # requests per window per bot (or per address without a token)
RATE_WINDOW = 10  # seconds
# Failed authentication (see the module docstring for why each number is what it is).
AUTH_FAILURE_LIMIT = 30  # unknown bot tokens per window per client address
AUTH_FAILURE_NETWORK_LIMIT = 120  # ... per IPv4 /24 or IPv6 /64 (4 addresses' worth)
ADMIN_FAILURE_LIMIT = 5  # wrong admin tokens per window per client address
ADMIN_FAILURE_NETWORK_LIMIT = 20  # ... per IPv4 /24 or IPv6 /64
AUTH_FAILURE_WINDOW = 300  # seconds, from a counter's first failure
POLICY = "default"

# Views whose first Redis call reads a game: their budget hit rides along with that read
# (one round trip, ``Store.get_game_and_idem``) instead of a round trip of its own.
FUSED = frozenset({"games.act", "games.turn", "games.get_game"})


def reject(detail: str, ttl_ms: int) -> NoReturn:
    """Refuse this request for its rate: 429 with ``Retry-After`` (whole seconds, at least
    1) — the one place every rate-limit rejection goes through (and is counted)."""
    metrics.RATE_LIMITED.inc()
    raise Problem("rate-limited", detail, headers={"Retry-After": str(_seconds(ttl_ms))})


def client_address() -> str:
    """The client's address (after ``ProxyFix``, when proxies are trusted); an IPv4-mapped
    IPv6 address (``::ffff:a.b.c.d``, a dual-stack listener's view of an IPv4 client) is
    that IPv4 address, so one client is one counter however its socket spells it. ``-``
    when the request has none (what counts uses ``counted_address``)."""
    return unmapped(request.remote_addr)


def counted_address() -> str:
    """``client_address`` for a count: a request with no address (a server on a Unix
    socket behind a proxy that does not pass it on) is refused, 400, rather than counted:
    every limit counts a client by its address, and without one every such client would
    count in one bucket, where one of them could shut the others out."""
    if not request.remote_addr:
        raise Problem("bad-request", "the service cannot tell this client's address, by "
                      "which its limits count it (behind a proxy: ARENA_TRUSTED_PROXIES and "
                      "X-Forwarded-For)")
    return client_address()


def client_key() -> str:
    """The client a request counts as (``service.addresses.client_of``: an IPv4 address,
    an IPv6 /64), for the request budget and every per-client count."""
    return client_of(counted_address())


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


def count_request(who: str | None) -> None:
    """Count one request against ``who``'s budget (``b<bot>``; None: this client's,
    ``a<client>``); for a view that reads a game first, the count rides with that read."""
    _quota.set(None)
    cfg = current_app.config
    limit, window = cfg["ARENA_RATE_LIMIT"], cfg["ARENA_RATE_WINDOW"]
    if not limit:
        return
    if who is None:
        who = "a" + client_key()
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


# The network an address counts with (service.addresses: IPv4 /24, IPv6 /64).
client_network = network_of


def _counters(kind: str, address_limit: int, network_limit: int
              ) -> list[tuple[str, int, str]]:
    """(counter, limit, whose) for each failure count that is on (a limit of 0: off)."""
    address = counted_address()
    out = []
    if address_limit:
        out.append((f"{kind}:{address}", address_limit, "this address"))
    if network_limit:
        out.append((f"{kind}net:{client_network(address)}", network_limit,
                    "this address's network"))
    return out


def _over(counters: list[tuple[str, int, str]], counts: list[tuple[int, int]], what: str,
          window: int) -> None:
    """429 when any count, as this very attempt's INCR returned it, is past its limit;
    Retry-After is the longest wait among those over."""
    over = [(limit, whose, ttl) for (_, limit, whose), (n, ttl) in zip(counters, counts)
            if n > limit]
    if over:
        limit, whose, _ = over[0]
        reject(f"more than {limit} {what} from {whose} in {window} s",
               max(ttl for _, _, ttl in over))


def bot_for_token(token: str) -> str | None:
    """The bot behind ``token``, or None (unknown: 401). The token is looked up first,
    always, so a valid one is served whatever others sent from its address or network
    (its own request budget still applies). Only an unknown token is counted, against
    the address and its network, in the same step as the lookup; past either limit the
    failure is a 429 with Retry-After instead of a 401."""
    store = _store()
    known = store.known_bot(token)
    if known is not None and request.remote_addr:  # (no address: refused as below)
        return known
    cfg = current_app.config
    window = cfg["ARENA_AUTH_FAILURE_WINDOW"]
    counters = _counters("fail", cfg["ARENA_AUTH_FAILURE_LIMIT"],
                         cfg["ARENA_AUTH_FAILURE_NETWORK_LIMIT"])
    bot_id, counts = store.guarded_bot_for_token(token, [c for c, _, _ in counters], window)
    if bot_id is None:
        _over(counters, counts, "failed authentications", window)
    return bot_id


def is_bot_token(token: str) -> bool:
    """Whether ``token`` is a bot's, counting nothing: an operation that takes a bot's
    token or the admin's asks first, so that a wrong admin token counts once, as an admin
    failure (``admin_attempt``), not also as a failed bot token."""
    bot_id, _ = _store().guarded_bot_for_token(token, [], 1)
    return bot_id is not None


def admin_attempt(compare: Callable[[], bool]) -> bool:
    """Whether the admin token sent is right (``compare``), counted first: the attempt
    takes its number from an atomic increment of the address's and the network's counts,
    and only an attempt within both limits is compared at all (past them: 429, not
    compared), so N concurrent guesses compare at most the limit's worth, exactly. A
    right token gives its count back: the admin's own calls use up nothing."""
    cfg = current_app.config
    window = cfg["ARENA_AUTH_FAILURE_WINDOW"]
    counters = _counters("adminfail", cfg["ARENA_ADMIN_FAILURE_LIMIT"],
                         cfg["ARENA_ADMIN_FAILURE_NETWORK_LIMIT"])
    names = [c for c, _, _ in counters]
    store = _store()
    _over(counters, store.count_failures(names, window), "failed admin authentications",
          window)
    if not compare():
        return False
    store.uncount_failures(names, window)
    return True


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
    "ARENA_AUTH_FAILURE_NETWORK_LIMIT": AUTH_FAILURE_NETWORK_LIMIT,
    "ARENA_ADMIN_FAILURE_LIMIT": ADMIN_FAILURE_LIMIT,
    "ARENA_ADMIN_FAILURE_NETWORK_LIMIT": ADMIN_FAILURE_NETWORK_LIMIT,
    "ARENA_AUTH_FAILURE_WINDOW": AUTH_FAILURE_WINDOW,
    "ARENA_TRUSTED_PROXIES": 0,
}
