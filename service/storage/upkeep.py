"""The store's upkeep: how long a game is kept and the pass that forgets expired ones, the
cluster layout's index repair, creation quotas, move deadlines and rate-limit counters.
A part of ``Store`` (``service.storage.store``), which inherits it.
"""

from __future__ import annotations

import time
from typing import Any

from service import jsonio
from service.storage.commits import _score
from service.storage.keys import STATUS_ORDER


def _pairs(flat: list[Any]) -> list[tuple[int, int]]:
    """``[n1, ttl1, n2, ttl2, ...]`` → ``[(n1, ttl1), ...]`` (a ttl of at least 1 ms)."""
    return [(int(flat[i]), max(1, int(flat[i + 1]))) for i in range(0, len(flat) - 1, 2)]


class Upkeep:
    """Retention, repair, quotas, deadlines and rate limits: a part of ``Store`` (which
    inherits it); see the module docstring."""

    def reconcile(self, game_ids: list[str] | None = None) -> int:
        """Cluster mode: make every index agree with the per-game truth for ``game_ids``
        (default: every game in the waiting and active indexes, which hold every live
        game: they are supersets). Only what can never become true again is removed (a
        game's older statuses, its older versions' deadlines, a finished game from its
        bots' sets), so it is safe while other processes commit. Returns the number of
        games looked at. A no-op on the single-Redis layout (its indexes are exact)."""
        if not self.cluster:
            return 0
        if game_ids is None:
            found: set[str] = set()
            for status in ("waiting", "active"):
                found.update(m.decode() for m in self.r.zrange(self.keys.index(status), 0, -1))
            game_ids = sorted(found)
        pipe = self.r.pipeline(transaction=False)
        for gid in game_ids:
            pipe.hmget(self.game_key(gid), "status", "seq", "version", "deadline", "meta")
        rows = pipe.execute()
        entries = [m.decode() for m in self.r.zrange(self.keys.deadlines, 0, -1)]
        by_game: dict[str, list[tuple[str, int]]] = {}
        for m in entries:
            gid, _, version = m.partition(":")
            by_game.setdefault(gid, []).append((m, int(version)))
        fix = self.r.pipeline(transaction=False)
        for gid, (status, seq, version, deadline, meta) in zip(game_ids, rows):
            if status is None:
                continue
            st, v = status.decode(), int(version)
            fix.zadd(self.keys.index("all"), {gid: int(seq)}, nx=True)
            fix.zadd(self.keys.index(st), {gid: int(seq)}, nx=True)
            for other, order in STATUS_ORDER.items():
                if order < STATUS_ORDER.get(st, 0):
                    fix.zrem(self.keys.index(other), gid)
            for m, ver in by_game.get(gid, []):
                if ver < v or st == "finished":
                    fix.zrem(self.keys.deadlines, m)
            if st == "active" and deadline is not None:
                fix.zadd(self.keys.deadlines, {f"{gid}:{v}": float(deadline)}, nx=True)
            for bot in {b for b in jsonio.loads(meta).get("seats", []) if b}:
                if st == "finished":
                    fix.srem(self.keys.bot_games(bot), gid)
                else:
                    fix.sadd(self.keys.bot_games(bot), gid)
        fix.execute()
        return len(game_ids)

    # --- retention -----------------------------------------------------------------------

    def game_ttl(self, meta: dict[str, Any], status: str) -> int:
        """Seconds a game with ``meta`` in ``status`` is kept from now (0: for ever). A
        tournament's or a ladder's game is kept for ever: standings and ratings rest on
        it. A casual game: ``Retention`` by status (``person`` in its meta: a person's
        account sat in it; ``cancelled``: an invitation was declined or expired before it
        started). Set by the script that creates or commits the game."""
        if meta.get("tournament") or meta.get("ladder"):
            return 0
        r = self.retention
        if status == "finished":
            if meta.get("cancelled"):  # never played: the short retention
                return r.cancelled_s
            return r.person_game_s if meta.get("person") else r.game_s
        return r.waiting_s if status == "waiting" else r.idle_s

    def forget_expired(self, after: int = 0, batch: int = 1000,
                       suspects: set[str] | None = None) -> tuple[int, int]:
        """The retention pass: remove from the game indexes (``games:all`` and every
        status's) the games whose keys have expired, looking at ``batch`` entries of
        ``games:all`` above creation sequence ``after``: (the sequence to go on from,
        0 when the index has been gone through; entries removed). Deadline entries and
        the bots' turn sets of an expired game heal where they are read (the sweeper
        drops a deadline whose game is gone; ``bot_turns``). In a cluster an index entry
        is written before its game (``service.storage.keys``), so a missing game is only
        a suspect the first time it is seen (kept in ``suspects``, the caller's), and is
        removed when it is still missing the next time."""
        rows = self.r.zrangebyscore(self.keys.index("all"), f"({after}", "+inf", start=0,
                                    num=batch, withscores=True)
        if not rows:
            return 0, 0
        pipe = self.r.pipeline(transaction=False)
        for gid, _ in rows:
            pipe.exists(self.game_key(gid.decode()))
        missing = [gid.decode() for (gid, _), there in zip(rows, pipe.execute()) if not there]
        gone = missing
        if self.cluster and suspects is not None:
            gone = [g for g in missing if g in suspects]
            suspects.difference_update(gone)
            if len(suspects) > 100_000:
                suspects.clear()
            suspects.update(g for g in missing if g not in gone)
        elif self.cluster:
            gone = []
        if gone:
            pipe = self.r.pipeline(transaction=False)
            for status in ("all", *STATUS_ORDER):
                pipe.zrem(self.keys.index(status), *gone)
            pipe.execute()
        return (int(rows[-1][1]) if len(rows) == batch else 0), len(gone)

    # --- creation quotas -----------------------------------------------------------------

    def take_quota(self, who: str, limit: int, window_s: int) -> tuple[str, int]:
        """Count one creation against ``who``'s quota of ``limit`` per fixed window of
        ``window_s`` seconds, if it is below it (``QUOTA``): (the counter's key, to give
        it back, and 0), or ('', ms until the window ends) when refused."""
        key = self.keys.quota(who, int(time.time()) // window_s)
        taken, value = self._run(self._quota, [key], [limit, window_s])
        return (key, 0) if int(taken) else ("", max(1, int(value)))

    def give_back_quota(self, key: str) -> None:
        """Undo a ``take_quota`` (another quota refused the creation). DECR only if the
        counter is still there, so an expired window is not brought back without expiry."""
        self._run(self._give_back, [key], [])

    # --- deadlines -----------------------------------------------------------------------

    def claim_due(self, now: float, lease_s: float, limit: int = 100) -> list[tuple[str, int]]:
        """Due deadline entries as (game id, version), leased to this caller (``CLAIM``)."""
        raw = self._claim(keys=[self.deadlines_key],
                          args=[_score(now), _score(now + lease_s), limit])
        out = []
        for m in raw:
            gid, _, version = m.decode().partition(":")
            out.append((gid, int(version)))
        return out

    def drop_deadline(self, game_id: str, version: int) -> bool:
        """Forget an entry whose version is no longer current (its timeout is void); False
        if it is still the game's live deadline, which is then put back at the version's
        true deadline instead of forgotten. In a cluster an entry can be due before its
        game's deadline (two writers of one version each added theirs before the loser's
        compare-and-set failed); on either kind of Redis, forgetting the entry of a live
        deadline would leave the seat's clock with nobody to enforce it, so the entry is
        dropped only once the game has moved on."""
        member = f"{game_id}:{version}"
        current, deadline, status = self.r.hmget(self.game_key(game_id), "version",
                                                 "deadline", "status")
        if (current is not None and int(current) == version and deadline is not None
                and status == b"active"):
            self.r.zadd(self.deadlines_key, {member: float(deadline)})
            return False
        self.r.zrem(self.deadlines_key, member)
        return True

    # --- rate limits ---------------------------------------------------------------------

    def hit(self, who: str, window_s: int) -> tuple[int, int]:
        """Count one request for ``who`` in the current fixed window: (count, ms left)."""
        slot = int(time.time()) // window_s
        n, ttl = self._run(self._rate, [self.keys.rate(who, slot)], [window_s])
        return int(n), int(ttl)

    def peek(self, who: str, window_s: int) -> tuple[int, int]:
        """``who``'s count in the current window without counting: (count, ms left)."""
        key = self.keys.rate(who, int(time.time()) // window_s)
        pipe = self.r.pipeline(transaction=False)
        pipe.get(key)
        pipe.pttl(key)
        n, ttl = pipe.execute()
        return int(n or 0), max(1, int(ttl))
