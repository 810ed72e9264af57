"""One call to a bot's callback URL, made safely: the signature, the address guard (no
request reaches an address the operator has not allowed), and one POST within a time
budget. ``service.arena.webhooks.callbacks`` decides what to send and when; this sends it.

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
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import socket
import time
from collections.abc import Iterable
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

MAX_URL = 2000


SIGNATURE_HEADER = "Arena-Signature"


TIMESTAMP_HEADER = "Arena-Timestamp"


DELIVERY_HEADER = "Arena-Delivery"


EVENT_HEADER = "Arena-Event"


USER_AGENT = "allfours-arena-webhooks/1"


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
