"""Bots that are called (webhooks): the service POSTs a bot's turn to the bot's own web
server and applies the action in the answer, as Battlesnake calls each snake.

A bot registers a **callback URL** (``PUT /bots/me/callback``) and gets a signing secret,
shown once. From then on, whenever it is that bot's turn in a game, some service process
POSTs a signed ``turn`` request holding the seat's view (the same JSON as ``GET
/games/{id}``, with ``legal_actions`` and ``deadline``) and applies the ``action`` in the
answer through ``Arena.act`` — the very path of a pulled action: same validation, with the
delivered ``version`` (so an answer to an old position is refused, never applied to a new
one) and the ``Idempotency-Key`` ``callback-{version}`` (so two deliveries of one turn
apply at most one action). A bad answer (an error status, no answer in time, a body that
is not an action, an illegal card) applies nothing: the seat falls to the move deadline,
where the sweeper plays the documented default action (``service.arena.deadlines``). What
happened is kept as a **delivery record** the bot can read (``GET
/bots/me/callback/deliveries``), and the last failed delivery in a game rides along with
the bot's next ``turn`` request there (``last_failure``). ``start`` and ``end``
notifications tell it when a game it sits in begins and ends (answer ignored).

**Verified first.** A URL is sent nothing but a verification request until it has shown
that it wants the calls (as Slack's url_verification and Twitch's
webhook_callback_verification): about a second after the registration (time for the bot
to keep its new secret), some process's dispatcher POSTs a signed ``verify`` request
with a random ``challenge``; the URL passes by answering 200 with the challenge echoed
(``{"challenge": "..."}``, or the bare challenge). Until then (``verified: false``,
``verification.status: pending``) its seats' turns are not called (they fall to the move
deadline's default action, as any failed call's do) and its notifications wait. A URL
that fails is tried again after 4, 15 and 60 s (``VERIFY_SCHEDULE_S``), then ``failed``
(its pending notifications are dropped) until the bot asks again (``POST
/bots/me/callback/verify``). Registering a URL again (a new secret) verifies it afresh.
So a stranger's server named as a callback receives at most ``len(VERIFY_SCHEDULE_S)``
verification requests per registration, and nothing else. Each attempt is a delivery
record (``event: verify``). An outcome is written only while its verification is still
the bot's current one (``SET_IF_VID``), so an answer for a replaced URL changes nothing.

**Deliveries per host are capped**: at most ``ARENA_CALLBACK_HOST_RATE`` calls per second
to one host (the URL's host name, in lower case), across every bot and every process,
counted in one Redis counter per host and second (``{p}rl:cbhost:<host>:<second>``,
incremented and compared in one step, expiring after the second). A call past it is not
made: a turn falls to the normal failure path (recorded as ``host-rate-limited``; the
move deadline's default action), a notification is dropped, a verification attempt
fails and is tried again on its schedule.

**Who delivers: claims with leases, like the deadlines.** Every process runs a
``Dispatcher``. The truth of "whose turn is it" is the game itself (and the bot's turn set,
which ``Store.COMMIT`` keeps with every change): a dispatcher looks at a webhook bot's turn
set when the bot's turn channel wakes it (the listener every process runs hears each game
become a bot's turn) and, as a repair pass, every ``SCAN_S`` seconds for every webhook bot.
For each game there at version *v* it tries ``SET {hook:bot}:claim:{game}:{v} NX PX
lease``: exactly one process wins the turn and calls the bot. The lease outlasts the call
(its time budget plus ``LEASE_MARGIN_S``); a process killed mid-call leaves the claim to
expire, and the next repair pass of any process claims the turn again and calls again
while time is left — never nobody (until the deadline, which the sweeper owns) and never
two applied actions (version plus key). Once the call has an outcome the claim becomes a
``done`` marker that lives until the deadline has passed: no second call for that
version. A game with no move limit has no fallback; a failed turn there is called again
after ``NO_DEADLINE_RETRY_S``. A process killed after the action applied but before it
wrote the delivery record leaves no record of that call (the game has the action; nothing
is called again, since the turn is over). The repair pass costs each process, every
``SCAN_S``, a few small reads per webhook bot and per game where it is that bot's turn.

**Timeouts and retries.** The call's whole time budget is the time left before the
deadline minus ``DEADLINE_MARGIN_S`` (at most ``ARENA_CALLBACK_TIMEOUT``); connect and
read timeouts come out of it. Retries only where no answer was received (the connection
was refused, reset or timed out while connecting), at most ``ARENA_CALLBACK_RETRIES``,
within the same budget; an answer of any kind is never retried.

**Signing.** ``Arena-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>." + body)>``
with ``Arena-Timestamp: <unix seconds>``; each request (each retry too) has its own
``Arena-Delivery`` id inside the signed body, so a bot rejects stale timestamps and ids it
has seen (``clients/examples/webhook_bot.py``).

**Safe by default (SSRF).** The address is checked when the connection is made, after
DNS resolution (``Guard``, used by the pool's connection class), so a name that resolves to
a private address at call time is refused however it resolved at registration (no DNS
rebinding); an IP literal is checked at registration too, by the same function
(``is_public_address``). Loopback, private, link-local, shared, multicast, reserved and
site-local addresses, and every IPv6 form that embeds or routes to an IPv4 address
(IPv4-compatible, IPv4-mapped, IPv4-translated, NAT64, 6to4, Teredo; ISATAP when the IPv4
inside is not public), are refused unless inside a network of ``ARENA_CALLBACK_NETWORKS``
(comma-separated CIDRs, e.g. ``127.0.0.0/8`` for tests). Redirects are not followed (a 3xx
is a bad answer), the answer is read up to ``ARENA_CALLBACK_MAX_BYTES``, compressed answers
are refused. Outbound connections come from one urllib3 pool per process (urllib3, not ``requests``:
its connection class is where the resolved address can be checked).

**Keys** (one hash tag per bot, so every multi-key step stays in one cluster slot):
``{p}{hook:B}:cfg`` (hash: url, secret, created; verified, verification, vid (the current
verification's id), tries, checked, vdetail), ``{p}{hook:B}:claim:{game}:{v}``,
``{p}{hook:B}:deliveries`` (list of records, newest first, capped),
``{p}{hook:B}:failed`` (hash game -> the last failed turn delivery there),
``{p}{hook:B}:notify`` (sorted set of pending start/end notifications, score = due time,
claimed with leases like the deadlines). The shared keys: ``{p}hookverify`` (sorted set
of pending verifications ``<bot>|<vid>``, score = due time, claimed with leases; an entry
leaves it once its URL passed, failed for good, or was replaced or removed) and
``{p}hooks`` (set of bot ids), which is written as a second step: registration writes the
config first, removal removes the id first; a crash between leaves an id without a
config (skipped and dropped by the next repair pass) or a config without the id (the
bot's retried ``PUT`` adds it).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import json
import logging
import os
import queue
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
)

from service.arena.loop import BackgroundLoop
from service.arena.problems import Problem
from service.arena.status import ACTIVE, FINISHED, WAITING
from service.engine import IllegalAction
from service.jsonio import dumps
from service.storage.store import Game
from service.storage.wakeups import Waiter

log = logging.getLogger(__name__)

# Why 300 calls per second per host by default: the cap bounds what this service can be
# made to send one host that has consented (verification keeps it from calling any other)
# and must not throttle a bot playing flat out: it is about twice what one flat-out bot at
# eight tables needs (`python3 bench/webhooks.py --host-rate 0 --tables 8 --games 16`
# measures it; the figures are in docs/bots.md's webhook section and the closing notes).
HOST_RATE = 300

DEFAULTS: dict[str, Any] = {
    # comma-separated CIDRs callbacks may reach besides public addresses ("" none)
    "ARENA_CALLBACK_NETWORKS": "",
    "ARENA_CALLBACK_TIMEOUT": 10.0,  # seconds: a call's budget when the deadline allows
    "ARENA_CALLBACK_RETRIES": 2,  # extra attempts where no answer came
    "ARENA_CALLBACK_MAX_BYTES": 16384,  # the largest answer read
    # calls per second to one host (the URL's host name), across every bot and process;
    # 0: no cap (see HOST_RATE for why this number)
    "ARENA_CALLBACK_HOST_RATE": HOST_RATE,
    "ARENA_CALLBACKS": "1",  # "0": this process delivers nothing (others may)
}

# Verification of a callback URL (see the module docstring): the delay before each attempt,
# counted from the registration (or the request to verify again) and then from the attempt
# before. The first waits a second so the bot can keep the secret the registration
# answered before a request signed with it arrives; then 4, 15 and 60 s (a server being
# deployed, a restart), about 80 s in all, after which the URL is ``failed`` until the bot
# asks again (``POST /bots/me/callback/verify``).
VERIFY_SCHEDULE_S = (1.0, 4.0, 15.0, 60.0)
VERIFY_TIMEOUT_S = 5.0  # one verification call's budget (connecting, retries, the answer)
SCAN_S = 0.5  # how often every webhook bot's turns are re-checked (the repair pass)
LEASE_MARGIN_S = 5.0  # a claim outlives its call's budget by this much
DEADLINE_MARGIN_S = 0.15  # the answer must be back this long before the deadline
MIN_BUDGET_S = 0.05  # less time than this left: no call (the sweeper plays)
NO_DEADLINE_RETRY_S = 30.0  # a failed turn in a game without a move limit: again after
RETRY_BACKOFF_S = (0.05, 0.2, 0.5)
NOTIFY_TRIES = 3  # start/end notifications: attempts where no answer came
NOTIFY_TIMEOUT_S = 5.0
DELIVERIES_KEPT = 200
MAX_URL = 2000
CONCURRENCY = 200  # calls in flight per process
SIGNATURE_HEADER = "Arena-Signature"
TIMESTAMP_HEADER = "Arena-Timestamp"
DELIVERY_HEADER = "Arena-Delivery"
EVENT_HEADER = "Arena-Event"
USER_AGENT = "allfours-arena-webhooks/1"

# Outcomes of a delivery (``DeliveryRecord.outcome``), documented in openapi.yaml.
OUTCOMES = {
    "applied": "the answer's action was applied",
    "delivered": "a notification was answered (2xx)",
    "refused-address": "the URL resolves to an address outside the allowed networks: "
    "no connection was made",
    "connect-failed": "no connection could be made (after the retries)",
    "no-answer": "the connection broke before an answer (after the retries)",
    "timeout": "no answer within the time budget",
    "http-error": "the answer's status was not 2xx (3xx included: redirects are not "
    "followed)",
    "bad-answer": "the body was not JSON `{\"action\": ...}` (or too large, or compressed)",
    "refused": "the action was refused as a pulled one would be (`problem` says why: "
    "illegal-action, not-your-turn, version-conflict...)",
    "no-time": "too little time was left before the deadline to call",
    "host-rate-limited": "the URL's host had had its `ARENA_CALLBACK_HOST_RATE` calls this "
    "second (across every bot): no call was made; a turn falls to the deadline's default",
    "verified": "the verification request's challenge was echoed: the URL gets calls",
    "not-verified": "the answer to the verification request was a 200 that did not echo "
    "the challenge",
}

VERIFICATION = {
    "pending": "a verification request is due or under way; nothing else is sent",
    "verified": "the URL echoed the challenge: turns, start and end are sent to it",
    "failed": "every attempt failed: nothing is sent until you ask again "
    "(`POST /bots/me/callback/verify`)",
}


# --- keys ------------------------------------------------------------------------------------


def hooks_key(p: str) -> str:
    return f"{p}hooks"


def cfg_key(p: str, bot: str) -> str:
    return f"{p}{{hook:{bot}}}:cfg"


def claim_key(p: str, bot: str, game_id: str, version: int) -> str:
    return f"{p}{{hook:{bot}}}:claim:{game_id}:{version}"


def deliveries_key(p: str, bot: str) -> str:
    return f"{p}{{hook:{bot}}}:deliveries"


def failed_key(p: str, bot: str) -> str:
    return f"{p}{{hook:{bot}}}:failed"


def notify_key(p: str, bot: str) -> str:
    return f"{p}{{hook:{bot}}}:notify"


def verify_key(p: str) -> str:
    """Pending verifications (sorted set: ``<bot>|<verification id>``, score = due time),
    claimed with leases like the notifications; shared by every bot, like ``hooks``."""
    return f"{p}hookverify"


# KEYS[1] a bot's config. ARGV[1] the verification id the outcome is for; then fields and
# values to set. Written only if the config still has that id: an answer for a URL since
# replaced (or a verification asked again) changes nothing.
SET_IF_VID = """
if redis.call('HGET', KEYS[1], 'vid') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
return 1
"""


# KEYS[1] the bot's pending notifications. ARGV: now, lease-until. As ``Store.CLAIM``.
CLAIM_NOTES = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 20)
for _, m in ipairs(due) do redis.call('ZADD', KEYS[1], 'XX', ARGV[2], m) end
return due
"""


# --- signing -----------------------------------------------------------------------------------


def sign(secret: str, timestamp: int | str, body: bytes) -> str:
    """The ``Arena-Signature`` value: ``sha256=`` and the hex HMAC-SHA256, keyed with the
    secret's UTF-8 bytes, of ``"<timestamp>."`` followed by the exact body bytes."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def verify(secret: str, timestamp: str | None, signature: str | None, body: bytes,
           tolerance_s: float = 60.0, now: float | None = None) -> bool:
    """What a bot checks (the example bots do the same): a fresh timestamp and the
    signature over it, compared in constant time."""
    if not timestamp or not signature or not timestamp.isdigit():
        return False
    now = time.time() if now is None else now
    if abs(now - int(timestamp)) > tolerance_s:
        return False
    return hmac.compare_digest(sign(secret, timestamp, body), signature)


# --- the address guard (SSRF) ----------------------------------------------------------------


class RefusedAddress(NewConnectionError):
    """Every address the host resolved to is outside the allowed networks."""


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(text: str | Iterable[str]) -> list[IPNetwork]:
    """``"127.0.0.0/8, ::1/128"`` → networks (raises ValueError on a bad one)."""
    items = text.split(",") if isinstance(text, str) else list(text)
    try:
        return [ipaddress.ip_network(x.strip(), strict=False) for x in items if x.strip()]
    except ValueError as exc:
        raise ValueError(f"ARENA_CALLBACK_NETWORKS: {exc}") from None


# IPv6 forms that carry an IPv4 address or hand the packet to IPv4: a connection to one of
# them reaches whatever IPv4 address it embeds (a dual-stack host, a NAT64 or 6to4 relay,
# a Teredo server), which ``ipaddress.is_global`` does not look at (it calls
# ``::7f00:1``, ``64:ff9b::7f00:1`` and ``2002:7f00:1::`` global). Refused outright: a
# bot with a public IPv4 address names that address (or a host name resolving to it).
EMBEDS_IPV4 = tuple(ipaddress.IPv6Network(n) for n in (
    "::/96",  # IPv4-compatible (deprecated, RFC 4291), :: and ::1 included
    "::ffff:0:0/96",  # IPv4-mapped (RFC 4291), however spelled (::ffff:7f00:1 too)
    "::ffff:0:0:0/96",  # IPv4-translated (RFC 2765, SIIT)
    "64:ff9b::/96",  # NAT64 well-known prefix (RFC 6052)
    "64:ff9b:1::/48",  # NAT64 local-use prefixes (RFC 8215)
    "2002::/16",  # 6to4 (RFC 3056)
    "2001::/32",  # Teredo (RFC 4380)
))
SITE_LOCAL = ipaddress.IPv6Network("fec0::/10")  # deprecated (RFC 3879), still routed inside
# An ISATAP interface id (RFC 5214): ``0000:5efe`` or ``0200:5efe`` then an IPv4 address.
_ISATAP_IDS = (0x00005EFE, 0x02005EFE)


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries, in any of the forms above or an ISATAP
    interface id; None when it carries none."""
    n = int(ip)
    if any(ip in net for net in EMBEDS_IPV4[:5]):
        return ipaddress.IPv4Address(n & 0xFFFFFFFF)  # the last 32 bits
    if ip in EMBEDS_IPV4[5]:  # 6to4: 2002:AABB:CCDD::/48
        return ipaddress.IPv4Address((n >> 80) & 0xFFFFFFFF)
    if ip.teredo is not None:  # (server, client): the client's address, obfuscated
        return ip.teredo[1]
    if (n >> 32) & 0xFFFFFFFF in _ISATAP_IDS:
        return ipaddress.IPv4Address(n & 0xFFFFFFFF)
    return None


def is_public_address(ip: IPAddress) -> bool:
    """Whether a callback may connect to ``ip`` without the operator's say-so: a globally
    routable unicast address that is not, and does not lead to, anything else. Refused:
    loopback, private, link-local, carrier-grade NAT, multicast, reserved, unspecified,
    site-local ``fec0::/10``, every IPv6 form that embeds or routes to an IPv4 address
    (``EMBEDS_IPV4``), and any other address whose embedded IPv4 (an ISATAP interface id)
    is not public. The one rule for both checks: the URL's literal at registration, and
    every resolved address at connection time (``Guard``)."""
    if ip.is_multicast or not ip.is_global:
        return False
    if isinstance(ip, ipaddress.IPv4Address):
        return True
    if ip in SITE_LOCAL or any(ip in net for net in EMBEDS_IPV4):
        return False
    inner = embedded_ipv4(ip)
    return inner is None or is_public_address(inner)


class Guard:
    """Which addresses a callback may connect to: public ones (``is_public_address``),
    and any address inside ``allowed`` (``ARENA_CALLBACK_NETWORKS``; an IPv6 address that
    embeds an IPv4 one is also allowed when that IPv4 address is, so an operator who
    allows ``127.0.0.0/8`` for tests allows ``::ffff:127.0.0.1`` with it)."""

    def __init__(self, allowed: Iterable[IPNetwork] = ()) -> None:
        self.allowed = list(allowed)

    def _inside(self, ip: IPAddress) -> bool:
        return any(ip.version == n.version and ip in n for n in self.allowed)

    def allows(self, ip: IPAddress) -> bool:
        if self._inside(ip):
            return True
        if isinstance(ip, ipaddress.IPv6Address):
            inner = embedded_ipv4(ip)
            if inner is not None and self._inside(inner):
                return True
        return is_public_address(ip)

    def literal_refused(self, host: str) -> bool:
        """A URL whose host is an IP literal outside the allowed networks can never be
        called: refused at registration (a name is judged at each connection)."""
        try:
            ip = ipaddress.ip_address(host.strip("[]").split("%")[0])
        except ValueError:
            try:  # the legacy numeric forms resolvers accept: 0x7f.1, 2130706433, 127.1
                ip = ipaddress.IPv4Address(socket.inet_aton(host))
            except OSError:
                return False
        return not self.allows(ip)


def _guarded_conn(guard: Guard, base: type[HTTPConnection]) -> type[HTTPConnection]:
    class Guarded(base):  # type: ignore[valid-type,misc]
        def _new_conn(self) -> socket.socket:
            """Resolve, keep only allowed addresses, connect to one of those: the check
            is on the address actually connected to (TLS still verifies the name)."""
            try:
                infos = socket.getaddrinfo(self._dns_host, self.port, 0, socket.SOCK_STREAM)
            except OSError as exc:
                raise NewConnectionError(self, f"cannot resolve {self._dns_host}: {exc}"
                                         ) from exc
            refused, error = [], None
            for family, kind, proto, _, sockaddr in infos:
                ip = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
                if not guard.allows(ip):
                    refused.append(str(ip))
                    continue
                sock = socket.socket(family, kind, proto)
                try:
                    if self.timeout is not None:
                        sock.settimeout(self.timeout)
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    sock.connect(sockaddr)
                    return sock
                except TimeoutError as exc:
                    sock.close()
                    raise ConnectTimeoutError(self, f"connect to {ip} timed out") from exc
                except OSError as exc:
                    sock.close()
                    error = exc
            if error is not None:
                raise NewConnectionError(self, f"cannot connect: {error}") from error
            raise RefusedAddress(self, "refused: resolves to " + ", ".join(refused)
                                 + " (outside ARENA_CALLBACK_NETWORKS)")

    return Guarded


def make_pool(guard: Guard, maxsize: int = 10) -> urllib3.PoolManager:
    """The process's outbound pool: keep-alive connections per host, every new connection
    through ``guard``, no retries or redirects of urllib3's own (``deliver`` decides)."""
    http_conn = _guarded_conn(guard, HTTPConnection)
    https_conn = _guarded_conn(guard, HTTPSConnection)

    class Pool(HTTPConnectionPool):
        ConnectionCls = http_conn

    class TLSPool(HTTPSConnectionPool):
        ConnectionCls = https_conn

    manager = urllib3.PoolManager(num_pools=100, maxsize=maxsize, block=False,
                                  retries=False)
    manager.pool_classes_by_scheme = {"http": Pool, "https": TLSPool}
    manager.key_fn_by_scheme = dict(manager.key_fn_by_scheme)
    return manager


class Claim(NamedTuple):
    """A turn this process has claimed: the game at the claimed version, the seconds left
    before its deadline (None: no move limit) and the call's time budget."""

    bot_id: str
    game: Game
    key: str
    left: float | None
    budget: float


class CallResult:
    """One call's outcome: ``status`` and ``body`` when an answer came, else ``error``
    (an outcome name of ``OUTCOMES``) and ``detail``."""

    def __init__(self, status: int | None = None, body: bytes = b"", error: str | None = None,
                 detail: str = "", attempts: int = 1) -> None:
        self.status, self.body, self.error, self.detail = status, body, error, detail
        self.attempts = attempts


def post(pool: urllib3.PoolManager, url: str, body: bytes, headers: dict[str, str],
         budget_s: float, max_bytes: int) -> CallResult:
    """POST ``body`` once, connecting and reading within ``budget_s`` seconds (retries are
    ``Callbacks.call``'s, each a new delivery id and signature)."""
    try:
        resp = pool.request(
            "POST", url, body=body, headers=headers, redirect=False, retries=False,
            preload_content=False,
            timeout=urllib3.Timeout(connect=max(0.01, min(budget_s, 3.0)),
                                    read=max(0.01, budget_s)),
        )
    except RefusedAddress as exc:
        return CallResult(error="refused-address", detail=_reason(exc))
    except ReadTimeoutError:
        return CallResult(error="timeout", detail=f"no answer in {budget_s:.2f} s")
    except (NewConnectionError, ConnectTimeoutError) as exc:
        return CallResult(error="connect-failed", detail=_reason(exc))
    except (ProtocolError, HTTPError) as exc:
        return CallResult(error="no-answer", detail=_reason(exc))
    try:
        if resp.headers.get("Content-Encoding", "identity").lower() != "identity":
            return CallResult(resp.status, error="bad-answer",
                              detail="compressed answers are not accepted")
        data = resp.read(max_bytes + 1, decode_content=False)
        if len(data) > max_bytes:
            return CallResult(resp.status, error="bad-answer",
                              detail=f"the answer is larger than {max_bytes} bytes")
        return CallResult(resp.status, data)
    except ReadTimeoutError:
        return CallResult(resp.status, error="timeout",
                          detail=f"the answer did not arrive in {budget_s:.2f} s")
    except (HTTPError, OSError) as exc:
        return CallResult(resp.status, error="no-answer", detail=_reason(exc))
    finally:
        resp.release_conn()


def _reason(exc: BaseException) -> str:
    """An error's message without urllib3's object reprs, at most 200 characters."""
    text = str(exc)
    if ": " in text and text.startswith("<"):
        text = text.split(": ", 1)[1]
    return text[:200]


# --- registration and records --------------------------------------------------------------------


def check_url(url: str, guard: Guard) -> str | None:
    """Why ``url`` cannot be a callback URL, or None when it can."""
    if len(url) > MAX_URL:
        return f"at most {MAX_URL} characters"
    if any(ord(ch) <= 0x20 or ord(ch) == 0x7F for ch in url):
        return "no spaces or control characters in the URL"
    try:
        parts = urlsplit(url)
        _ = parts.port
        urllib3.util.parse_url(url)
    except (ValueError, urllib3.exceptions.LocationParseError):
        return "not a URL this service can call (a bad host or port)"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "an absolute http or https URL is required"
    if parts.username is not None or parts.password is not None:
        return "no user name or password in the URL"
    if parts.fragment:
        return "no fragment (#...) in the URL"
    if guard.literal_refused(parts.hostname):
        return ("the address is private, loopback or link-local, which this service does "
                "not call (its operator may allow networks: ARENA_CALLBACK_NETWORKS)")
    return None


def echoes(body: bytes, challenge: str) -> bool:
    """Whether an answer to a verification request echoes its challenge: the JSON
    ``{"challenge": "<it>"}`` (as Slack's url_verification), or the bare challenge as the
    whole body (as Twitch's), surrounding white space aside."""
    text = body.strip()
    if text == challenge.encode():
        return True
    try:
        answer = json.loads(text)
    except ValueError:
        return False
    return isinstance(answer, dict) and answer.get("challenge") == challenge


# Reads a bot's answer to a turn (a JSON object) into an action body as ``POST
# /games/{game_id}/actions`` takes it, raising on a bad one. The wire's schema is HTTP's
# (``service.http.callback_schemas.CallbackAnswer``): the app hands its reader in.
AnswerReader = Callable[[dict[str, Any]], dict[str, Any]]


class Callbacks:
    """Registration, delivery records, and the calls themselves; one per process."""

    def __init__(self, arena: Any, config: dict[str, Any] | None = None, *,
                 read_answer: AnswerReader) -> None:
        cfg = {**DEFAULTS, **(config or {})}
        self.arena = arena
        self.read_answer = read_answer
        self.store = arena.store
        self.guard = Guard(parse_networks(str(cfg["ARENA_CALLBACK_NETWORKS"])))
        self.timeout_s = float(cfg["ARENA_CALLBACK_TIMEOUT"])
        self.retries = int(cfg["ARENA_CALLBACK_RETRIES"])
        self.max_bytes = int(cfg["ARENA_CALLBACK_MAX_BYTES"])
        self.enabled = str(cfg["ARENA_CALLBACKS"]) != "0"
        self.host_rate = int(cfg["ARENA_CALLBACK_HOST_RATE"])
        self.pool = make_pool(self.guard)
        self._claim_notes = self.store.r.register_script(CLAIM_NOTES)
        self._set_if_vid = self.store.r.register_script(SET_IF_VID)
        # Called with each finished delivery record (the bench and tests listen here).
        self.on_record: list[Any] = []

    @property
    def p(self) -> str:
        return str(self.store.p)

    # --- registration ----------------------------------------------------------------------

    def register(self, bot_id: str, url: str) -> dict[str, Any]:
        """Set (or replace) the bot's callback URL with a new secret, shown only here. The
        URL is unverified until it echoes a verification request's challenge (sent about
        ``VERIFY_SCHEDULE_S[0]`` seconds from now, by any process's dispatcher); until
        then it is sent nothing else. A new URL (or the same one again: a new secret) is
        verified afresh."""
        why = check_url(url, self.guard)
        if why is not None:
            raise Problem("validation", f"url: {why}", errors={"url": [why]})
        secret = "whsec_" + secrets.token_urlsafe(32)
        created = int(time.time())
        vid = secrets.token_hex(8)
        r = self.store.r
        old = r.hget(cfg_key(self.p, bot_id), "vid")
        r.hset(cfg_key(self.p, bot_id), mapping={
            "url": url, "secret": secret, "created": created, "verified": 0,
            "verification": "pending", "vid": vid, "tries": 0, "checked": "", "vdetail": ""})
        r.sadd(hooks_key(self.p), bot_id)
        self._schedule(bot_id, old, vid, VERIFY_SCHEDULE_S[0])
        self.wake(bot_id)
        return {**self.registration(bot_id), "secret": secret}

    def _schedule(self, bot_id: str, old_vid: bytes | str | None, vid: str,
                  delay_s: float) -> None:
        """Queue the verification ``vid`` of ``bot_id`` in ``delay_s`` seconds, in place of
        the one queued before (``old_vid``)."""
        pipe = self.store.r.pipeline(transaction=False)
        if old_vid:
            old = old_vid.decode() if isinstance(old_vid, bytes) else old_vid
            pipe.zrem(verify_key(self.p), f"{bot_id}|{old}")
        pipe.zadd(verify_key(self.p), {f"{bot_id}|{vid}": time.time() + delay_s})
        pipe.execute()

    def config(self, bot_id: str) -> dict[str, Any] | None:
        raw = self.store.r.hgetall(cfg_key(self.p, bot_id))
        if not raw or b"url" not in raw:
            return None
        # a config written before verification existed counts as verified: it was
        # registered under the old rules and has been called since
        verified = raw.get(b"verified", b"1") == b"1"
        return {"url": raw[b"url"].decode(), "secret": raw[b"secret"].decode(),
                "created": int(raw[b"created"]), "verified": verified,
                "verification": (raw.get(b"verification") or b"verified").decode(),
                "vid": (raw.get(b"vid") or b"").decode(),
                "tries": int(raw.get(b"tries") or 0),
                "checked": float(raw[b"checked"]) if raw.get(b"checked") else None,
                "vdetail": (raw.get(b"vdetail") or b"").decode() or None}

    def registration(self, bot_id: str) -> dict[str, Any]:
        cfg = self.config(bot_id)
        if cfg is None:
            raise Problem("not-found", "this bot has no callback URL")
        return {"url": cfg["url"], "created": cfg["created"], "verified": cfg["verified"],
                "verification": {"status": cfg["verification"], "attempts": cfg["tries"],
                                 "at": cfg["checked"], "detail": cfg["vdetail"]}}

    def summary(self, bot_id: str) -> dict[str, Any] | None:
        """``registration`` for ``GET /bots/me`` (None: no callback URL)."""
        try:
            return self.registration(bot_id)
        except Problem:
            return None

    def request_verification(self, bot_id: str) -> dict[str, Any]:
        """Verify the URL again, at once (the bot has its secret by now): for a URL that
        failed or is still pending. A verified URL stays as it is (nothing is sent)."""
        cfg = self.config(bot_id)
        if cfg is None:
            raise Problem("not-found", "this bot has no callback URL")
        if not cfg["verified"]:
            vid = secrets.token_hex(8)
            self.store.r.hset(cfg_key(self.p, bot_id), mapping={
                "verification": "pending", "vid": vid, "tries": 0, "vdetail": ""})
            self._schedule(bot_id, cfg["vid"], vid, 0.0)
            self.wake(bot_id)
        return self.registration(bot_id)

    def verify_once(self, bot_id: str, vid: str) -> dict[str, Any] | None:
        """One verification attempt of ``bot_id``'s URL (the verification ``vid``): a
        signed ``verify`` request with a random ``challenge``; passed when the answer is
        200 and echoes it (``{"challenge": "<it>"}``, or the bare challenge as the body).
        Passed: the URL is verified and the bot's turns are looked at. Failed: again
        after the next delay of ``VERIFY_SCHEDULE_S``, or ``failed`` after the last. The
        outcome is written only if the verification is still current (``SET_IF_VID``).
        The delivery record, or None when there was nothing to verify."""
        member = f"{bot_id}|{vid}"
        cfg = self.config(bot_id)
        r = self.store.r
        if cfg is None or cfg["vid"] != vid or cfg["verified"]:
            r.zrem(verify_key(self.p), member)
            return None
        started = time.time()
        challenge = secrets.token_urlsafe(24)
        envelope = {"event": "verify", "delivery": "", "bot_id": bot_id,
                    "challenge": challenge}
        result = self.call(cfg, envelope, VERIFY_TIMEOUT_S)
        record: dict[str, Any] = {
            "event": "verify", "game_id": None, "version": None, "seat": None,
            "at": round(started, 3), "status": result.status, "action": None,
            "problem": None, "attempts": result.attempts,
            "latency_ms": round((time.time() - started) * 1000, 2),
            "outcome": "verified", "detail": None,
        }
        if result.error is not None:
            record.update(outcome=result.error, detail=result.detail)
        elif result.status != 200:
            record.update(outcome="http-error",
                          detail=f"the answer's status was {result.status}, not 200")
        elif not echoes(result.body, challenge):
            record.update(outcome="not-verified",
                          detail='the answer did not echo the challenge: answer 200 with '
                          '{"challenge": "<the request\'s challenge>"}')
        tries = cfg["tries"] + 1
        passed = record["outcome"] == "verified"
        last = tries >= len(VERIFY_SCHEDULE_S)
        state = "verified" if passed else ("failed" if last else "pending")
        written = self._set_if_vid(keys=[cfg_key(self.p, bot_id)], args=[
            vid, "verified", int(passed), "verification", state, "tries", tries,
            "checked", round(started, 3), "vdetail", record["detail"] or ""])
        if not written:  # replaced meanwhile: this outcome is for an old URL
            return None
        if passed or last:
            r.zrem(verify_key(self.p), member)
        else:
            r.zadd(verify_key(self.p), {member: time.time() + VERIFY_SCHEDULE_S[tries]})
        self._record(bot_id, record)
        if passed:
            self.wake(bot_id)
        return record

    def claim_verifications(self) -> list[tuple[str, str]]:
        """The due verifications this process is to send, (bot, vid) each, leased like
        the notifications: a process that dies mid-call leaves them due again after the
        lease."""
        now = time.time()
        due = self._claim_notes(keys=[verify_key(self.p)],
                                args=[now, now + VERIFY_TIMEOUT_S + LEASE_MARGIN_S])
        out = []
        for raw in due:
            bot, _, vid = raw.decode().partition("|")
            out.append((bot, vid))
        return out

    def remove(self, bot_id: str) -> None:
        r = self.store.r
        r.srem(hooks_key(self.p), bot_id)
        vid = r.hget(cfg_key(self.p, bot_id), "vid")
        if not r.delete(cfg_key(self.p, bot_id)):
            raise Problem("not-found", "this bot has no callback URL")
        if vid:
            r.zrem(verify_key(self.p), f"{bot_id}|{vid.decode()}")

    def deliveries(self, bot_id: str, limit: int, game_id: str | None = None
                   ) -> list[dict[str, Any]]:
        raw = self.store.r.lrange(deliveries_key(self.p, bot_id), 0, DELIVERIES_KEPT - 1)
        out = [json.loads(x) for x in raw]
        if game_id is not None:
            out = [d for d in out if d["game_id"] == game_id]
        return out[:limit]

    def with_failure(self, view: dict[str, Any], bot_id: str | None) -> dict[str, Any]:
        """``view`` (``bot_id``'s own seat's) with ``callback_failure``: the last turn
        delivery to the bot's callback URL in this game that applied nothing (its
        ``version`` says which turn), null when there is none or a later one applied
        (always null for a bot without a callback URL). So a bot sees in its view, as
        well as in its deliveries, that the service could not use its answer, and may
        still act by pull before the deadline. One HGET, read afresh each time: no cache
        that could lag a registration (a view of ``GET /games/{id}`` is not on a bot's
        per-move path, which acts and waits)."""
        if bot_id is None or view.get("seat") is None:
            return view
        raw = self.store.r.hget(failed_key(self.p, bot_id), view["id"])
        view["callback_failure"] = json.loads(raw) if raw else None
        return view

    def _record(self, bot_id: str, record: dict[str, Any]) -> None:
        pipe = self.store.r.pipeline(transaction=True)  # one hash tag: one slot
        pipe.lpush(deliveries_key(self.p, bot_id), dumps(record))
        pipe.ltrim(deliveries_key(self.p, bot_id), 0, DELIVERIES_KEPT - 1)
        if record["event"] == "turn":
            if record["outcome"] == "applied":
                pipe.hdel(failed_key(self.p, bot_id), record["game_id"])
            else:
                pipe.hset(failed_key(self.p, bot_id), record["game_id"], dumps(record))
                pipe.expire(failed_key(self.p, bot_id), 86400)
        pipe.execute()
        for hook in self.on_record:
            with contextlib.suppress(Exception):
                hook(bot_id, record)

    def wake(self, bot_id: str) -> None:
        """Look at ``bot_id``'s turns soon (the local dispatcher, if any)."""
        dispatcher = getattr(self, "dispatcher", None)
        if dispatcher is not None:
            dispatcher.wake(bot_id)

    # --- one call ------------------------------------------------------------------------------

    def _request(self, cfg: dict[str, Any], envelope: dict[str, Any]
                 ) -> tuple[bytes, dict[str, str]]:
        body = dumps(envelope).encode()
        ts = str(int(time.time()))
        return body, {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "Accept-Encoding": "identity",
            TIMESTAMP_HEADER: ts,
            SIGNATURE_HEADER: sign(cfg["secret"], ts, body),
            DELIVERY_HEADER: envelope["delivery"],
            EVENT_HEADER: envelope["event"],
        }

    def call(self, cfg: dict[str, Any], envelope: dict[str, Any], budget_s: float
             ) -> CallResult:
        """Sign and POST one request; a retry where no answer came is a new delivery id
        and timestamp (signed again), the same turn."""
        end = time.monotonic() + budget_s
        result = CallResult(error="no-time", attempts=0)
        for attempt in range(1, self.retries + 2):
            left = end - time.monotonic()
            if left < MIN_BUDGET_S:
                break
            refused = self._host_refuses(cfg["url"])
            if refused is not None:
                result = CallResult(error="host-rate-limited", detail=refused,
                                    attempts=attempt - 1)
                break
            envelope = {**envelope, "delivery": secrets.token_hex(8)}
            body, headers = self._request(cfg, envelope)
            result = post(self.pool, cfg["url"], body, headers, left, self.max_bytes)
            result.attempts = attempt
            if result.error not in ("connect-failed", "no-answer"):
                break
            wait = RETRY_BACKOFF_S[min(attempt - 1, len(RETRY_BACKOFF_S) - 1)]
            if end - time.monotonic() < wait + MIN_BUDGET_S:
                break
            time.sleep(wait)
        return result

    def _host_refuses(self, url: str) -> str | None:
        """Count one call to ``url``'s host in this second (every bot, every process: one
        Redis counter, incremented and compared as INCR returned it); why it may not be
        made, or None. The host is the URL's host name (or address) in lower case."""
        if not self.host_rate:
            return None
        host = (urlsplit(url).hostname or "").lower()
        count, _ = self.store.hit("cbhost:" + host, 1)
        if count <= self.host_rate:
            return None
        return (f"more than {self.host_rate} calls to {host} in one second "
                "(ARENA_CALLBACK_HOST_RATE)")

    # --- a turn ---------------------------------------------------------------------------------

    def claim_turn(self, bot_id: str, game: Game) -> Claim | None:
        """Claim ``game`` at its version for ``bot_id``: the claim, or None when it is not
        the bot's turn or another process holds (or held) this version's claim."""
        if game.status != ACTIVE or game.seats[game.state.turn] != bot_id:
            return None
        now = time.time()
        left = (game.deadline - now) if game.deadline is not None else None
        budget = self.timeout_s if left is None else min(self.timeout_s,
                                                         left - DEADLINE_MARGIN_S)
        lease_ms = int((max(budget, 0) + LEASE_MARGIN_S) * 1000)
        key = claim_key(self.p, bot_id, game.id, game.version)
        if not self.store.r.set(key, "calling", nx=True, px=lease_ms):
            return None
        return Claim(bot_id, game, key, left, budget)

    def run_claimed(self, claim: Claim, cfg: dict[str, Any]) -> dict[str, Any] | None:
        """Deliver a claimed turn; then the claim becomes a ``done`` marker (no second call
        for this version, see the module docstring). An unexpected error leaves the claim
        to expire, so any process calls again after the lease."""
        try:
            record = self.deliver_turn(claim.bot_id, cfg, claim.game, claim.budget)
        except Exception:
            log.exception("callback turn for %s in %s failed; retried after the lease",
                          claim.bot_id, claim.game.id)
            return None
        if record["outcome"] == "applied":
            keep_s = 60.0
        elif claim.left is None:
            keep_s = NO_DEADLINE_RETRY_S
        else:
            keep_s = max(claim.left, 0) + LEASE_MARGIN_S
        self.store.r.set(claim.key, "done", px=int(keep_s * 1000))
        return record

    def try_turn(self, bot_id: str, game: Game, cfg: dict[str, Any] | None = None) -> bool:
        """Claim and deliver in one go; False when there was nothing to claim."""
        cfg = cfg or self.config(bot_id)
        if cfg is None or not cfg["verified"]:  # an unverified URL is sent nothing
            return False
        claim = self.claim_turn(bot_id, game)
        if claim is None:
            return False
        self.run_claimed(claim, cfg)
        return True

    def deliver_turn(self, bot_id: str, cfg: dict[str, Any], game: Game, budget: float
                     ) -> dict[str, Any]:
        started = time.time()
        seat = game.state.turn
        record: dict[str, Any] = {
            "event": "turn", "game_id": game.id, "version": game.version, "seat": seat,
            "at": round(started, 3), "outcome": "", "status": None, "action": None,
            "problem": None, "detail": None, "attempts": 0, "latency_ms": None,
        }
        if budget < MIN_BUDGET_S:
            record.update(outcome="no-time",
                          detail="too little time was left before the deadline")
            self._record(bot_id, record)
            return record
        last = self.store.r.hget(failed_key(self.p, bot_id), game.id)
        envelope = {
            "event": "turn", "delivery": "", "bot_id": bot_id, "game_id": game.id,
            "version": game.version, "seat": seat, "deadline": game.deadline,
            "view": self.arena.view(game, bot_id, seat),
            "last_failure": json.loads(last) if last else None,
        }
        result = self.call(cfg, envelope, budget)
        record["attempts"] = result.attempts
        record["status"] = result.status
        record["latency_ms"] = round((time.time() - started) * 1000, 2)
        if result.error is not None:
            record.update(outcome=result.error, detail=result.detail)
        elif not 200 <= (result.status or 0) < 300:
            record.update(outcome="http-error", detail=f"the answer's status was {result.status}")
        else:
            self._apply(bot_id, game, seat, result.body, record)
        record["latency_ms"] = round((time.time() - started) * 1000, 2)
        self._record(bot_id, record)
        return record

    def _apply(self, bot_id: str, game: Game, seat: int, raw: bytes,
               record: dict[str, Any]) -> None:
        """The answer's action through ``Arena.act``, exactly as a pulled action with
        ``version`` and an ``Idempotency-Key`` of this turn."""
        try:
            answer = json.loads(raw)
            if not isinstance(answer, dict):
                raise ValueError("not an object")
            body = self.read_answer(answer)
        except Exception as exc:
            detail = "the body must be a JSON object with an action, e.g. {\"action\": \"AS\"}"
            if isinstance(exc, ValueError) and not isinstance(exc, json.JSONDecodeError):
                detail = f"{detail}: {str(exc)[:150]}"
            record.update(outcome="bad-answer", detail=detail)
            return
        body.setdefault("version", game.version)
        body.setdefault("seat", seat)
        record["action"] = body["action"]
        try:
            self.arena.act(game.id, bot_id, body, None, f"callback-{game.version}")
        except IllegalAction as exc:
            from service.arena.problems import from_illegal

            problem = from_illegal(exc)
            record.update(outcome="refused", problem=f"/problems/{problem.kind}",
                          detail=str(problem)[:200])
            return
        except Problem as exc:
            if exc.kind == "service-unavailable":
                raise
            record.update(outcome="refused", problem=f"/problems/{exc.kind}",
                          detail=str(exc)[:200])
            return
        record["outcome"] = "applied"

    # --- notifications ----------------------------------------------------------------------------

    def game_changed(self, game: Game, status: str) -> None:
        """A game has just started (active) or ended (finished): queue a ``start`` or
        ``end`` notification for each webhook bot seated in it (Arena's ``on_status``)."""
        if status not in (ACTIVE, FINISHED):
            return
        event = "start" if status == ACTIVE else "end"
        bots = sorted({b for b in game.seats if b})
        if not bots:
            return
        r = self.store.r
        registered = [b for b, m in zip(bots, r.smismember(hooks_key(self.p), bots)) if m]
        now = time.time()
        for bot in registered:
            r.zadd(notify_key(self.p, bot), {f"{event}:{game.id}": now}, nx=True)
            self.wake(bot)

    def invited(self, game: Game, bot_id: str) -> None:
        """``bot_id`` is invited to ``game``: queue an ``invitation`` event for it, if it is
        a webhook bot (``Invitations.on_invite``)."""
        if self.store.r.sismember(hooks_key(self.p), bot_id):
            self.store.r.zadd(notify_key(self.p, bot_id), {f"invitation:{game.id}": time.time()},
                              nx=True)
            self.wake(bot_id)

    def notify_due(self, bot_id: str, cfg: dict[str, Any]) -> int:
        """Deliver ``bot_id``'s due notifications (claimed with a lease); how many."""
        key = notify_key(self.p, bot_id)
        now = time.time()
        due = self._claim_notes(keys=[key], args=[now, now + NOTIFY_TIMEOUT_S + LEASE_MARGIN_S])
        done = 0
        for raw in due:
            member = raw.decode()
            event, _, game_id = member.partition(":")
            game = self.store.get_game(game_id)
            invited = (game.meta.get("invited") or []) if game is not None else []
            if event == "invitation":  # consent (service.arena.invitations): still open?
                if game is None or bot_id not in invited or game.status != WAITING:
                    self.store.r.zrem(key, member)
                    continue
                seat = invited.index(bot_id)
            elif game is None or bot_id not in game.seats:
                self.store.r.zrem(key, member)
                continue
            else:
                seat = game.seats.index(bot_id)
            started = time.time()
            envelope = {"event": event, "delivery": "", "bot_id": bot_id, "game_id": game_id,
                        "version": game.version, "seat": seat, "deadline": game.deadline,
                        "view": self.arena.view(game, bot_id, seat if event != "invitation"
                                                else None), "last_failure": None}
            if event == "invitation":
                envelope["invitation"] = next(
                    (i for i in self.arena.invitations.pending(bot_id)
                     if i["game_id"] == game_id), None)
            result = self.call(cfg, envelope, NOTIFY_TIMEOUT_S)
            record = {
                "event": event, "game_id": game_id, "version": game.version, "seat": seat,
                "at": round(started, 3), "status": result.status, "action": None,
                "problem": None, "attempts": result.attempts,
                "latency_ms": round((time.time() - started) * 1000, 2),
                "outcome": "delivered", "detail": None,
            }
            if result.error is not None:
                record.update(outcome=result.error, detail=result.detail)
            elif not 200 <= (result.status or 0) < 300:
                record.update(outcome="http-error",
                              detail=f"the answer's status was {result.status}")
            self._record(bot_id, record)
            pipe = self.store.r.pipeline(transaction=True)
            pipe.zrem(key, member)
            if event == "end":
                pipe.hdel(failed_key(self.p, bot_id), game_id)
            pipe.execute()
            done += 1
        return done


# --- the dispatcher ------------------------------------------------------------------------


class _TurnWaiter(Waiter):
    """A permanent waiter on one webhook bot's turn channel: each wake-up queues the bot."""

    def __init__(self, hub: Any, channel: str, bot_id: str, inbox: queue.Queue[str]) -> None:
        super().__init__(hub, channel)
        self.bot_id = bot_id
        self.inbox = inbox

    def _deliver(self, data: bytes | None) -> None:
        self.inbox.put(self.bot_id)


class Dispatcher(BackgroundLoop):
    """Per process: hears webhook bots' turns and calls them (see the module docstring).
    One loop thread (a greenlet under gevent) hears the wake-ups; one thread per bot at a
    time looks for its turns and claims them; each claimed turn is called in a thread of
    its own, at most ``CONCURRENCY`` at once."""

    thread_name = "allfours-callbacks"
    what = "callback dispatcher"
    log = logging.getLogger(__name__)

    def __init__(self, callbacks: Callbacks, scan_s: float = SCAN_S) -> None:
        super().__init__()
        self.cb = callbacks
        self.arena = callbacks.arena
        self.scan_s = scan_s
        self.inbox: queue.Queue[str] = queue.Queue()
        self._waiters: dict[str, _TurnWaiter] = {}
        self._busy: set[str] = set()
        self._again: set[str] = set()
        self._notifying: set[str] = set()
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(CONCURRENCY)
        callbacks.dispatcher = self  # type: ignore[attr-defined]

    def wake(self, bot_id: str) -> None:
        self.inbox.put(bot_id)

    def _listen(self, bots: set[str]) -> None:
        """Keep one turn-channel waiter per webhook bot (and the listener running)."""
        wakeups = self.arena.wakeups
        for bot in bots - set(self._waiters):
            w = _TurnWaiter(wakeups, self.arena.store.bot_turn_channel(bot), bot, self.inbox)
            w.__enter__()
            self._waiters[bot] = w
        for bot in set(self._waiters) - bots:
            self._waiters.pop(bot).__exit__()
        if self._waiters:
            wakeups.start()

    def scan_once(self) -> set[str]:
        """The repair pass: every webhook bot is looked at, and the verifications due are
        sent."""
        r = self.cb.store.r
        bots = {b.decode() for b in r.smembers(hooks_key(self.cb.p))}
        self._listen(bots)
        for bot in bots:
            self._start(bot)
        self.verify_due()
        return bots

    def verify_due(self) -> None:
        """Send each due verification in a thread of its own (a slot of ``CONCURRENCY``
        each; with none free it is left to the lease, and sent after it)."""
        for bot, vid in self.cb.claim_verifications():
            if not self._slots.acquire(blocking=False):
                break
            threading.Thread(target=self._verify, args=(bot, vid), daemon=True,
                             name="allfours-callback-verify").start()

    def _verify(self, bot: str, vid: str) -> None:
        try:
            self.cb.verify_once(bot, vid)
        except Exception:
            log.warning("verifying the callback of bot %s failed", bot, exc_info=True)
        finally:
            self._slots.release()

    def _start(self, bot: str) -> None:
        """Work on ``bot`` in a thread of its own unless one is at it already (then once
        more when that one is done)."""
        with self._lock:
            if bot in self._busy:
                self._again.add(bot)
                return
            self._busy.add(bot)
        threading.Thread(target=self._work, args=(bot,), daemon=True,
                         name="allfours-callback").start()

    def _work(self, bot: str) -> None:
        while True:
            try:
                self.process_bot(bot)
            except Exception:
                log.warning("callbacks for bot %s failed", bot, exc_info=True)
            with self._lock:
                if bot not in self._again:
                    self._busy.discard(bot)
                    return
                self._again.discard(bot)

    def process_bot(self, bot: str) -> None:
        """Claim every turn of ``bot`` that nobody has claimed and call each in a thread
        of its own (a bot in many games is called for all of them at once), then deliver
        its due notifications. When a call ends the bot is looked at again: a turn that
        stays the bot's after its own action (a trick it won) is called at once."""
        cb = self.cb
        cfg = cb.config(bot)
        if cfg is None:
            cb.store.r.srem(hooks_key(cb.p), bot)  # an id left without its config
            return
        store, r = self.arena.store, cb.store.r
        if not cfg["verified"]:
            # sent nothing but its verification: its turns fall to the deadline; its
            # notifications wait for the verification, and go with a URL that failed it
            if cfg["verification"] == "failed":
                r.delete(notify_key(cb.p, bot))
            return
        for game_id in store.bot_turns(bot):
            version = store.get_version(game_id)
            if version is None or r.exists(claim_key(cb.p, bot, game_id, version)):
                continue  # gone, or this turn is being (or was) called: no full read
            game = store.get_game(game_id)
            claim = cb.claim_turn(bot, game) if game is not None else None
            if claim is None:
                continue
            if not self._slots.acquire(blocking=False):  # full: free it for another pass
                cb.store.r.delete(claim.key)
                break
            threading.Thread(target=self._turn, args=(claim, cfg), daemon=True,
                             name="allfours-callback").start()
        if not r.exists(notify_key(cb.p, bot)):
            return  # no notification pending
        with self._lock:
            if bot in self._notifying:
                return
            self._notifying.add(bot)
        threading.Thread(target=self._notify, args=(bot, cfg), daemon=True,
                         name="allfours-callback-notes").start()

    def _notify(self, bot: str, cfg: dict[str, Any]) -> None:
        try:
            self.cb.notify_due(bot, cfg)
        except Exception:
            log.warning("notifications for bot %s failed", bot, exc_info=True)
        finally:
            with self._lock:
                self._notifying.discard(bot)

    def _turn(self, claim: Claim, cfg: dict[str, Any]) -> None:
        try:
            self.cb.run_claimed(claim, cfg)
        finally:
            self._slots.release()
            self.wake(claim.bot_id)

    def pass_once(self) -> None:
        """Scan every ``scan_s``; meanwhile wait for wake-ups and start on the bots woken."""
        if self.due(self.scan_s):
            self.scan_once()
        try:
            bot = self.inbox.get(timeout=self.until_due())
        except queue.Empty:
            return
        woken = {bot}
        while True:
            try:
                woken.add(self.inbox.get_nowait())
            except queue.Empty:
                break
        for b in woken:
            self._start(b)

    def wake_to_stop(self) -> None:
        self.inbox.put("")

    def stop(self, timeout: float = 5.0) -> None:
        super().stop(timeout)
        for w in list(self._waiters.values()):
            w.__exit__()
        self._waiters.clear()


def start_dispatcher(app: Any) -> Dispatcher | None:
    """Start delivering callbacks for a Flask app built by ``create_app`` (unless
    ``ARENA_CALLBACKS=0``)."""
    cb: Callbacks = app.extensions["callbacks"]
    if not cb.enabled or os.environ.get("ARENA_CALLBACKS", "1") == "0":
        return None
    dispatcher = Dispatcher(cb)
    app.extensions["callback_dispatcher"] = dispatcher
    return dispatcher.start()


__all__ = ["OUTCOMES", "Callbacks", "Dispatcher", "Guard", "is_public_address", "sign",
           "start_dispatcher", "verify"]

