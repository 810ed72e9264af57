"""Every change to a game, through one commit script. A part of ``Store``
(``service.storage.store``), which inherits it.

Retry memory (``Idempotency-Key``), one hash per game, ``Keys.retry``: field = bot id,
value = that bot's latest keyed action in the game, ``{len}:{key}|{body hash}|{ply}|
{seat}|{deadline}|{updated}|{version}`` (``retry_tag``, ``retry_record``). A key's scope is
(bot, game): the same key in another game is another request; in the same game with
another body (or version, or If-Match), 422. The commit script reads and writes it with
the game (same slot: the game's hash tag), so a retry and its twin never both apply. A
bot's next keyed action replaces its record: at most one record per bot and game. No
expiry while the game is live; the commit that finishes the game gives it
``ARENA_RETRY_GRACE`` seconds (default 600); after that a retry of the game's last move is
answered from the game itself (``Arena._last_move_answer``).

Every change to a game goes through one commit script: it checks the version the caller
read is still current, then writes, bumps the version, records the retry and publishes —
all or nothing, so concurrent writers never both apply. On a single Redis the same script
also moves every index; in a cluster the store moves them in steps around it
(``service.storage.keys``).
"""

from __future__ import annotations

import time
from typing import Any

import redis
from redis.exceptions import AskError, ClusterDownError, TryAgainError

from service import jsonio
from service.engine import State
from service.storage.cache import Game
from service.storage.hits import pending_hit
from service.storage.redis_client import is_cluster


def retry_tag(key: str) -> str:
    """What a retry record starts with for ``key``: its length makes the match exact
    whatever characters the key holds (``a|b`` is not ``a`` followed by a field)."""
    return f"{len(key)}:{key}|"


def retry_record(raw: bytes, key: str) -> str | None:
    """A stored record for ``key`` without its tag (``{body hash}|{ply}|{seat}|{deadline}|
    {updated}|{version}``), or None if the record is another key's."""
    record = raw.decode()
    tag = retry_tag(key)
    return record[len(tag):] if record.startswith(tag) else None


def _score(t: float) -> str:
    """A deadline as Redis stores it: unix seconds with millisecond precision."""
    return f"{t:.3f}"


def commit_time() -> float:
    """Now, as a commit time: unix seconds rounded to the microsecond, so the value in
    the first answer is the one read back from Redis or a retry's record."""
    return round(time.time(), 6)


def _stamp(t: float) -> str:
    """A commit time as Redis stores it: unix seconds with microsecond precision (a
    wake-up is timed from it, and takes milliseconds)."""
    return f"{t:.6f}"


class Commits:
    """The commit of a game's change: a part of ``Store`` (which inherits it); see the
    module docstring."""

    def commit(
        self,
        game: Game,
        *,
        state: State | None = None,
        meta: dict[str, Any] | None = None,
        action: int | None = None,
        status: str,
        idem_key: str = "",
        idem_value: str = "",
        idem_bot: str = "",
        old_turn_bot: str | None = None,
        new_turn_bot: str | None = None,
        deadline: float | None = None,
        turn_seat: int | None = None,
        cache_generation: int | None = None,
        updated: float | None = None,
    ) -> tuple[int, Any]:
        """Compare-and-set on ``game.version``; see ``COMMIT`` for the result codes.
        ``deadline``: when the next decision is due (None: no limit, or nobody to act).
        ``turn_seat``: the seat to act after the change, published with the version so
        a waiter whose seat it is not can skip re-reading (None: waiters re-read).
        A rate-limit hit still pending (``pending_hit``, with its limit) is counted by
        the script, which refuses the change when it is over the limit (``check``
        raises). ``cache_generation``: keep the committed game in ``games`` under that
        listener generation (None: don't). ``updated``: the commit's time, unix seconds
        (default: now), kept with the version and published with its state.
        ``idem_key``: the request's ``Idempotency-Key`` ('' none) of the bot ``idem_bot``;
        ``idem_value`` the record to keep for it if the change applies (code 2 returns
        the record kept for the same key instead, its tag removed).
        In a cluster the indexes are moved in steps around the script (see
        ``service.storage.keys``): what the new version needs before, what the old one
        needed after."""
        if updated is None:
            updated = commit_time()
        hit = pending_hit.get()
        window = limit = 0
        rate_key = ""
        if hit is not None and hit.limit:  # the request's rate-limit hit, counted here
            pending_hit.set(None)
            window, limit = hit.window_s, hit.limit
            rate_key = self.keys.rate(hit.who, int(time.time()) // window)
        else:
            hit = None
        timed = bool(deadline is not None or game.deadline is not None
                     or game.meta.get("move_limit")
                     or (meta is not None and meta.get("move_limit")))
        if self.cluster:
            if hit is not None:  # counted first; ``check`` raises when over the limit
                n, ttl = self._run(self._rate, [rate_key], [window])
                hit.check(int(n), int(ttl))
                hit = None
            keys = [self.game_key(game.id), self.retry_key(game.id), self.game_channel(game.id)]
            self._ahead(game, status, meta, deadline)
        else:
            keys = [
                self.game_key(game.id),
                self.retry_key(game.id),
                f"{self.p}games:",
                f"{self.p}bot:",
                self.game_channel(game.id),
                self.deadlines_key,
                rate_key,
            ]
        state_json = jsonio.dumps(state.to_dict()) if state is not None else ""
        args = [
            str(game.version),
            state_json,
            jsonio.dumps(meta) if meta is not None else "",
            chr(48 + action) if action is not None else "",
            status,
            idem_value if idem_key else "",
            self.idem_grace_s,
            old_turn_bot or "",
            new_turn_bot or "",
            game.id,
            _score(deadline) if deadline is not None else "",
            str(turn_seat) if turn_seat is not None else "",
            window,
            limit,
            "1" if timed else "",
            _stamp(updated),
            idem_bot,
            retry_tag(idem_key) if idem_key else "",
        ]
        args.append(self.publish if self.cluster else "")
        args.append(self.game_ttl(meta if meta is not None else game.meta, status))
        acked = 1
        if self.wait_ms:
            out, acked = self._commit_and_wait(keys, args)
        else:
            out = self._run(self._commit, keys, args)
        code, value = int(out[0]), out[1]
        if code == 1 and self.cluster:
            self._fail("commit", status if status != game.status else "")
            self._after(game, status, timed, meta)
        if code == 1 and acked < 1:
            raise redis.TimeoutError(f"no replica acknowledged the commit within "
                                     f"{self.wait_ms} ms (ARENA_DURABILITY=replica)")
        if code == 1 and status != "finished" and meta is not None and \
                set(meta.get("seats", [])) - set(game.seats):  # a bot sat down
            self.index_live(game.id, meta["seats"])  # type: ignore[attr-defined]
        if code == 1 and status == "finished" and game.status != "finished":
            self.index_finished(  # type: ignore[attr-defined]
                game.id, meta if meta is not None else game.meta, updated)
        if code == 2:
            value = retry_record(value, idem_key)
        if hit is not None:  # the budget the script counted, for the answer (3: raises)
            hit.check(*((int(out[1]), int(out[2])) if code == 3 else (int(out[2]), int(out[3]))))
        if code == 1 and cache_generation is not None:
            self.games.put(Game(game.id, int(value), status,
                                meta if meta is not None else game.meta,
                                state_json or game.state_json, None,  # type: ignore[arg-type]
                                deadline, updated, state if state is not None else game._state,
                                seq=game.seq),
                           cache_generation)
        return code, value

    def _commit_and_wait(self, keys: list[str], args: list[Any]) -> tuple[Any, int]:
        """The commit script and ``WAIT 1 ms`` on one connection (WAIT counts the replicas
        that have this connection's writes): (the script's answer, replicas that have it)."""
        client = (self.r.get_node_from_key(keys[0]).redis_connection if is_cluster(self.r)
                  else self.r)
        pipe = client.pipeline(transaction=False)
        self._commit(keys=keys, args=args, client=pipe)
        pipe.execute_command("WAIT", 1, self.wait_ms)
        try:
            out, acked = pipe.execute()
        except (redis.ConnectionError, redis.TimeoutError):
            if is_cluster(self.r):
                self._refresh()
            raise
        except (AskError, TryAgainError, ClusterDownError):  # nothing ran: ask the
            out = self._commit(keys=keys, args=args)          # cluster client, no WAIT
            return out, 0
        return out, int(acked)

    def _ahead(self, game: Game, status: str, meta: dict[str, Any] | None,
               deadline: float | None) -> None:
        """Cluster mode, before the commit: what the new version needs in the indexes
        (its status index, its deadline entry, a joining bot's set of games)."""
        pipe: Any = None
        if status != game.status and game.seq is not None:
            pipe = self.r.pipeline(transaction=False)
            pipe.zadd(self.keys.index(status), {game.id: game.seq}, nx=True)
        if deadline is not None:
            pipe = pipe or self.r.pipeline(transaction=False)
            pipe.zadd(self.keys.deadlines, {f"{game.id}:{game.version + 1}": deadline})
        if meta is not None and status != "finished":
            joined = {b for b in meta.get("seats", []) if b} - {b for b in game.seats if b}
            for bot in joined:
                pipe = pipe or self.r.pipeline(transaction=False)
                pipe.sadd(self.keys.bot_games(bot), game.id)
        if pipe is not None:
            pipe.execute()

    def _tell_bots(self, bots: set[str]) -> None:
        """Sharded channels: wake ``bots``' waiters for a turn in any game (they joined a
        game they do not follow yet). Best effort: a waiter re-checks on its own too."""
        if self.publish != "SPUBLISH" or not bots:
            return
        try:
            for bot in bots:
                self.r.spublish(self.bot_turn_channel(bot), "joined")
        except redis.RedisError:
            pass

    def _after(self, game: Game, status: str, timed: bool,
               meta: dict[str, Any] | None = None) -> None:
        """Cluster mode, after the commit: what only the old version needed."""
        if meta is not None and status != "finished":
            self._tell_bots({b for b in meta.get("seats", []) if b}
                            - {b for b in game.seats if b})
        pipe: Any = None
        if status != game.status:
            pipe = self.r.pipeline(transaction=False)
            pipe.zrem(self.keys.index(game.status), game.id)
            if status == "finished":
                for bot in {b for b in game.seats if b}:
                    pipe.srem(self.keys.bot_games(bot), game.id)
        if timed and game.deadline is not None:
            pipe = pipe or self.r.pipeline(transaction=False)
            pipe.zrem(self.keys.deadlines, f"{game.id}:{game.version}")
        if pipe is not None:
            pipe.execute()
