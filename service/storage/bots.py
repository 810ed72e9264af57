"""Bots and their tokens in the store: registering, reading, the token's lookup (cached per
process), the guessing counters, and a bot's games where it is to act. A part of ``Store``
(``service.storage.store``), which inherits it.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from typing import Any

import redis

from service.addresses import network_of
from service.storage.upkeep import _pairs

TOKEN_CACHE_MAX = 10_000
# Cluster mode: a game id in a bot's set of live games whose game is missing leaves the set
# only when it was already missing this long ago. The set is written before the game
# (``Store.add_game``: indexes first), so a reader between the two steps finds the game
# missing; taking it out then left a new game out of its bots' sets until the sweeper's
# reconcile put it back, and a webhook bot went uncalled meanwhile. An expired game stays
# missing, and goes at a later read.
MISSING_GRACE_S = 60.0
# How long a process takes a token it has looked up without asking Redis again: the
# grace in which a rotated or revoked token still works on the other processes.
TOKEN_CACHE_S = 5.0


# Every bot token starts with this: a bare ``token_urlsafe`` begins with "-" once in 64,
# and a command line then reads ``--token -x...`` as an unknown option (argparse, getopt);
# a fixed prefix also lets secret scanners recognise a leaked token.
TOKEN_PREFIX = "af_"


def new_token() -> str:
    """A new bot token: 256 random bits after ``TOKEN_PREFIX``."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    """Tokens are stored only as this hash: a leaked database holds no usable token."""
    return hashlib.sha256(token.encode()).hexdigest()


class BotRecords:
    """Bots and tokens: a part of ``Store`` (which inherits it); see the module docstring."""

    # cluster mode: game id -> when this process first found it missing (``bot_turns``)
    _missing_since: dict[str, float]

    # --- bots ----------------------------------------------------------------------------

    def create_bot(self, name: str, person: bool = False, permanent: bool = False
                   ) -> tuple[dict[str, Any], str]:
        """A new bot and its token; the token is returned here once and never stored.
        ``person``: the account is a person's (``is_person``). In a cluster the bot is
        written before its token (two slots): a crash between leaves an account nobody
        can use, never a token without its bot.

        Both keys expire (``Retention.bot_unused_s``, a person's ``person_s``) unless the
        bot plays (``bots_played``) or is ``permanent`` (the house's accounts). The bot
        keeps its token's hash (``token``) so that its token key can be kept with it."""
        bot_id = secrets.token_hex(6)
        token = new_token()
        digest = token_hash(token)
        created = int(time.time())
        fields_: dict[str, Any] = {"name": name, "created": created, "token": digest}
        if person:
            fields_["person"] = 1
        ttl = 0 if permanent else (self.retention.person_s if person
                                   else self.retention.bot_unused_s)
        bot_key, token_key = self.keys.bot(bot_id), self.keys.token(digest)
        pipe = self.r.pipeline(transaction=not self.cluster)
        pipe.hset(bot_key, mapping=fields_)
        if ttl:
            pipe.expire(bot_key, ttl)
        if self.cluster:
            pipe.execute()
            pipe = self.r.pipeline(transaction=False)
        pipe.set(token_key, bot_id, ex=ttl or None)
        pipe.execute()
        return {"id": bot_id, "name": name, "created": created}, token

    def bots_played(self, bot_ids: list[str | None]) -> None:
        """``bot_ids`` have been seated in a game that started (or entered a tournament or
        a ladder): a program's account, its token and its owner's record are kept from
        now on (PERSIST: its games and ratings name it); a person's account is given
        ``person_s`` again from now. Two round trips, once per bot and process (a person's:
        at every game)."""
        ids = sorted({b for b in bot_ids if b} - self._kept)
        if not ids:
            return
        pipe = self.r.pipeline(transaction=False)
        for b in ids:
            pipe.hmget(self.keys.bot(b), "token", "owner", "person", "name")
        rows = pipe.execute()
        pipe = self.r.pipeline(transaction=False)
        kept = []
        for b, (digest, owner, person, name) in zip(ids, rows):
            if name is None:
                continue  # gone (or never was): nothing to keep
            keys = [self.keys.bot(b)]
            if digest:
                keys.append(self.keys.token(digest.decode()))
            if person:  # with its sets of games (a set of a live game's turn, too)
                keys += [self.keys.bot_turns(b), self.keys.bot_games(b)]
                if self.retention.person_s:
                    for k in keys:
                        pipe.expire(k, self.retention.person_s)
                continue
            keys.append(self.keys.owner(owner.decode() if owner else b))
            for k in keys:
                pipe.persist(k)
            kept.append(b)
        pipe.execute()
        if len(self._kept) >= TOKEN_CACHE_MAX:
            self._kept.clear()
        self._kept.update(kept)

    def persons(self, bot_ids: list[str | None]) -> set[str]:
        """Which of ``bot_ids`` are persons' accounts (one round trip)."""
        ids = sorted({b for b in bot_ids if b})
        if not ids:
            return set()
        pipe = self.r.pipeline(transaction=False)
        for b in ids:
            pipe.hexists(self.keys.bot(b), "person")
        return {b for b, p in zip(ids, pipe.execute()) if p}

    def get_bot(self, bot_id: str) -> dict[str, Any] | None:
        raw = self.r.hgetall(self.keys.bot(bot_id))
        if not raw:
            return None
        return {"id": bot_id, "name": raw[b"name"].decode(), "created": int(raw[b"created"])}

    def is_person(self, bot_id: str) -> bool:
        """Whether the account was registered for a person (``POST /bots`` with
        ``person``), not a program."""
        return bool(self.r.hexists(self.keys.bot(bot_id), "person"))

    def bot_names(self, bot_ids: list[str]) -> dict[str, str]:
        ids = sorted({b for b in bot_ids if b})
        if not ids:
            return {}
        pipe = self.r.pipeline(transaction=False)
        for b in ids:
            pipe.hget(self.keys.bot(b), "name")
        return {b: (n.decode() if n else "") for b, n in zip(ids, pipe.execute())}

    def _cached_token(self, token: str) -> str | None:
        hit = self._tokens.get(token)
        if hit is None or hit[1] < time.monotonic():
            return None
        return hit[0]

    def _cache_token(self, token: str, bot_id: str) -> str:
        if len(self._tokens) >= TOKEN_CACHE_MAX:
            self._tokens.clear()
        self._tokens[token] = (bot_id, time.monotonic() + TOKEN_CACHE_S)
        return bot_id

    def known_bot(self, token: str) -> str | None:
        """The bot behind ``token`` if this process has seen it already (no Redis call),
        else None: a token's bot never changes, so the counters a failed lookup would
        need are not worked out for a token already known."""
        return self._cached_token(token)

    def bot_for_token(self, token: str) -> str | None:
        bot_id = self._cached_token(token)
        if bot_id is not None:
            return bot_id
        raw = self.r.get(self.keys.token(token_hash(token)))
        if not raw:
            return None
        return self._cache_token(token, raw.decode())

    def rotate_token(self, bot_id: str, revoke: bool = False) -> str | None:
        """A new token for ``bot_id`` (returned once, stored only as its hash), the old
        one refused from now on: at once here and in Redis, within ``TOKEN_CACHE_S`` on
        other processes. ``revoke``: no new token (None); the bot has none until it is
        given one. Atomic (WATCH on the bot): two rotations at once leave one token."""
        bot_key = self.keys.bot(bot_id)
        token = None if revoke else new_token()
        if self.cluster:  # two slots: the new token first, then the bot, then the old
            old, ttl = self.r.hget(bot_key, "token"), self.r.ttl(bot_key)
            if token is not None:
                self.r.set(self.keys.token(token_hash(token)), bot_id,
                           ex=ttl if ttl and ttl > 0 else None)
            self.r.hset(bot_key, "token", token_hash(token) if token else "")
            if old:
                self.r.delete(self.keys.token(old.decode()))
            self._tokens.clear()
            return token
        with self.r.pipeline(transaction=True) as pipe:
            while True:
                try:
                    pipe.watch(bot_key)
                    old, ttl = pipe.hget(bot_key, "token"), pipe.ttl(bot_key)
                    pipe.multi()
                    if old:
                        pipe.delete(self.keys.token(old.decode()))
                    if token is None:
                        pipe.hset(bot_key, "token", "")
                    else:
                        digest = token_hash(token)
                        pipe.hset(bot_key, "token", digest)
                        pipe.set(self.keys.token(digest), bot_id,
                                 ex=ttl if ttl and ttl > 0 else None)
                    pipe.execute()
                    break
                except redis.WatchError:
                    continue
        for t in [t for t, (b, _) in self._tokens.items() if b == bot_id]:
            self._tokens.pop(t, None)
        return token

    def guarded_bot_for_token(self, token: str, counters: list[str], window_s: int
                              ) -> tuple[str | None, list[tuple[int, int]]]:
        """``bot_for_token``, counting a failure against each of ``counters`` (a client
        address's and its network's; none: nothing counted): (bot id, []) for a known
        token, else (None, [(failures, ms left), ...] as incremented by this failure).
        The token is always looked up first, so a valid one never waits on anyone's
        count. One round trip (``AUTH``) on a single Redis, none for a cached token; in a
        cluster the token and each counter are slots of their own (one call each)."""
        bot_id = self._cached_token(token)
        if bot_id is not None:
            return bot_id, []
        token_key = self.keys.token(token_hash(token))
        keys = [self.failure_key(c, window_s) for c in counters]
        if self.cluster:  # the token is a slot of its own; the counters share one
            raw = self.r.get(token_key)
            out: list[Any] = [1, raw] if raw else [0, *self._count_together(keys, window_s)]
        else:
            out = self._auth(keys=[token_key, *keys], args=[window_s])
        if int(out[0]) != 1:
            return None, _pairs(out[1:])
        return self._cache_token(token, out[1].decode()), []

    def failure_key(self, who: str, window_s: int) -> str:
        """A failure counter: named by its window's length, not by a window number, and
        expiring ``window_s`` after its first failure (a sliding start, so no boundary
        hands a guesser a fresh count mid-run)."""
        if self.cluster:
            # an address's counter and its network's share a hash tag (the network), so
            # one script counts both at once in a cluster too: incremented one at a time,
            # two racing attempts could each pass one limit and fail the other, and fewer
            # than the limit be compared where exactly N must be
            kind, _, subject = who.partition(":")
            net = subject if kind.endswith("net") else network_of(subject)
            return self.keys.rate(f"{self.keys.tag(net)}:{who}", window_s)
        return self.keys.rate(who, window_s)

    def _count_together(self, keys: list[str], window_s: int) -> list[Any]:
        """``COUNT`` on counters of one client (one slot: ``failure_key``)."""
        return list(self._count(keys=keys, args=[window_s])) if keys else []

    def count_failures(self, counters: list[str], window_s: int) -> list[tuple[int, int]]:
        """Count one failure (or one attempt about to be compared) against each counter,
        atomically: [(count including this one, ms left), ...] (``COUNT``)."""
        keys = [self.failure_key(c, window_s) for c in counters]
        if not keys:
            return []
        return _pairs(self._count_together(keys, window_s))

    def uncount_failures(self, counters: list[str], window_s: int) -> None:
        """Give back what ``count_failures`` counted for an attempt that was right."""
        keys = [self.failure_key(c, window_s) for c in counters]
        if keys:  # one slot in a cluster too (``failure_key``)
            self._uncount(keys=keys)

    def bot_turns(self, bot_id: str, live: list[str] | None = None) -> list[str]:
        """Games where it is ``bot_id``'s turn. In a cluster: the bot's live games whose
        ``turn`` is the bot (read-repair: finished or missing games leave its set), and
        ``live`` (if given) gets the ids of those live games."""
        if not self.cluster:  # without games that expired in the bot's turn (``TURNS``)
            head, _, tail = self.game_key("\0").partition("\0")
            return sorted(m.decode() for m in self._turns(keys=[self.keys.bot_turns(bot_id)],
                                                           args=[head, tail]))
        key = self.keys.bot_games(bot_id)
        ids = sorted(m.decode() for m in self.r.smembers(key))
        if live is not None:
            live.extend(ids)
        if not ids:
            return []
        pipe = self.r.pipeline(transaction=False)
        for gid in ids:
            pipe.hmget(self.keys.game(gid), "turn", "status")
        out, gone = [], []
        now = time.monotonic()
        missing = self._missing_since
        if len(missing) > 100_000:  # bounded: at worst an expired id waits a grace more
            missing.clear()
        for gid, (turn, status) in zip(ids, pipe.execute()):
            if status is None:  # not yet created (see MISSING_GRACE_S), or expired
                if now - missing.setdefault(gid, now) >= MISSING_GRACE_S:
                    gone.append(gid)
                    missing.pop(gid, None)
            elif status == b"finished":
                gone.append(gid)
            elif turn is not None and turn.decode() == bot_id:
                out.append(gid)
        if gone:
            self.r.srem(key, *gone)
        return out
