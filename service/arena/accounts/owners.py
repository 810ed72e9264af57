"""Owners: who a bot account belongs to, how a deployment admits new owners, and the
operator's suspension of a cheat.

**Owners.** Every bot belongs to an owner: the bot hash ``{p}bot:{id}`` has the field
``owner`` (an owner id). A bot without the field (registered before owners existed) is its
own owner: ``owner = bot id`` (``owner_of``). ``POST /bots`` with ``Authorization: Bearer
<token of any bot of yours>`` adds the new bot to that bot's owner; without a token it
makes a new owner. A bot author already holds a token, so "register a second bot under
my owner" needs nothing new to keep (no second kind of secret that could leak or be
lost); the owner id is shown in the bot's own representation.

Owner record ``{p}owner:{id}`` (hash): ``created`` (unix seconds), ``network`` (the
client network it was made from: IPv4 /24, IPv6 /64), one field ``bot:{bot id}`` per bot
(its registration time) and, while suspended, ``suspended`` (the reason). A new owner
record expires like its first bot (``ARENA_BOT_UNUSED_TTL``): an owner whose bots never
played is forgotten with them; the retention code makes the record permanent when a bot
of the owner first plays. The house bots share the owner ``house``.

**Admission** (``ARENA_OWNER_ADMISSION``): ``open`` (default: anyone may register a bot, as
before), ``invite`` (a new owner needs an invitation code made by the admin, ``POST
/owner-invitations``: single use, expiring), ``closed`` (no new owners; existing owners
still register bots). New owners are counted per client network
(``service.addresses.network_of``) in a fixed window: ``ARENA_OWNERS_PER_NETWORK`` per
``ARENA_OWNER_WINDOW`` seconds (INCR on
``{p}owners-made:{network}:{window}``, expiring with the window) — one address cannot
mint the free accounts a rating farm needs, and a /24 or /64 is what one person
usually controls.

**Suspension.** The admin suspends a bot or an owner with a reason: the bot hash (every
bot of the owner, for an owner) gets ``suspended`` = the reason, the id joins
``{p}suspended`` (a set every process reads at most once a ``SUSPENSION_CACHE_S``, so a
suspension bites everywhere within that time without a Redis read per request), and the
act is logged (a structured line) and kept in ``{p}suspensions`` (a list, newest first,
capped at ``SUSPENSION_LOG_MAX``). Withdrawing the bot from tournaments and ladders is
``Arena``'s part (``service.arena.games.commands``), which knows them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import threading
import time
from typing import Any

from redis.exceptions import RedisError

from service.arena.core.problems import Problem
from service.storage.store import Retention, Store

log = logging.getLogger(__name__)

HOUSE_OWNER = "house"
ADMISSION_MODES = ("open", "invite", "closed")
SUSPENSION_CACHE_S = 1.0
# after a refresh that Redis did not answer, the next is tried only this much later: a
# frozen Redis then costs a request one command timeout here at most every 10 s per
# process, not one on every request (each of which would then wait out two: this and
# its own command, which answers 503)
SUSPENSION_RETRY_S = 10.0
SUSPENSION_LOG_MAX = 1000

DEFAULTS: dict[str, Any] = {
    # open: anyone may register; invite: a new owner needs an admin's invitation code;
    # closed: no new owners
    "ARENA_OWNER_ADMISSION": "open",
    # new owners per client network (IPv4 /24, IPv6 /64) per window; 0: no limit. 20 an
    # hour: a lab or a family behind one address registers a handful, a farm needs many
    "ARENA_OWNERS_PER_NETWORK": 20,
    "ARENA_OWNER_WINDOW": 3600,  # seconds
    # seconds an owner invitation code (admission "invite") stays usable: a week, time
    # enough to pass it on by mail
    "ARENA_OWNER_INVITATION_TTL": 604800,
}
# A new owner's record lives as its first bot does unless a bot of it plays:
# ``ARENA_BOT_UNUSED_TTL``, whose one default is the storage's (``Retention``)


def _code_hash(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


class Owners:
    """Owner records, admission and suspension over one ``Store``."""

    def __init__(self, store: Store, config: dict[str, Any] | None = None) -> None:
        cfg = {**DEFAULTS, **(config or {})}
        self.store = store
        self.r = store.r
        self.p = store.p
        mode = str(cfg["ARENA_OWNER_ADMISSION"]).strip().lower()
        if mode not in ADMISSION_MODES:
            raise ValueError(f"ARENA_OWNER_ADMISSION must be one of {ADMISSION_MODES}, "
                             f"not {mode!r}")
        self.admission = mode
        self.per_network = int(cfg["ARENA_OWNERS_PER_NETWORK"])
        self.window_s = max(1, int(cfg["ARENA_OWNER_WINDOW"]))
        self.invitation_ttl = int(cfg["ARENA_OWNER_INVITATION_TTL"])
        self.unused_ttl = int(cfg.get("ARENA_BOT_UNUSED_TTL", Retention().bot_unused_s))
        self._suspended: frozenset[str] = frozenset()
        self._suspended_at = -1e9
        self._lock = threading.Lock()

    # --- keys ----------------------------------------------------------------------------

    def key(self, owner_id: str) -> str:
        return f"{self.p}owner:{owner_id}"

    def bot_key(self, bot_id: str) -> str:
        return f"{self.p}bot:{bot_id}"

    @property
    def suspended_key(self) -> str:
        return f"{self.p}suspended"

    @property
    def log_key(self) -> str:
        return f"{self.p}suspensions"

    # --- owners --------------------------------------------------------------------------

    def owner_of(self, bot_id: str) -> str:
        raw = self.r.hget(self.bot_key(bot_id), "owner")
        return raw.decode() if raw else bot_id

    def owners_of(self, bot_ids: list[str]) -> dict[str, str]:
        ids = sorted({b for b in bot_ids if b})
        if not ids:
            return {}
        pipe = self.r.pipeline(transaction=False)
        for b in ids:
            pipe.hget(self.bot_key(b), "owner")
        return {b: (o.decode() if o else b) for b, o in zip(ids, pipe.execute())}

    def created_of(self, owner_ids: list[str]) -> dict[str, float | None]:
        """When each owner was made (unix seconds), for the ratings' ``Standing``: its
        record's ``created``; for an owner without one (a bot registered before owners
        existed is its own owner) its bot's; the house's as old as can be. None when
        neither is known (a forgotten record)."""
        ids = sorted({o for o in owner_ids if o and o != HOUSE_OWNER})
        out: dict[str, float | None] = {HOUSE_OWNER: 0.0} if HOUSE_OWNER in owner_ids else {}
        if not ids:
            return out
        pipe = self.r.pipeline(transaction=False)
        for o in ids:
            pipe.hget(self.key(o), "created")
            pipe.hget(self.bot_key(o), "created")
        rows = pipe.execute()
        for i, o in enumerate(ids):
            raw = rows[2 * i] or rows[2 * i + 1]
            out[o] = float(raw) if raw else None
        return out

    def admit(self, network: str, invitation: str | None = None) -> str:
        """A new owner made from ``network``, if the admission mode and the network's
        count allow it (403 ``owner-admission``, 429 ``rate-limited``); its id."""
        if self.admission == "closed":
            raise Problem("owner-admission", "this service admits no new owners: register "
                          "further bots with the token of one of your bots")
        code_key = None
        if self.admission == "invite":
            if not invitation:
                raise Problem("owner-admission", "a new owner needs an invitation code "
                              "(`invitation`) from the operator; register further bots with "
                              "the token of one of your bots")
            code_key = f"{self.p}owner-invitation:{_code_hash(invitation)}"
            if not self.r.exists(code_key):
                raise Problem("owner-admission", "unknown, used or expired invitation code")
        if self.per_network:
            slot = int(time.time()) // self.window_s
            counter = f"{self.p}owners-made:{network}:{slot}"
            pipe = self.r.pipeline(transaction=True)
            pipe.incr(counter)
            pipe.expire(counter, self.window_s + 1, nx=True)
            pipe.pttl(counter)
            n, _, ttl = pipe.execute()
            if int(n) > self.per_network:
                raise Problem(
                    "rate-limited",
                    f"at most {self.per_network} new owners per network per "
                    f"{self.window_s} s; register further bots with the token of one of "
                    "your bots", headers={"Retry-After": str(max(1, -(-int(ttl) // 1000)))})
        if code_key is not None and not self.r.delete(code_key):  # single use, atomic
            raise Problem("owner-admission", "unknown, used or expired invitation code")
        owner_id = "o" + secrets.token_hex(6)
        pipe = self.r.pipeline(transaction=True)
        pipe.hset(self.key(owner_id), mapping={"created": int(time.time()),
                                               "network": network})
        if self.unused_ttl > 0:
            pipe.expire(self.key(owner_id), self.unused_ttl)
        pipe.execute()
        return owner_id

    def add_bot(self, owner_id: str, bot_id: str) -> None:
        """``bot_id`` belongs to ``owner_id`` from now on."""
        pipe = self.r.pipeline(transaction=not self.store.cluster)
        pipe.hset(self.bot_key(bot_id), "owner", owner_id)
        pipe.hset(self.key(owner_id), f"bot:{bot_id}", int(time.time()))
        if self.unused_ttl > 0 and owner_id != HOUSE_OWNER:
            # a new bot of an owner whose record still expires keeps it as long as the bot
            # (GT: a permanent record stays permanent)
            pipe.expire(self.key(owner_id), self.unused_ttl, gt=True)
        pipe.execute()

    def bots(self, owner_id: str) -> list[str]:
        fields_ = self.r.hkeys(self.key(owner_id))
        return sorted(f.decode()[4:] for f in fields_ if f.startswith(b"bot:"))

    def record(self, owner_id: str) -> dict[str, Any] | None:
        raw = self.r.hgetall(self.key(owner_id))
        if not raw:
            return None
        return {"id": owner_id, "created": int(raw.get(b"created", 0)),
                "bots": sorted(k.decode()[4:] for k in raw if k.startswith(b"bot:")),
                "suspended": raw[b"suspended"].decode() if b"suspended" in raw else None}

    def invite_owner(self) -> dict[str, Any]:
        """An owner invitation code (admission ``invite``): single use, expiring."""
        code = secrets.token_urlsafe(18)
        self.r.set(f"{self.p}owner-invitation:{_code_hash(code)}", int(time.time()),
                   ex=self.invitation_ttl)
        return {"code": code, "expires": int(time.time()) + self.invitation_ttl}

    # --- suspension ----------------------------------------------------------------------

    def is_suspended(self, bot_id: str) -> bool:
        """Whether ``bot_id`` is suspended, as this process knew within the last
        ``SUSPENSION_CACHE_S``."""
        now = time.monotonic()
        if now - self._suspended_at >= SUSPENSION_CACHE_S:
            with self._lock:
                if now - self._suspended_at >= SUSPENSION_CACHE_S:
                    try:
                        members = self.r.smembers(self.suspended_key)
                    except RedisError:
                        # keep what was known until the next interval: the request's own
                        # Redis call answers 503 if Redis is really gone, and no request
                        # waits out a timeout here first
                        log.warning("could not refresh the suspended bots; keeping the "
                                    "last known set")
                        self._suspended_at = now + SUSPENSION_RETRY_S
                    else:
                        self._suspended = frozenset(m.decode() for m in members)
                        self._suspended_at = now
        return bot_id in self._suspended

    def suspended_now(self) -> frozenset[str]:
        """Every suspended bot, as this process knew within the last
        ``SUSPENSION_CACHE_S`` (``is_suspended``'s set)."""
        self.is_suspended("")
        return self._suspended

    def suspension(self, bot_id: str) -> str | None:
        raw = self.r.hget(self.bot_key(bot_id), "suspended")
        return raw.decode() if raw is not None else None

    def suspend_bots(self, bot_ids: list[str], reason: str, what: dict[str, Any]) -> None:
        """Mark ``bot_ids`` suspended for ``reason`` and log the act (``what``: the
        subject, e.g. ``{"bot": id}``)."""
        pipe = self.r.pipeline(transaction=not self.store.cluster)
        for b in bot_ids:
            pipe.hset(self.bot_key(b), "suspended", reason)
        if bot_ids:
            pipe.sadd(self.suspended_key, *bot_ids)
        pipe.execute()
        self._suspended_at = -1e9
        self._log("suspended", reason, what, bot_ids)

    def lift_bots(self, bot_ids: list[str], what: dict[str, Any]) -> None:
        pipe = self.r.pipeline(transaction=not self.store.cluster)
        for b in bot_ids:
            pipe.hdel(self.bot_key(b), "suspended")
        if bot_ids:
            pipe.srem(self.suspended_key, *bot_ids)
        pipe.execute()
        self._suspended_at = -1e9
        self._log("lifted", None, what, bot_ids)

    def mark_owner(self, owner_id: str, reason: str | None) -> None:
        if reason is None:
            self.r.hdel(self.key(owner_id), "suspended")
        else:
            self.r.hset(self.key(owner_id), "suspended", reason)

    def owner_suspension(self, owner_id: str) -> str | None:
        raw = self.r.hget(self.key(owner_id), "suspended")
        return raw.decode() if raw is not None else None

    def _log(self, act: str, reason: str | None, what: dict[str, Any],
             bot_ids: list[str]) -> None:
        entry = {"at": round(time.time(), 3), "act": act, "reason": reason, **what,
                 "bots": sorted(bot_ids)}
        pipe = self.r.pipeline(transaction=False)
        pipe.lpush(self.log_key, json.dumps(entry))
        pipe.ltrim(self.log_key, 0, SUSPENSION_LOG_MAX - 1)
        pipe.execute()
        log.warning("suspension %s", act, extra={"fields": {"event": f"suspension-{act}",
                                                           **entry}})

    def suspensions(self, limit: int = 100) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.r.lrange(self.log_key, 0, limit - 1)]


__all__ = ["ADMISSION_MODES", "DEFAULTS", "HOUSE_OWNER", "Owners"]
