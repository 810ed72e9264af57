"""Everything the service keeps, in Redis, under one key prefix: ``Store``, the typed
access to it. The key names, and the invariants that hold between them on a single
Redis and on a Redis/Valkey Cluster, are in ``service.storage.keys``; the Lua scripts in
``service.storage.scripts``; the game as read and the per-process game cache in
``service.storage.cache``.

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
current version's); ``CLAIM`` hands due entries to a sweeper (``service.arena.deadlines``),
which drops an entry whose version is no longer current (its timeout is void).

Events are not stored: a game is (players, seed, variants, log), so events are recomputed
by replaying, which keeps a game to a few hundred bytes.

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

One channel per game, ``Keys.channel``, carries ``{version}:{seat in turn}:{bot}`` (the
seat empty when nobody is to act; the bot when the game has just become that bot's turn),
followed, when the change wrote a new state and left the meta as it was, by
``:{status}:{deadline or ''}:{updated}:{state json}`` — everything of the new version but
the meta and the log, so a waiter that knows the meta answers without reading
(``service.storage.wakeups.game_message``). On a single Redis it is PUBLISHed and each
process hears every game through one pattern subscription; in a cluster it is a sharded
channel (SPUBLISH by the game's shard) that a process subscribes to while it has waiters
(``service.storage.wakeups.ShardedWakeups``).

Every change to a game goes through one commit script: it checks the version the caller
read is still current, then writes, bumps the version, records the retry and publishes —
all or nothing, so concurrent writers never both apply. On a single Redis the same script
also moves every index; in a cluster the store moves them in steps around it
(``service.storage.keys``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import AskError, ClusterDownError, RedisClusterException, TryAgainError

from service import jsonio
from service.addresses import network_of
from service.engine import State
from service.storage.cache import GAME_CACHE_MAX, Game, GameCache
from service.storage.keys import STATUS_ORDER, Keys
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

__all__ = ["GAME_CACHE_MAX", "Game", "GameCache", "PendingHit", "Retention", "Store",
           "pending_hit"]

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
    # ARENA_WAITING_GAME_TTL: a casual game waiting for players, from its creation (each
    # join counts it again): a day; an open seat nobody takes in a day is not wanted.
    waiting_s: int = DAY_S
    # ARENA_IDLE_GAME_TTL: a casual game under way, from its last change: a week without
    # a move is a game its bots left (a game with a move limit moves by the clock).
    idle_s: int = 7 * DAY_S


@dataclass
class PendingHit:
    """A rate-limit hit the request has not counted yet: the app sets one (``pending_hit``)
    for requests that read a game first, and the first game read counts it in the same
    round trip (``READ``), then calls ``check(count, ttl_ms)``, which may raise."""

    who: str
    window_s: int
    check: Callable[[int, int], None]
    limit: int = 0  # the count above which ``check`` raises (0: unknown; COMMIT never refuses)


pending_hit: ContextVar[PendingHit | None] = ContextVar("pending_hit", default=None)
TOKEN_CACHE_MAX = 10_000


def token_hash(token: str) -> str:
    """Tokens are stored only as this hash: a leaked database holds no usable token."""
    return hashlib.sha256(token.encode()).hexdigest()


class Store:
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
        # token -> bot id. Safe across processes: a token's bot never changes (and no
        # token is ever revoked), so a cached answer cannot go stale.
        self._tokens: dict[str, str] = {}
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
                return script(keys=keys, args=args, client=client)
            except (AskError, TryAgainError, ClusterDownError):
                pass
            except (redis.ConnectionError, redis.TimeoutError):
                self._refresh()
                if not read:
                    raise
        return script(keys=keys, args=args)

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
        """The game's retry memory (see the module docstring)."""
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
        token = secrets.token_urlsafe(32)
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

    def bot_for_token(self, token: str) -> str | None:
        bot_id = self._tokens.get(token)
        if bot_id is not None:
            return bot_id
        raw = self.r.get(self.keys.token(token_hash(token)))
        if not raw:
            return None
        if len(self._tokens) >= TOKEN_CACHE_MAX:
            self._tokens.clear()
        bot_id = self._tokens[token] = raw.decode()
        return bot_id

    def guarded_bot_for_token(self, token: str, counters: list[str], window_s: int
                              ) -> tuple[str | None, list[tuple[int, int]]]:
        """``bot_for_token``, counting a failure against each of ``counters`` (a client
        address's and its network's; none: nothing counted): (bot id, []) for a known
        token, else (None, [(failures, ms left), ...] as incremented by this failure).
        The token is always looked up first, so a valid one never waits on anyone's
        count. One round trip (``AUTH``) on a single Redis, none for a cached token; in a
        cluster the token and each counter are slots of their own (one call each)."""
        bot_id = self._tokens.get(token)
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
        if len(self._tokens) >= TOKEN_CACHE_MAX:
            self._tokens.clear()
        bot_id = self._tokens[token] = out[1].decode()
        return bot_id, []

    def failure_key(self, who: str, window_s: int) -> str:
        """A failure counter: named by its window's length, not by a window number, and
        expiring ``window_s`` after its first failure (a sliding start, so no boundary
        hands a guesser a fresh count mid-run)."""
        if self.cluster:
            # an address's counter and its network's share a hash tag (the network), so
            # one script counts both at once in a cluster too: incremented one at a time,
            # two racing attempts could each pass one limit and fail the other, and fewer
            # than the limit be compared (issue 22: "exactly N compared")
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
        for gid, (turn, status) in zip(ids, pipe.execute()):
            if status is None or status == b"finished":
                gone.append(gid)
            elif turn is not None and turn.decode() == bot_id:
                out.append(gid)
        if gone:
            self.r.srem(key, *gone)
        return out

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
            out = self._read(keys=[rate_key, self.game_key(game_id), memory],
                             args=[window, bot_id])
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
        account sat in it). Set by the script that creates or commits the game."""
        if meta.get("tournament") or meta.get("ladder"):
            return 0
        r = self.retention
        if status == "finished":
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


def _pairs(flat: list[Any]) -> list[tuple[int, int]]:
    """``[n1, ttl1, n2, ttl2, ...]`` → ``[(n1, ttl1), ...]`` (a ttl of at least 1 ms)."""
    return [(int(flat[i]), max(1, int(flat[i + 1]))) for i in range(0, len(flat) - 1, 2)]


def is_cluster(client: Any) -> bool:
    """Whether ``client`` is redis-py's cluster client."""
    return isinstance(client, RedisCluster)


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
