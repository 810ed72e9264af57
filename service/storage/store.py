"""Everything the service keeps, in Redis, under one key prefix: ``Store``, the typed
access to it. The key names, and the invariants that hold between them on a single
Redis and on a Redis/Valkey Cluster, are in ``service.storage.keys``; the Lua scripts in
``service.storage.scripts``; the game as read and the per-process game cache in
``service.storage.cache``. ``Store`` is made of parts, one module each: bots and tokens
(``service.storage.bots``), the commit of a change (``service.storage.commits``) and the
upkeep: retention, repair, quotas, deadlines, rate limits (``service.storage.upkeep``).

Per game, one hash (``Keys.game``):

- ``state``   the engine's ``State.to_dict()`` as JSON (the position after the last action)
- ``meta``    JSON: players, seed, variants, seats (bot ids or null), created, creator
- ``status``  waiting | active | finished (a field of its own so Lua can move indexes)
- ``version`` an integer bumped by every change (join or action)
- ``log``     the actions, one character each (``chr(48 + action)``)
- ``deadline`` (only while a move limit runs) unix seconds by which the seat in turn must act
- ``updated`` unix seconds when this version was committed (the committing service's clock)
- cluster layout only: ``seq`` (its score in the status indexes), ``turn`` (the bot in turn)

Move deadlines: ``Keys.deadlines`` is a sorted set, score = deadline (unix seconds, the
service's clock), member = ``{game id}:{version}``: at most one live entry per game (its
current version's); ``CLAIM`` hands due entries to a sweeper (``service.arena.games.deadlines``),
which drops an entry whose version is no longer current (its timeout is void).

Events are not stored: a game is (players, seed, variants, log), so events are recomputed
by replaying, which keeps a game to a few hundred bytes.

One channel per game, ``Keys.channel``, carries ``{version}:{seat in turn}:{bot}`` (the
seat empty when nobody is to act; the bot when the game has just become that bot's turn),
followed, when the change wrote a new state and left the meta as it was, by
``:{status}:{deadline or ''}:{updated}:{state json}`` — everything of the new version but
the meta and the log, so a waiter that knows the meta answers without reading
(``service.storage.wakeups.game_message``). On a single Redis it is PUBLISHed and each
process hears every game through one pattern subscription; in a cluster it is a sharded
channel (SPUBLISH by the game's shard) that a process subscribes to while it has waiters
(``service.storage.wakeups.ShardedWakeups``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import time
from dataclasses import dataclass
from typing import Any

import redis
from redis.crc import key_slot
from redis.exceptions import AskError, ClusterDownError, RedisClusterException, TryAgainError

from service import jsonio
from service.engine import State
from service.storage.bots import BotRecords
from service.storage.cache import GAME_CACHE_MAX, Game, GameCache
from service.storage.commits import Commits, _score, _stamp, commit_time, retry_record
from service.storage.finished import FinishedGames
from service.storage.hits import pending_hit
from service.storage.keys import STATUS_ORDER, Keys
from service.storage.redis_client import is_cluster, run_script
from service.storage.scripts import (
    AUTH,
    CLAIM,
    COMMIT,
    COMMIT_CLUSTER,
    COUNT,
    CREATE_CLUSTER,
    GIVE_BACK,
    QUOTA,
    RATE,
    READ,
    READ_CLUSTER,
    TURN_ADD,
    TURNS,
    UNCOUNT,
)
from service.storage.upkeep import Upkeep

__all__ = ["GAME_CACHE_MAX", "Game", "GameCache", "Retention", "Store"]

# The exit status of a process stopped at its ``ARENA_FAILPOINT``.
FAILPOINT_EXIT = 86

# Seconds the retry memory of a finished game is kept (``ARENA_RETRY_GRACE``): longer than
# any client's retries (``clients.api.RetryPolicy`` gives up within about a minute) and
# than a Redis restart, short enough that finished games cost nothing after it.
RETRY_GRACE_S = 600

DAY_S = 86400


@dataclass
class Retention:
    """How long what clients create is kept (seconds; 0: for ever). The reasons for each
    default are in docs/operations.md ("What is kept, and for how long"); the keys they
    apply to in ``service.storage.keys``."""

    # ARENA_BOT_UNUSED_TTL: a bot registered but never seated in a game that started (nor
    # entered in a tournament or ladder). A week: a bot author registers, then writes and
    # debugs the bot over days; a weekend or two of silence is normal, a week is not.
    bot_unused_s: int = 7 * DAY_S
    # ARENA_PERSON_TTL: a person's account (the page's), counted again from every game it
    # starts: a person who plays keeps it; the browser that forgot its token frees it.
    person_s: int = 7 * DAY_S
    # ARENA_GAME_RETENTION: a finished casual game (and its record, which is the game):
    # a month, long enough to look a game up from a bot's logs or link it to a friend.
    game_s: int = 30 * DAY_S
    # ARENA_PERSON_GAME_RETENTION: a finished game a person's account sat in: a day, to
    # look at the record after the game; anonymous visitors' games are the bulk of them.
    person_game_s: int = DAY_S
    # ARENA_CANCELLED_GAME_RETENTION: a casual game cancelled before it started (an
    # invitation declined or expired): a day, as a person's game. It holds no play, and a
    # stranger can make them by the thousand (one challenge each); the creator learns the
    # answer within the invitation's two minutes
    cancelled_s: int = DAY_S
    # ARENA_WAITING_GAME_TTL: a casual game waiting for players, from its creation (each
    # join counts it again): a day; an open seat nobody takes in a day is not wanted.
    waiting_s: int = DAY_S
    # ARENA_IDLE_GAME_TTL: a casual game under way, from its last change: a week without
    # a move is a game its bots left (a game with a move limit moves by the clock).
    idle_s: int = 7 * DAY_S


class Store(BotRecords, Commits, FinishedGames, Upkeep):
    """Thin typed access to the keys of ``service.storage.keys``; no game rules here.

    ``cluster``: the cluster layout (hash tags, one-slot scripts, the indexes moved in
    steps around the commit); None: whether ``client`` is a ``RedisCluster``. The layout
    works on a single Redis too (tests use it there to kill a process between the steps).
    """

    def __init__(self, client: redis.Redis, prefix: str,
                 retry_grace_s: int = RETRY_GRACE_S, cluster: bool | None = None,
                 retention: Retention | None = None) -> None:
        self.r = client
        self.p = prefix
        self.idem_grace_s = retry_grace_s
        self.retention = retention or Retention()
        # bots this process has seen kept for ever (``bots_played``): asked once
        self._kept: set[str] = set()
        self.cluster = is_cluster(client) if cluster is None else cluster
        self.keys = Keys(prefix, self.cluster)
        # how the commit script publishes a game's change: to the game's shard in a
        # cluster (SPUBLISH, ``ShardedWakeups``), else to every subscriber
        self.publish = "SPUBLISH" if self.cluster and is_cluster(client) else "PUBLISH"
        self._rate = client.register_script(RATE)
        self._quota = client.register_script(QUOTA)
        self._give_back = client.register_script(GIVE_BACK)
        self._claim = client.register_script(CLAIM)
        self._count = client.register_script(COUNT)
        self._uncount = client.register_script(UNCOUNT)
        if self.cluster:
            self._commit = client.register_script(COMMIT_CLUSTER)
            self._read = client.register_script(READ_CLUSTER)
            self._create = client.register_script(CREATE_CLUSTER)
        else:
            self._commit = client.register_script(COMMIT)
            self._read = client.register_script(READ)
            self._turns = client.register_script(TURNS)
            self._turn_add = client.register_script(TURN_ADD)
        self._auth = client.register_script(AUTH)
        # ARENA_FAILPOINT: the process exits (``os._exit``) at that point of a two-step
        # update, for the tests that show the indexes heal (``service.storage.keys``).
        # a cluster client's hot commands go straight to the node that owns the key's
        # slot (``_on``), without the cluster client's routing per command
        self._direct = is_cluster(client)
        self.failpoint = os.environ.get("ARENA_FAILPOINT", "")
        # ARENA_DURABILITY=replica: a commit is answered only once a replica has it
        # (``WAIT 1 ARENA_DURABILITY_WAIT_MS`` on the commit's own connection), else 503
        self.wait_ms = (int(os.environ.get("ARENA_DURABILITY_WAIT_MS", "500"))
                        if os.environ.get("ARENA_DURABILITY", "") == "replica" else 0)
        # token -> (bot id, until when (monotonic) the answer may be used without asking
        # Redis again). A token's bot never changes, but a token can be rotated or
        # revoked (``rotate_token``): another process then stops taking the old one
        # within ``TOKEN_CACHE_S``, this one at once.
        self._tokens: dict[str, tuple[str, float]] = {}
        self._missing_since: dict[str, float] = {}  # (``bot_turns``)
        self.games = GameCache()

    def _on(self, key: str) -> Any:
        """The client of the node that owns ``key``'s slot as far as the cluster client
        knows (None: ask the cluster client). Saves its routing on the hot path (a
        third of a command's instructions); a redirection falls back to it (``_run``)."""
        if not self._direct:
            return None
        try:
            return self.r.nodes_manager.slots_cache[key_slot(key.encode())][0].redis_connection
        except (KeyError, IndexError, AttributeError):
            return None

    def _run(self, script: Any, keys: list[str], args: list[Any], *, read: bool = False
             ) -> Any:
        """``script`` on the node that owns ``keys[0]`` (see ``_on``). A MOVED, ASK,
        TRYAGAIN or CLUSTERDOWN answer (nothing ran) goes through the cluster client,
        which follows it and learns the new owner; a node that does not answer makes
        the cluster client ask the others for the slots (a failover). A write is then a
        503 (it may have run: the client retries it with its idempotency key); a
        ``read`` is asked again through the cluster client, which retries on its own:
        the slot map just fetched may come from a node that has not yet heard of the
        promotion and still name the dead master."""
        client = self._on(keys[0])
        if client is not None:
            try:
                return run_script(script, keys, args, client)
            except (AskError, TryAgainError, ClusterDownError):
                pass
            except (redis.ConnectionError, redis.TimeoutError):
                self._refresh()
                if not read:
                    raise
            return script(keys=keys, args=args)
        return run_script(script, keys, args)

    def _refresh(self) -> None:
        """A node did not answer a command sent to it directly: have the cluster client
        ask the others which nodes own the slots now (a replica may have been promoted)."""
        with contextlib.suppress(redis.RedisError, RedisClusterException):
            self.r.nodes_manager.initialize()

    def _fail(self, point: str, status: str = "") -> None:
        """Exit here if ``ARENA_FAILPOINT`` names this point (``commit``), or this point
        and the status a change moves the game to (``commit:finished``)."""
        if self.failpoint and self.failpoint in (point, f"{point}:{status}"):
            os._exit(FAILPOINT_EXIT)

    # --- keys --------------------------------------------------------------------------

    def game_key(self, game_id: str) -> str:
        return self.keys.game(game_id)

    def retry_key(self, game_id: str) -> str:
        """The game's retry memory (see ``service.storage.commits``)."""
        return self.keys.retry(game_id)

    def game_channel(self, game_id: str) -> str:
        return self.keys.channel(game_id)

    def bot_turn_channel(self, bot_id: str) -> str:
        """What a bot waiting for its turn in any game waits on: a channel of the
        process's listener, fed from game-channel messages (nothing is published to it
        in Redis). In a cluster with sharded channels it is also published (to the
        bot's shard) when the bot joins a game: a turn in a game its waiter does not
        follow yet."""
        return f"{self.p}bot:{self.keys.tag(bot_id)}:turn"

    @property
    def deadlines_key(self) -> str:
        return self.keys.deadlines

    @property
    def tours_prefix(self) -> str:
        """The prefix of the tournaments' keys (``Keys.tours_prefix``)."""
        return self.keys.tours_prefix

    # --- games ---------------------------------------------------------------------------

    def create_game(
        self, meta: dict[str, Any], state: State, status: str, turn_bot: str | None,
        deadline: float | None = None, *, game_id: str | None = None,
    ) -> Game:
        """A new game. With ``game_id`` (an id derived from what the game is for, see
        ``derived_id``) it is created only if absent, else the game already there is
        returned: however many processes create "the game of X", and however late,
        there is one."""
        if self.cluster:
            return self.add_game(None, meta, state, status, turn_bot, deadline,
                                 game_id=game_id)
        if game_id is None:
            pipe = self.r.pipeline(transaction=True)
            game = self.add_game(pipe, meta, state, status, turn_bot, deadline)
            pipe.execute()
            return game
        key = self.game_key(game_id)
        with self.r.pipeline(transaction=True) as pipe:
            while True:
                try:
                    pipe.watch(key)
                    found = self._game(game_id, pipe.hgetall(key))
                    if found is not None:
                        pipe.unwatch()
                        return found
                    pipe.multi()
                    game = self.add_game(pipe, meta, state, status, turn_bot, deadline,
                                         game_id=game_id)
                    pipe.execute()
                    return game
                except redis.WatchError:
                    continue  # another process created it: read it again

    @staticmethod
    def derived_id(*parts: object) -> str:
        """A game id that is a function of what the game is for (a tournament's slot, a
        ladder's match), in the same 12 hex digits as a random one."""
        return hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()[:12]

    def add_game(
        self, pipe: Any, meta: dict[str, Any], state: State, status: str,
        turn_bot: str | None, deadline: float | None = None, *, game_id: str | None = None,
    ) -> Game:
        """Queue a new game's writes on ``pipe`` (a MULTI pipeline), so a caller can make
        the game part of a larger transaction (a tournament slot). Nothing exists until
        the pipeline executes; an aborted transaction leaves only an unused sequence.

        In a cluster the game is another slot than the caller's transaction: it is
        written here, at once (its indexes first, see ``service.storage.keys``), and a
        tournament's game has its slot's id and is written only if absent, so a retried
        or lost transaction finds the same game instead of making another. A given
        ``game_id`` is written only if absent in a cluster; on a single Redis the
        caller's transaction must watch it (``create_game``)."""
        tour = meta.get("tournament")
        if game_id is None and self.cluster and tour:
            game_id = self.derived_id(tour["id"], tour["slot"])
        elif game_id is None:
            game_id = secrets.token_hex(6)
        seq = self.r.incr(self.keys.seq)
        state_json = jsonio.dumps(state.to_dict())
        meta_json = jsonio.dumps(meta)
        updated = commit_time()
        fields_: dict[str, Any] = {"state": state_json, "meta": meta_json, "status": status,
                                   "version": 1, "log": "", "updated": _stamp(updated)}
        if deadline is not None:
            fields_["deadline"] = _score(deadline)
        ttl = self.game_ttl(meta, status)
        if self.cluster:
            fields_["seq"] = seq
            fields_["turn"] = turn_bot or ""
            ahead = self.r.pipeline(transaction=False)
            if deadline is not None:
                ahead.zadd(self.keys.deadlines, {f"{game_id}:1": deadline})
            ahead.zadd(self.keys.index("all"), {game_id: seq}, nx=True)
            ahead.zadd(self.keys.index(status), {game_id: seq}, nx=True)
            if status != "finished":
                for bot in {b for b in meta.get("seats", []) if b}:
                    ahead.sadd(self.keys.bot_games(bot), game_id)
            ahead.execute()
            self._fail("create")
            args: list[Any] = [f"1::{turn_bot}" if turn_bot else "", self.publish, ttl]
            for k, v in fields_.items():
                args += [k, v]
            if not self._create(keys=[self.keys.game(game_id), self.keys.channel(game_id)],
                                args=args):
                found = self._game(game_id, self.r.hgetall(self.keys.game(game_id)))
                if found is not None:
                    return found
            if status != "finished":
                self._tell_bots({b for b in meta.get("seats", []) if b})
                self.index_live(game_id, meta.get("seats", []))
            return Game(game_id, 1, status, meta, state_json, "", deadline, updated, seq=seq)
        if deadline is not None:
            pipe.zadd(self.deadlines_key, {f"{game_id}:1": deadline})
        pipe.hset(self.game_key(game_id), mapping=fields_)
        if ttl:
            pipe.expire(self.game_key(game_id), ttl)
        pipe.zadd(self.keys.index("all"), {game_id: seq})
        pipe.zadd(self.keys.index(status), {game_id: seq})
        if turn_bot:
            self._turn_add(keys=[self.keys.bot_turns(turn_bot)], args=[game_id, ttl],
                           client=pipe)
            pipe.publish(self.game_channel(game_id), f"1::{turn_bot}")
        if status != "finished":
            for bot in sorted({b for b in meta.get("seats", []) if b}):
                self.live_add(pipe, bot, game_id)
        return Game(game_id, 1, status, meta, state_json, "", deadline, updated)

    def get_game(self, game_id: str) -> Game | None:
        if pending_hit.get() is not None:
            return self.get_game_and_idem(game_id)[0]
        key = self.game_key(game_id)
        node = self._on(key)
        if node is not None:
            try:
                return self._game(game_id, node.hgetall(key))
            except (AskError, TryAgainError, ClusterDownError):
                pass
            except (redis.ConnectionError, redis.TimeoutError):
                self._refresh()  # and ask again through the cluster client (``_run``)
        return self._game(game_id, self.r.hgetall(key))

    def get_game_and_idem(self, game_id: str, bot_id: str = "", idem: str = ""
                          ) -> tuple[Game | None, str | None]:
        """The game and ``bot_id``'s retry record for the key ``idem`` (None unless it is
        that key's, see ``retry_record``) read at one instant (one Lua script): both from before
        a concurrent action, or both from after it. A pending rate-limit hit is counted
        (and checked) in the same round trip (in a cluster: a round trip before)."""
        hit = pending_hit.get()
        rate_key, window = "", 0
        if hit is not None:
            pending_hit.set(None)
            window = hit.window_s
            rate_key = self.keys.rate(hit.who, int(time.time()) // window)
        if self.cluster:
            if hit is not None:
                n, ttl = self._run(self._rate, [rate_key], [window])
                hit.check(int(n), int(ttl))
                hit = None
            keys = [self.game_key(game_id)]
            if idem:
                keys.append(self.retry_key(game_id))
            out = self._run(self._read, keys, [bot_id], read=True)
        else:
            memory = self.retry_key(game_id) if idem else ""
            out = run_script(self._read, [rate_key, self.game_key(game_id), memory],
                             [window, bot_id])
        if hit is not None:
            hit.check(int(out[0]), int(out[1]))
        raw = dict(zip(out[3::2], out[4::2]))
        return self._game(game_id, raw), (retry_record(out[2], idem) if out[2] else None)

    def _game(self, game_id: str, raw: dict[bytes, bytes]) -> Game | None:
        if not raw:
            return None
        return Game(
            id=game_id,
            version=int(raw[b"version"]),
            status=raw[b"status"].decode(),
            meta=jsonio.loads(raw[b"meta"]),
            state_json=raw[b"state"].decode(),
            log=raw[b"log"].decode(),
            deadline=float(raw[b"deadline"]) if b"deadline" in raw else None,
            updated=float(raw[b"updated"]) if b"updated" in raw else None,
            seq=int(raw[b"seq"]) if b"seq" in raw else None,
        )

    def get_version(self, game_id: str) -> int | None:
        raw = self.r.hget(self.game_key(game_id), "version")
        return int(raw) if raw is not None else None

    def list_games(
        self, status: str | None, limit: int, cursor: int | None
    ) -> tuple[list[Game], int | None]:
        """Newest first; ``cursor`` is the creation sequence to continue below. In a
        cluster the index is a superset of the truth: games of another status are left
        out (and removed from it when they have moved past it for good)."""
        index = self.keys.index(status or "all")
        hi = f"({cursor}" if cursor is not None else "+inf"
        rows = self.r.zrevrangebyscore(index, hi, "-inf", start=0, num=limit + 1, withscores=True)
        more = len(rows) > limit
        rows = rows[:limit]
        pipe = self.r.pipeline(transaction=False)
        for gid, _ in rows:
            pipe.hgetall(self.game_key(gid.decode()))
        games, stale = [], []
        for (gid, _), raw in zip(rows, pipe.execute()):
            game = self._game(gid.decode(), raw)
            if game is None:
                continue
            if self.cluster and status and game.status != status:
                if STATUS_ORDER.get(game.status, 0) > STATUS_ORDER.get(status, 0):
                    stale.append(game.id)
                continue
            games.append(game)
        if stale:
            self.r.zrem(index, *stale)
        next_cursor = int(rows[-1][1]) if more and rows else None
        return games, next_cursor
