"""Post-game analyses (issue 25): asked for once, computed once by a background worker in
any instance, stored with the game. A request waits first in its requester's list
(``service.arena.analyses.fair``: each requester served in turn, within its caps); a
worker moves the next one into the stream below when it is free.

Why a queue and a lock both. The queue is one Redis Stream with one consumer group
(``XADD`` to ask, ``XREADGROUP`` to take, ``XACK`` when done, ``XAUTOCLAIM`` to take over
an entry whose worker went quiet for longer than the lease): every instance's workers
read the same group, so any of them may compute any game, and an entry a killed worker
held is handed to another. A stream alone may still deliver one game twice (a second
``XADD`` by a request racing the first, an entry taken over from a worker that was only
slow), so the game's analysis hash is the lock: ``CLAIM`` gives the game to one worker
for ``lease_s`` (renewed every third of it by a heartbeat thread while it computes) and
``FINISH`` stores the result only for the worker that holds it. A worker that finds the
game done acknowledges the entry; one that finds it held by a live lease leaves the entry
pending (it comes round again after the lease, and is acknowledged once the game is done).

Keys (``p`` = the key prefix, ``T(x)`` a hash tag in cluster mode, docs/operations.md):

- ``{p}game:T(id):analysis`` hash, in the game's slot: ``status`` (queued, running, done,
  failed), ``done``/``total`` (progress), ``result`` (the analysis JSON, zlib-compressed:
  ``pack_result``; a record stored before that is plain JSON and still read), ``etag``,
  ``worker``/``lease`` (the lock), ``attempts`` (computations started: 1 unless a worker
  died), ``counted`` (added to the bots' averages). Its TTL is the game's own, copied
  by every script that writes it (they read the game's PTTL in the same slot), so it goes
  when the game goes, and a kept (tournament, ladder) game's analysis is kept too.
- ``{p}{analysis}:queue`` the stream (one key: the queue's traffic is one entry per
  analysed game, far below what one slot serves, and one key keeps one consumer group);
  an entry (``game``, and ``who``/``net``: its requester) is added when a worker takes
  the next game from the requesters' lists, deleted once acknowledged; capped
  (``MAXLEN ~``). The lists' keys: ``service.arena.analyses.fair``.
- ``{p}bot:{id}:analysis`` hash: a bot's sums over its analysed games (``games``,
  ``decisions``, ``loss``, the marks, and ``n:<kind>``/``loss:<kind>`` per decision
  kind), the bot's TTL copied when written (a bot kept for ever keeps it).

The analysis itself (``service.analysis.analyse``) is CPU-bound pure Python: it runs in
worker processes of its own (``service.arena.analyses.worker``), never in a gunicorn
worker, where it would hold the GIL from the requests.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import zlib
from collections.abc import Callable
from typing import Any

import redis

from service.arena.analyses.fair import AUTO, FairLine
from service.arena.analyses.scripts import ASK, CLAIM, FINISH, RENEW, UNASK, UNCLAIM
from service.arena.core.problems import Problem
from service.storage.store import Game, Store

log = logging.getLogger(__name__)

DEFAULTS: dict[str, Any] = {
    # analysis worker processes per instance (0: this instance computes none)
    "ARENA_ANALYSIS_WORKERS": 1,
    # seconds a worker holds a game without a heartbeat before another may take it over
    "ARENA_ANALYSIS_LEASE": 30.0,
    # the analyser's quality (``service.analysis``: samples per decision)
    "ARENA_ANALYSIS_QUALITY": "default",
    # "1": every finished ladder game is analysed
    "ARENA_LADDER_ANALYSE": "0",
    # CPU priority added to the workers (``os.nice``): play goes first
    "ARENA_ANALYSIS_NICE": 19,
    # analyses one client address may queue an hour for games it did not play (``POST
    # /games/{id}/analysis``; 0: no limit): a stranger reviews a handful, not every game
    "ARENA_ANALYSIS_ASKS": 20,
    # games waiting or being analysed at once per requester (a player's owner) and per
    # client network (service.arena.analyses.fair); 0: no cap
    "ARENA_ANALYSIS_QUEUED_PER_OWNER": 4,
    "ARENA_ANALYSIS_QUEUED_PER_NETWORK": 12,
    # bytes of analyses one client may download a minute (service.http.analyses); 0: no cap.
    # A long game's analysis is about 720 KB, a tenth of that gzipped: 8 MiB is a dozen
    # of the largest a minute uncompressed, a hundred gzipped
    "ARENA_ANALYSIS_DOWNLOAD_BYTES": 8 * 1024 * 1024,
}

GROUP = "workers"
STREAM_MAX = 100_000  # entries kept at most (``XADD MAXLEN ~``): a queue, not a log
QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
MARKS = ("inaccuracy", "mistake", "blunder")

# zlib's level for the stored analyses: repetitive JSON, a tenth of its size at 6; the
# higher levels save a few per cent more for several times the time
PACK_LEVEL = 6


def pack_result(text: str) -> bytes:
    """An analysis's JSON as it is stored: zlib-compressed (its keys and numbers repeat
    decision after decision, so it shrinks about tenfold; a game's analysis is kept as
    long as the game)."""
    return zlib.compress(text.encode(), PACK_LEVEL)


def unpack_result(raw: bytes) -> str:
    """The JSON of a stored analysis: zlib-compressed (``pack_result``), or plain JSON as
    stored before (a JSON object starts with ``{``, a zlib stream never does)."""
    if raw[:1] == b"{":
        return raw.decode()
    return zlib.decompress(raw).decode()


class Analyses:
    """The queue, the lock and the stored analyses, over one ``Store``."""

    def __init__(self, store: Store, lease_s: float = 30.0) -> None:
        self.store = store
        self.r = store.r
        self.lease_s = float(lease_s)
        # a hash tag on a single Redis too (as the ladders' keys): one name everywhere
        self.stream = f"{store.keys.p}{{analysis}}:queue"
        self._ask = self.r.register_script(ASK)
        self._claim = self.r.register_script(CLAIM)
        self._renew = self.r.register_script(RENEW)
        self._finish = self.r.register_script(FINISH)
        self._unask = self.r.register_script(UNASK)
        self._unclaim = self.r.register_script(UNCLAIM)
        self.line = FairLine(self.r, store.keys.p, self.stream, STREAM_MAX)
        self.per_owner = int(DEFAULTS["ARENA_ANALYSIS_QUEUED_PER_OWNER"])
        self.per_network = int(DEFAULTS["ARENA_ANALYSIS_QUEUED_PER_NETWORK"])
        # the requester and network of each entry taken, for ``settle``
        self._taken: dict[str, tuple[str, str]] = {}

    # --- keys ------------------------------------------------------------------------------

    def key(self, game_id: str) -> str:
        return self.store.keys.game(game_id) + ":analysis"

    def bot_key(self, bot_id: str) -> str:
        return f"{self.store.keys.p}bot:{bot_id}:analysis"

    # --- asking ----------------------------------------------------------------------------

    def state(self, game_id: str) -> dict[str, str] | None:
        """The stored analysis hash (decoded), or None if nobody has asked for it."""
        raw = self.r.hgetall(self.key(game_id))
        if not raw:
            return None
        return {k.decode(): unpack_result(v) if k == b"result" else v.decode()
                for k, v in raw.items()}

    def brief(self, game_id: str) -> dict[str, str] | None:
        """``state`` without the result (which may be hundreds of KB): what a request
        needs to tell whether it can answer from its cache."""
        fields_ = ("status", "etag", "done", "total", "error")
        raw = self.r.hmget(self.key(game_id), fields_)
        if raw[0] is None:
            return None
        return {k: v.decode() for k, v in zip(fields_, raw) if v is not None}

    def result(self, game_id: str) -> str | None:
        raw = self.r.hget(self.key(game_id), "result")
        return unpack_result(raw) if raw is not None else None

    def ask(self, game_id: str, who: str = "a:direct", network: str | None = None,
            lane: int = AUTO, capped: bool = False) -> bool:
        """Queue ``game_id`` for ``who`` (a requester, counted in ``network``: its own when
        None) unless it is queued, running or done already; True if it was queued. A
        request that finds its entry seemingly lost (asked, or last renewed, more than
        four leases ago: the process that asked died first, or every worker that held it
        is gone) queues it again: a spare entry is harmless (``CLAIM``). ``capped``: the
        requester's and the network's caps apply (``fair``): past them nothing is queued
        and a ``Problem`` 429 says why."""
        now = time.time()
        added = self._ask(keys=[self.key(game_id), self.store.game_key(game_id)],
                          args=[repr(now), 4 * self.lease_s])
        if int(added) != 1:
            return False
        code = self.line.enqueue(game_id, who, network or who, lane, now,
                                 self.per_owner if capped else 0,
                                 self.per_network if capped else 0)
        if code == 1:
            return True
        self._unask(keys=[self.key(game_id)])
        cap, whose = ((self.per_owner, "your owner") if code == -1
                      else (self.per_network, "your network"))
        raise Problem("rate-limited", f"{whose} has {cap} analyses waiting or being computed "
                      "(ARENA_ANALYSIS_QUEUED_PER_OWNER, ..._PER_NETWORK); ask again when "
                      "one is done", headers={"Retry-After": str(int(2 * self.lease_s))})

    def waiting(self) -> int:
        """Games asked for and not taken by a worker yet: in the requesters' lists, and
        entries in the stream (taken or not)."""
        return self.line.waiting() + int(self.r.xlen(self.stream))

    def ensure_group(self) -> None:
        try:
            self.r.xgroup_create(self.stream, GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    # --- the worker's side -----------------------------------------------------------------

    def next_entry(self, consumer: str, block_ms: int) -> tuple[str, str] | None:
        """(entry id, game id): first an entry idle past the lease (its worker died or was
        paused: ``XAUTOCLAIM``), else a new one: the next requester's game moved into the
        stream (``fair.PROMOTE``) and read (``XREADGROUP``); with none waiting, a wait of
        up to ``block_ms`` for a new request."""
        lease_ms = int(self.lease_s * 1000)
        got = self.r.xautoclaim(self.stream, GROUP, consumer, lease_ms, "0-0", count=1)
        entries = got[1] if got and len(got) > 1 else []
        entries = [e for e in entries if e and e[1]]  # an entry deleted meanwhile: no fields
        for attempt in range(2):
            if entries:
                break
            read = self.r.xreadgroup(GROUP, consumer, {self.stream: ">"}, count=1)
            entries = read[0][1] if read else []
            if entries or self.line.promote(time.time()) is not None:
                continue
            if attempt == 0 and block_ms > 0:
                self.line.nap(block_ms / 1000)
                if self.line.promote(time.time()) is None:
                    return None
        if not entries:
            return None
        entry_id, fields = entries[0]
        entry = _text(entry_id)

        def field(name: str) -> str:
            return _text(fields.get(name.encode(), fields.get(name, b"")))

        self._taken[entry] = (field("who"), field("net"))
        if len(self._taken) > 1000:  # entries settled by someone else: forget the oldest
            self._taken.pop(next(iter(self._taken)))
        return entry, field("game")

    def taken_by(self, entry_id: str) -> tuple[str, str]:
        """(requester, network) of an entry this process took ('' for none)."""
        return self._taken.get(entry_id, ("", ""))

    def give_up(self, game_id: str, worker: str, entry_id: str) -> bool:
        """``worker`` gives ``game_id`` up for a lighter request: queued again at the head
        of its requester's list (``fair.REQUEUE``), its entry settled without its counts.
        False if the worker no longer held it (then nothing changes)."""
        who, net = self._taken.get(entry_id, ("", ""))
        if not who or not int(self._unclaim(keys=[self.key(game_id)],
                                            args=[worker, repr(time.time())])):
            return False
        self._taken.pop(entry_id, None)
        self.line.requeue(entry_id, GROUP, game_id, who, net)
        return True

    def settle(self, entry_id: str) -> None:
        """The entry is dealt with: acknowledged and deleted (the stream stays small), and
        taken off its requester's and network's counts (``fair.SETTLE``)."""
        who, net = self._taken.pop(entry_id, ("", ""))
        if not who:
            fields = self.r.xrange(self.stream, entry_id, entry_id)
            if fields:
                raw = fields[0][1]
                who = _text(raw.get(b"who", raw.get("who", b"")))
                net = _text(raw.get(b"net", raw.get("net", b"")))
        self.line.settle(entry_id, GROUP, who, net)

    def forget_consumers(self, idle_s: float = 3600) -> int:
        """Drop the group's consumers that hold nothing and were last seen ``idle_s``
        ago: each worker process is a consumer of its own name, and the dead ones would
        pile up in the group for ever. One holding entries is kept: ``XAUTOCLAIM``
        moves them to a live worker first."""
        gone = 0
        for c in self.r.xinfo_consumers(self.stream, GROUP):
            if int(c.get("pending", 0)) == 0 and int(c.get("idle", 0)) > idle_s * 1000:
                self.r.xgroup_delconsumer(self.stream, GROUP, _text(c["name"]))
                gone += 1
        return gone

    def claim(self, game_id: str, worker: str) -> int:
        return int(self._claim(keys=[self.key(game_id), self.store.game_key(game_id)],
                               args=[worker, repr(time.time()), self.lease_s]))

    def renew(self, game_id: str, worker: str, done: int, total: int,
              entry_id: str | None = None, consumer: str | None = None) -> bool:
        """Extend the lease and store the progress; keep the stream entry ours (``XCLAIM``
        by its own consumer resets its idle time, so ``XAUTOCLAIM`` leaves it alone)."""
        ours = int(self._renew(keys=[self.key(game_id)],
                               args=[worker, repr(time.time()), self.lease_s, done, total]))
        if ours and entry_id and consumer:
            self.r.xclaim(self.stream, GROUP, consumer, 0, [entry_id], justid=True)
        return bool(ours)

    def finish(self, game_id: str, worker: str, result: dict[str, Any] | None,
               error: str = "") -> bool:
        """Store ``result`` (or the failure) if ``worker`` still holds the game."""
        if result is not None:
            text = json.dumps(result, separators=(",", ":"), sort_keys=False)
            etag = hashlib.sha256(text.encode()).hexdigest()[:16]
            args = [worker, DONE, pack_result(text), etag, repr(time.time())]
        else:
            args = [worker, FAILED, error[:500], "", repr(time.time())]
        return bool(int(self._finish(
            keys=[self.key(game_id), self.store.game_key(game_id)], args=args)))

    def count_for_bots(self, game: Game, result: dict[str, Any]) -> None:
        """Add the game's per-seat figures to its bots' sums, once (``counted`` is set
        first, so a worker killed between the two loses a game's figures rather than
        counting them twice). A bot in two seats (a 4-player entrant) counts both."""
        if not self.r.hsetnx(self.key(game.id), "counted", 1):
            return
        for bot_id in {b for b in game.seats if b}:
            incr: dict[str, float] = {}
            for seat, bot in enumerate(game.seats):
                figures = (result.get("seats") or {}).get(str(seat))
                if bot != bot_id or not figures:
                    continue
                n = int(figures.get("decisions") or 0)
                incr["decisions"] = incr.get("decisions", 0) + n
                incr["loss"] = incr.get("loss", 0) + float(figures.get("average_loss") or 0) * n
                for mark in MARKS:
                    incr[mark] = incr.get(mark, 0) + int(figures.get(mark) or 0)
                for kind, k in (figures.get("by_kind") or {}).items():
                    kn = int(k.get("decisions") or 0)
                    incr[f"n:{kind}"] = incr.get(f"n:{kind}", 0) + kn
                    incr[f"loss:{kind}"] = (incr.get(f"loss:{kind}", 0)
                                            + float(k.get("average_loss") or 0) * kn)
            if not incr:
                continue
            key = self.bot_key(bot_id)
            ttl = self.r.pttl(self.store.keys.bot(bot_id))
            pipe = self.r.pipeline(transaction=False)
            pipe.hincrby(key, "games", 1)
            for field, value in incr.items():
                pipe.hincrbyfloat(key, field, value)
            if ttl and ttl > 0:
                pipe.pexpire(key, ttl)
            pipe.execute()

    def bot_averages(self, bot_id: str) -> dict[str, Any]:
        """A bot's average loss per decision over its analysed games, by decision kind."""
        raw = {_text(k): float(v) for k, v in self.r.hgetall(self.bot_key(bot_id)).items()}
        decisions = int(raw.get("decisions", 0))
        kinds = {}
        for field, n in raw.items():
            if field.startswith("n:") and n:
                kind = field[2:]
                kinds[kind] = {"decisions": int(n),
                               "average_loss": round(raw.get(f"loss:{kind}", 0) / n, 4)}
        return {
            "games": int(raw.get("games", 0)),
            "decisions": decisions,
            "average_loss": round(raw.get("loss", 0) / decisions, 4) if decisions else None,
            **{mark: int(raw.get(mark, 0)) for mark in MARKS},
            "by_kind": dict(sorted(kinds.items())),
        }


def auto_analyse(analyses: Analyses, ladder: bool,
                 owners_of: Callable[[list[str]], dict[str, str]] | None = None
                 ) -> Callable[[Game], None]:
    """The after-finish hook (``Arena.on_finish``, tournament and ladder games): queue
    the game if its tournament was created with ``analyse`` (copied into each game's meta)
    or, with ``ARENA_LADDER_ANALYSE=1``, if it is a ladder's. The tournament or the ladder
    is the requester (behind every player's own request); a game whose every seat is one
    owner's (``owners_of``) is that owner's, on its cap, and skipped past it."""
    def hook(game: Game) -> None:
        tour = game.meta.get("tournament") or {}
        if not (tour.get("analyse") or (ladder and game.meta.get("ladder"))):
            return
        who = (f"a:t:{tour.get('id')}" if tour.get("analyse")
               else f"a:l:{(game.meta.get('ladder') or {}).get('name')}")
        capped = False
        if owners_of is not None:
            owners = set(owners_of([b for b in game.seats if b]).values())
            if len(owners) == 1:
                who, capped = f"o:{owners.pop()}", True
        try:
            analyses.ask(game.id, who, who, AUTO, capped=capped)
        except Problem:
            log.info("analysis of %s not queued: %s is at its cap", game.id, who)
    return hook


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
