"""Each bot's finished games, newest first: one sorted set per bot (``bot:<id>:finished``,
member the game id, score the commit time of the game's last version), written by the
commit that finishes a game (``Commits.commit``) and read a page at a time by
``service.arena.archive``. A part of ``Store`` (which inherits it).

The index is written after the commit, outside its script: a process that dies between
the two leaves a finished game out of its bots' sets, which ``repair_finished`` (the
``allfours migrate`` step, ``service.arena.migrations``) puts back from ``games:finished``.
A game whose key has expired (``Retention``) is left out where a page reads it, and its
entry removed then.
"""

from __future__ import annotations

from typing import Any

# Entries of ``games:finished`` read per round trip by ``repair_finished``.
REPAIR_BATCH = 500


class FinishedGames:
    """Each bot's finished games: see the module docstring."""

    def bot_finished_key(self, bot_id: str) -> str:
        return f"{self.keys.p}bot:{bot_id}:finished"  # type: ignore[attr-defined]

    def bot_live_key(self, bot_id: str) -> str:
        return f"{self.keys.p}bot:{bot_id}:live"  # type: ignore[attr-defined]

    def index_live(self, game_id: str, seats: list[str | None]) -> None:
        """``seats``' bots sit in the live (waiting or active) game ``game_id``: a
        superset, read with repair (``live_games``)."""
        bots = sorted({b for b in seats if b})
        if bots:
            pipe = self.r.pipeline(transaction=False)  # type: ignore[attr-defined]
            for b in bots:
                self.live_add(pipe, b, game_id)
            pipe.execute()

    def live_add(self, pipe: Any, bot_id: str, game_id: str) -> None:
        """Queue ``game_id`` into ``bot_id``'s live set on ``pipe``: the set lasts as
        long as an idle game (``Retention.idle_s``) from the last game put in it."""
        key = self.bot_live_key(bot_id)
        pipe.sadd(key, game_id)
        idle = self.retention.idle_s  # type: ignore[attr-defined]
        if idle:
            pipe.expire(key, idle)

    def live_games(self, bot_id: str) -> list[Any]:
        """The live games ``bot_id`` sits in, oldest first; finished or expired ones
        leave its set here."""
        key = self.bot_live_key(bot_id)
        ids = sorted(m.decode() for m in self.r.smembers(key))  # type: ignore[attr-defined]
        games = self.finished_games(ids)
        gone = [gid for gid, g in zip(ids, games)
                if g is None or g.status == "finished" or bot_id not in g.seats]
        if gone:
            self.r.srem(key, *gone)  # type: ignore[attr-defined]
        live = [g for g in games if g is not None and g.id not in gone]
        return sorted(live, key=lambda g: (g.meta.get("created", 0), g.id))

    def index_finished(self, game_id: str, meta: dict[str, Any], finished_at: float) -> None:
        """``game_id`` has just finished at ``finished_at`` (unix seconds): one entry in
        the set of every bot seated in it, and out of their live games. A game cancelled
        before it started (an invitation declined or expired) was never played and is
        left out."""
        bots = {b for b in meta.get("seats", []) if b}
        if not bots:
            return
        # a person's account expires (``Retention.person_s``): its index goes with it
        persons = self.persons(list(bots)) if meta.get("person") else set()  # type: ignore[attr-defined]
        keep_s = self.retention.person_s  # type: ignore[attr-defined]
        pipe = self.r.pipeline(transaction=False)  # type: ignore[attr-defined]
        for b in sorted(bots):
            pipe.srem(self.bot_live_key(b), game_id)
            if not meta.get("cancelled"):
                pipe.zadd(self.bot_finished_key(b), {game_id: finished_at})
                if b in persons and keep_s:
                    pipe.expire(self.bot_finished_key(b), keep_s)
        pipe.execute()

    def finished_rows(self, bot_id: str, hi: float | None, lo: float | None,
                      after: tuple[float, str] | None, count: int
                      ) -> list[tuple[str, float]]:
        """Up to ``count`` (game id, finished at) of ``bot_id``, newest first, finished
        at or before ``hi`` and at or after ``lo`` (None: unbounded), and strictly after
        the position ``after`` (a row already handed out: the same time and a smaller
        id, or an earlier time; a sorted set orders equal scores by member, so the
        position is exact even when two games finished at the same instant)."""
        top = hi
        if after is not None:
            top = after[0] if top is None else min(top, after[0])
        key = self.bot_finished_key(bot_id)
        start, out = 0, []
        while len(out) < count:
            rows = self.r.zrevrangebyscore(  # type: ignore[attr-defined]
                key, "+inf" if top is None else repr(top),
                "-inf" if lo is None else repr(lo), start=start, num=count + 1,
                withscores=True)
            if not rows:
                break
            start += len(rows)
            for member, score in rows:
                gid = member.decode()
                if after is not None and score == after[0] and gid >= after[1]:
                    continue
                out.append((gid, score))
            if len(rows) < count + 1:
                break
        return out[:count]

    def finished_games(self, ids: list[str]) -> list[Any]:
        """The games ``ids`` (one round trip); None for one whose key has expired."""
        pipe = self.r.pipeline(transaction=False)  # type: ignore[attr-defined]
        for gid in ids:
            pipe.hgetall(self.game_key(gid))  # type: ignore[attr-defined]
        return [self._game(gid, raw)  # type: ignore[attr-defined]
                for gid, raw in zip(ids, pipe.execute())]

    def forget_finished(self, bot_id: str, ids: list[str]) -> None:
        """Drop ``ids`` (expired games) from ``bot_id``'s set."""
        if ids:
            self.r.zrem(self.bot_finished_key(bot_id), *ids)  # type: ignore[attr-defined]

    def repair_finished(self) -> int:
        """Put every finished game still kept into its bots' sets (idempotent: ZADD of
        the same member and score). The games written before the index existed, or
        whose indexing was lost to a crash after the commit; the number of games seen."""
        index = self.keys.index("finished")  # type: ignore[attr-defined]
        seen, start = 0, 0
        while True:
            ids = [m.decode() for m in self.r.zrange(  # type: ignore[attr-defined]
                index, start, start + REPAIR_BATCH - 1)]
            if not ids:
                return seen
            start += len(ids)
            for game in self.finished_games(ids):
                if game is None or game.status != "finished":
                    continue
                seen += 1
                self.index_finished(game.id, game.meta,
                                    game.updated if game.updated is not None
                                    else float(game.meta.get("created", 0)))
