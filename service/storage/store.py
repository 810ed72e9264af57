"""Everything the service keeps, in Redis, under one key prefix.

Per game, one hash ``{p}game:{id}``:

- ``state``   the engine's ``State.to_dict()`` as JSON (the position after the last action)
- ``meta``    JSON: players, seed, variants, seats (bot ids or null), created, creator
- ``status``  waiting | active | finished (a field of its own so Lua can move indexes)
- ``version`` an integer bumped by every change (join or action)
- ``log``     the actions, one character each (``chr(48 + action)``)
- ``deadline`` (only while a move limit runs) unix seconds by which the seat in turn must act
- ``updated`` unix seconds when this version was committed (the committing service's clock)

Move deadlines: ``{p}deadlines`` is a sorted set, score = deadline (unix seconds, the
service's clock), member = ``{game id}:{version}``. ``COMMIT`` removes the member of the
version it replaces and adds the new version's deadline in the same script, so the set
always holds at most one live entry per game and a move made in time voids the old one.
``CLAIM`` hands due entries to a sweeper (``service.arena.deadlines``).

Events are not stored: a game is (players, seed, variants, log), so events are recomputed
by replaying, which keeps a game to a few hundred bytes.

Retry memory (``Idempotency-Key``), one hash per game, ``{p}game:{id}:idem``: field = bot
id, value = that bot's latest keyed action in the game, ``{len}:{key}|{body hash}|{ply}|
{seat}|{deadline}|{updated}|{version}`` (``retry_tag``, ``retry_record``). A key's scope is
(bot, game): the same key in another game is another request; in the same game with
another body (or version, or If-Match), 422. ``COMMIT`` reads and writes it with the game,
so a retry and its twin never both apply. A bot's next keyed action replaces its record (a
bot retries its latest action, not older ones): at most one record per bot and game. No
expiry while the game is live; the commit that finishes the game gives it
``ARENA_RETRY_GRACE`` seconds (default 600); after that a retry of the game's last move is
answered from the game itself (``Arena._last_move_answer``). Memory follows the live
games, not the history. (Issue 13's cluster layout will give this key the game's hash tag
with the game's other keys.)

Shared keys: ``{p}games:all`` and ``{p}games:{status}`` (sorted sets, score = creation
sequence, for listing); ``{p}games:seq``; ``{p}bot:{id}`` (hash: name, created);
``{p}token:{sha256}`` → bot id; ``{p}bot:{id}:turns`` (set of games where it is that bot's
turn); ``{p}rl:{who}:{window}`` (rate
counters). One channel per game, ``{p}game:{id}:changed``, carries
``{version}:{seat in turn}:{bot}`` (the seat empty when nobody is to act; the bot when
the game has just become that bot's turn, i.e. joined its turn set, else empty),
followed, when the change wrote a new state and left the meta as it was, by
``:{status}:{deadline or ''}:{updated}:{state json}`` — everything of the new version but
the meta and the log, so a waiter that knows the meta answers without reading
(``service.storage.wakeups.game_message``). Each process hears every game channel through one
listener (``service.storage.wakeups``), which also wakes the bots waiting for a turn in any game
(``GET /bots/me/turns``): one message per change reaches each process, not one per game
and another per bot.

Every change to a game goes through ``COMMIT`` (a Lua script): it checks the version the
caller read is still current, then writes, bumps the version, moves indexes, records the
retry and publishes — all or nothing, so concurrent writers never both apply.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import redis

from service import jsonio
from service.engine import State, Variants

# Seconds the retry memory of a finished game is kept (``ARENA_RETRY_GRACE``): longer than
# any client's retries (``clients.api.RetryPolicy`` gives up within about a minute) and
# than a Redis restart, short enough that finished games cost nothing after it.
RETRY_GRACE_S = 600

# KEYS[1] game hash, KEYS[2] the game's retry memory (``{p}game:{id}:idem``), KEYS[3]
# index prefix, KEYS[4] bot-turns key prefix, KEYS[5] channel, KEYS[6] deadlines sorted set.
# ARGV: expected version, state json ('' keep), meta json ('' keep), action char ('' none),
# new status, retry record ('' none: the record without its tag and version), the
# memory's grace seconds once the game is finished, old turn bot, new turn bot, game id,
# new deadline ('' none), seat in turn after the change ('' none or not said).
# KEYS[7] rate counter ('' none), ARGV[13] its window seconds, ARGV[14] its limit.
# ARGV[15] '1' when the game may have a deadline to move (it has a move limit): a game
# without one touches neither the deadlines set nor the hash's deadline field. The turn
# sets change (and the message names the new bot) only when the bot in turn changes.
# ARGV[16] the commit's time (unix seconds), kept as the hash's ``updated``.
# ARGV[17] the acting bot (its field in the memory), ARGV[18] the key's tag (``{len}:{key}|``,
# '' no key): a record of this bot that starts with the tag is a retry, answered from it.
# Returns {1, new_version} | {0, current_version} | {2, stored retry record}
# | {3, count, ttl_ms} (the rate limit is exceeded: nothing written).
COMMIT = """
if KEYS[7] and KEYS[7] ~= '' then
  local n = redis.call('INCR', KEYS[7])
  if n == 1 then redis.call('PEXPIRE', KEYS[7], tonumber(ARGV[13]) * 1000) end
  if n > tonumber(ARGV[14]) then return {3, n, redis.call('PTTL', KEYS[7])} end
end
local v = redis.call('HGET', KEYS[1], 'version')
if not v then return {-1, 0} end
if ARGV[18] ~= '' then
  local seen = redis.call('HGET', KEYS[2], ARGV[17])
  if seen and string.sub(seen, 1, #ARGV[18]) == ARGV[18] then return {2, seen} end
end
if v ~= ARGV[1] then return {0, tonumber(v)} end
local nv = tonumber(v) + 1
local fields = {'version', nv, 'updated', ARGV[16]}
if ARGV[2] ~= '' then fields[#fields + 1] = 'state'; fields[#fields + 1] = ARGV[2] end
if ARGV[3] ~= '' then fields[#fields + 1] = 'meta'; fields[#fields + 1] = ARGV[3] end
if ARGV[4] ~= '' then
  fields[#fields + 1] = 'log'
  fields[#fields + 1] = (redis.call('HGET', KEYS[1], 'log') or '') .. ARGV[4]
end
local old = redis.call('HGET', KEYS[1], 'status')
if old ~= ARGV[5] then
  local score = redis.call('ZSCORE', KEYS[3] .. 'all', ARGV[10])
  redis.call('ZREM', KEYS[3] .. old, ARGV[10])
  if score then redis.call('ZADD', KEYS[3] .. ARGV[5], score, ARGV[10]) end
  fields[#fields + 1] = 'status'
  fields[#fields + 1] = ARGV[5]
end
if ARGV[11] ~= '' then
  fields[#fields + 1] = 'deadline'
  fields[#fields + 1] = ARGV[11]
end
redis.call('HSET', KEYS[1], unpack(fields))
if ARGV[15] ~= '' then
  redis.call('ZREM', KEYS[6], ARGV[10] .. ':' .. v)
  if ARGV[11] ~= '' then
    redis.call('ZADD', KEYS[6], ARGV[11], ARGV[10] .. ':' .. nv)
  else
    redis.call('HDEL', KEYS[1], 'deadline')
  end
end
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[17], ARGV[18] .. ARGV[6] .. '|' .. nv)
end
if old ~= ARGV[5] and ARGV[5] == 'finished' then
  redis.call('EXPIRE', KEYS[2], tonumber(ARGV[7]))
end
local new_turn = ''
if ARGV[8] ~= ARGV[9] then
  if ARGV[8] ~= '' then redis.call('SREM', KEYS[4] .. ARGV[8] .. ':turns', ARGV[10]) end
  if ARGV[9] ~= '' then
    redis.call('SADD', KEYS[4] .. ARGV[9] .. ':turns', ARGV[10])
    new_turn = ARGV[9]
  end
end
local msg = nv .. ':' .. (ARGV[12] or '') .. ':' .. new_turn
if ARGV[2] ~= '' and ARGV[3] == '' then
  msg = msg .. ':' .. ARGV[5] .. ':' .. ARGV[11] .. ':' .. ARGV[16] .. ':' .. ARGV[2]
end
redis.call('PUBLISH', KEYS[5], msg)
return {1, nv}
"""

# KEYS[1] deadlines. ARGV: now, lease-until, max entries. Due entries (score <= now) are
# pushed to lease-until and returned: one sweeper gets each; if it dies before acting,
# the entry falls due again when the lease ends and another sweeper takes it.
CLAIM = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, m in ipairs(due) do redis.call('ZADD', KEYS[1], 'XX', ARGV[2], m) end
return due
"""

# KEYS[1] counter. ARGV[1] window seconds. Returns {count, ttl_ms}.
RATE = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) * 1000) end
return {n, redis.call('PTTL', KEYS[1])}
"""


# KEYS[1] the token's key, KEYS[2] the client address's failure counter. ARGV[1] the
# failure limit (0: none), ARGV[2] its window seconds. Returns {1, bot id} | {0, failures}
# (unknown: counted) | {2, ttl_ms} (the address is over its limit: not looked up).
# Only the address's counter is ever written, never anything per guessed token.
AUTH = """
if ARGV[1] ~= '0' then
  local n = tonumber(redis.call('GET', KEYS[2]) or '0')
  if n >= tonumber(ARGV[1]) then return {2, redis.call('PTTL', KEYS[2])} end
end
local bot = redis.call('GET', KEYS[1])
if bot then return {1, bot} end
if ARGV[1] == '0' then return {0, 0} end
local n = redis.call('INCR', KEYS[2])
if n == 1 then redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[2]) * 1000) end
return {0, n}
"""


# KEYS[1] rate counter ('' none), KEYS[2] game hash, KEYS[3] the game's retry memory ('' none).
# ARGV[1] rate window seconds, ARGV[2] the bot whose record to read. One round trip for
# what a hot request reads first:
# returns {count, ttl_ms, the bot's retry record or '', the hash's fields and values...}.
READ = """
local n, ttl = 0, 0
if KEYS[1] ~= '' then
  n = redis.call('INCR', KEYS[1])
  if n == 1 then redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) * 1000) end
  ttl = redis.call('PTTL', KEYS[1])
end
local out = {n, ttl, ''}
if KEYS[3] ~= '' then out[3] = redis.call('HGET', KEYS[3], ARGV[2]) or '' end
local h = redis.call('HGETALL', KEYS[2])
for i = 1, #h do out[#out + 1] = h[i] end
return out
"""


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
GAME_CACHE_MAX = 4096


def token_hash(token: str) -> str:
    """Tokens are stored only as this hash: a leaked database holds no usable token."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass
class Game:
    """One game as read from Redis (the hash, decoded)."""

    id: str
    version: int
    status: str
    meta: dict[str, Any]
    state_json: str
    log: str
    deadline: float | None = None
    # When this version was committed (unix seconds, the committing service's clock);
    # None for a game written before the service kept it.
    updated: float | None = None
    # The decoded state, once someone asked (states are copy-on-write: never changed in
    # place, so one decoded copy serves every request that shares this Game).
    _state: State | None = field(default=None, repr=False, compare=False)

    @property
    def state(self) -> State:
        state = self._state
        if state is None:
            state = self._state = State.from_dict(jsonio.loads(self.state_json))
        return state

    @property
    def actions(self) -> list[int]:
        return [ord(ch) - 48 for ch in self.log]

    @property
    def players(self) -> int:
        return int(self.meta["players"])

    @property
    def seats(self) -> list[str | None]:
        return self.meta["seats"]

    @property
    def variants(self) -> Variants:
        return Variants.from_dict(self.meta.get("variants") or {})


class GameCache:
    """The last known version of recently used games, per process: a guess that saves
    the read before an action, never a source of truth.

    An action taken on a cached game commits with a compare-and-set on its version, so a
    stale entry costs a retry (a fresh read), never a wrong state. Entries are filled by
    this process's reads and commits and moved on by the game-channel messages its
    listener hears (``heard``): a message one version ahead that carries the state
    replaces the entry; any other newer message drops it. An entry is used only while
    the listener that was live when it was stored still runs (``generation``): with no
    listener, or after a reconnect, messages may have been missed.
    """

    def __init__(self, size: int = GAME_CACHE_MAX) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._games: OrderedDict[str, tuple[Game, int]] = OrderedDict()

    def get(self, game_id: str, generation: int | None) -> Game | None:
        if generation is None:
            return None
        with self._lock:
            entry = self._games.get(game_id)
            if entry is None or entry[1] != generation:
                return None
            self._games.move_to_end(game_id)
            return entry[0]

    def at(self, game_id: str, version: int) -> Game | None:
        """The cached game if it is at ``version`` (a version's content never changes, so
        no generation check is needed): lets waiters share one decoded state."""
        entry = self._games.get(game_id)
        if entry is None or entry[0].version != version:
            return None
        return entry[0]

    def put(self, game: Game, generation: int | None) -> None:
        """Keep ``game`` unless a newer version is known already."""
        if generation is None:
            return
        with self._lock:
            entry = self._games.get(game.id)
            if entry is not None and entry[1] == generation and entry[0].version >= game.version:
                known = entry[0]
                if known.version == game.version and known._state is None:
                    # the listener stored this version from its message before the commit
                    # that made it could: keep the committer's decoded state with it
                    known._state = game._state
                return
            self._games[game.id] = (game, generation)
            self._games.move_to_end(game.id)
            if len(self._games) > self.size:
                self._games.popitem(last=False)

    def heard(self, game_id: str, msg: Any, generation: int) -> None:
        """A game-channel message (``service.storage.wakeups.GameMessage``, None if unreadable)."""
        with self._lock:
            entry = self._games.get(game_id)
            if entry is None:
                return
            old, gen = entry
            if msg is not None and msg.version <= old.version and gen == generation:
                return
            if (msg is None or gen != generation or msg.version != old.version + 1
                    or msg.state_json is None):
                del self._games[game_id]
                return
            self._games[game_id] = (Game(game_id, msg.version, msg.status, old.meta,
                                         msg.state_json, None,  # type: ignore[arg-type]
                                         msg.deadline, msg.updated),
                                    generation)

    def clear(self) -> None:
        with self._lock:
            self._games.clear()


class Store:
    """Thin typed access to the keys above; no game rules here."""

    def __init__(self, client: redis.Redis, prefix: str,
                 retry_grace_s: int = RETRY_GRACE_S) -> None:
        self.r = client
        self.p = prefix
        self.idem_grace_s = retry_grace_s
        self._commit = client.register_script(COMMIT)
        self._rate = client.register_script(RATE)
        self._claim = client.register_script(CLAIM)
        self._read = client.register_script(READ)
        self._auth = client.register_script(AUTH)
        # token -> bot id. Safe across processes: a token's bot never changes (and no
        # token is ever revoked), so a cached answer cannot go stale.
        self._tokens: dict[str, str] = {}
        self.games = GameCache()

    # --- keys --------------------------------------------------------------------------

    def game_key(self, game_id: str) -> str:
        return f"{self.p}game:{game_id}"

    def retry_key(self, game_id: str) -> str:
        """The game's retry memory (see the module docstring)."""
        return f"{self.p}game:{game_id}:idem"

    def game_channel(self, game_id: str) -> str:
        return f"{self.p}game:{game_id}:changed"

    def bot_turn_channel(self, bot_id: str) -> str:
        """What a bot waiting for its turn in any game waits on: a channel of the
        process's listener, fed from game-channel messages (nothing is published to it
        in Redis)."""
        return f"{self.p}bot:{bot_id}:turn"

    @property
    def deadlines_key(self) -> str:
        return f"{self.p}deadlines"

    # --- bots ----------------------------------------------------------------------------

    def create_bot(self, name: str, person: bool = False) -> tuple[dict[str, Any], str]:
        """A new bot and its token; the token is returned here once and never stored.
        ``person``: the account is a person's (``is_person``)."""
        bot_id = secrets.token_hex(6)
        token = secrets.token_urlsafe(32)
        created = int(time.time())
        fields_: dict[str, Any] = {"name": name, "created": created}
        if person:
            fields_["person"] = 1
        pipe = self.r.pipeline(transaction=True)
        pipe.hset(f"{self.p}bot:{bot_id}", mapping=fields_)
        pipe.set(f"{self.p}token:{token_hash(token)}", bot_id)
        pipe.execute()
        return {"id": bot_id, "name": name, "created": created}, token

    def get_bot(self, bot_id: str) -> dict[str, Any] | None:
        raw = self.r.hgetall(f"{self.p}bot:{bot_id}")
        if not raw:
            return None
        return {"id": bot_id, "name": raw[b"name"].decode(), "created": int(raw[b"created"])}

    def is_person(self, bot_id: str) -> bool:
        """Whether the account was registered for a person (``POST /bots`` with
        ``person``), not a program."""
        return bool(self.r.hexists(f"{self.p}bot:{bot_id}", "person"))

    def bot_names(self, bot_ids: list[str]) -> dict[str, str]:
        ids = sorted({b for b in bot_ids if b})
        if not ids:
            return {}
        pipe = self.r.pipeline(transaction=False)
        for b in ids:
            pipe.hget(f"{self.p}bot:{b}", "name")
        return {b: (n.decode() if n else "") for b, n in zip(ids, pipe.execute())}

    def bot_for_token(self, token: str) -> str | None:
        bot_id = self._tokens.get(token)
        if bot_id is not None:
            return bot_id
        raw = self.r.get(f"{self.p}token:{token_hash(token)}")
        if not raw:
            return None
        if len(self._tokens) >= TOKEN_CACHE_MAX:
            self._tokens.clear()
        bot_id = self._tokens[token] = raw.decode()
        return bot_id

    def guarded_bot_for_token(self, token: str, who: str, limit: int,
                              window_s: int) -> tuple[str | None, int]:
        """``bot_for_token`` for a request from ``who`` (a client address), which may fail
        ``limit`` times per ``window_s`` (0: no limit): (bot id or None, 0), or (None,
        ms until the window ends) when it is over the limit and the token was not looked
        up. One round trip (``AUTH``), as the plain lookup; a cached token takes none."""
        bot_id = self._tokens.get(token)
        if bot_id is not None:
            return bot_id, 0
        slot = int(time.time()) // window_s if limit else 0
        code, value = self._auth(keys=[f"{self.p}token:{token_hash(token)}",
                                       f"{self.p}rl:{who}:{slot}"], args=[limit, window_s])
        if int(code) == 2:
            return None, max(1, int(value))
        if int(code) != 1:
            return None, 0
        if len(self._tokens) >= TOKEN_CACHE_MAX:
            self._tokens.clear()
        bot_id = self._tokens[token] = value.decode()
        return bot_id, 0

    def bot_turns(self, bot_id: str) -> list[str]:
        return sorted(m.decode() for m in self.r.smembers(f"{self.p}bot:{bot_id}:turns"))

    # --- games ---------------------------------------------------------------------------

    def create_game(
        self, meta: dict[str, Any], state: State, status: str, turn_bot: str | None,
        deadline: float | None = None,
    ) -> Game:
        pipe = self.r.pipeline(transaction=True)
        game = self.add_game(pipe, meta, state, status, turn_bot, deadline)
        pipe.execute()
        return game

    def add_game(
        self, pipe: Any, meta: dict[str, Any], state: State, status: str,
        turn_bot: str | None, deadline: float | None = None,
    ) -> Game:
        """Queue a new game's writes on ``pipe`` (a MULTI pipeline), so a caller can make
        the game part of a larger transaction (a tournament slot). Nothing exists until
        the pipeline executes; an aborted transaction leaves only an unused sequence."""
        game_id = secrets.token_hex(6)
        seq = self.r.incr(f"{self.p}games:seq")
        state_json = jsonio.dumps(state.to_dict())
        meta_json = jsonio.dumps(meta)
        updated = commit_time()
        fields_ = {"state": state_json, "meta": meta_json, "status": status, "version": 1,
                   "log": "", "updated": _stamp(updated)}
        if deadline is not None:
            fields_["deadline"] = _score(deadline)
            pipe.zadd(self.deadlines_key, {f"{game_id}:1": deadline})
        pipe.hset(self.game_key(game_id), mapping=fields_)
        pipe.zadd(f"{self.p}games:all", {game_id: seq})
        pipe.zadd(f"{self.p}games:{status}", {game_id: seq})
        if turn_bot:
            pipe.sadd(f"{self.p}bot:{turn_bot}:turns", game_id)
            pipe.publish(self.game_channel(game_id), f"1::{turn_bot}")
        return Game(game_id, 1, status, meta, state_json, "", deadline, updated)

    def get_game(self, game_id: str) -> Game | None:
        if pending_hit.get() is not None:
            return self.get_game_and_idem(game_id)[0]
        return self._game(game_id, self.r.hgetall(self.game_key(game_id)))

    def get_game_and_idem(self, game_id: str, bot_id: str = "", idem: str = ""
                          ) -> tuple[Game | None, str | None]:
        """The game and ``bot_id``'s retry record for the key ``idem`` (None unless it is
        that key's, see ``retry_record``) read at one instant (one Lua script): both from before
        a concurrent action, or both from after it. A pending rate-limit hit is counted
        (and checked) in the same round trip."""
        hit = pending_hit.get()
        rate_key, window = "", 0
        if hit is not None:
            pending_hit.set(None)
            window = hit.window_s
            rate_key = f"{self.p}rl:{hit.who}:{int(time.time()) // window}"
        memory = self.retry_key(game_id) if idem else ""
        out = self._read(keys=[rate_key, self.game_key(game_id), memory], args=[window, bot_id])
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
        the record kept for the same key instead, its tag removed)."""
        if updated is None:
            updated = commit_time()
        keys = [
            self.game_key(game.id),
            self.retry_key(game.id),
            f"{self.p}games:",
            f"{self.p}bot:",
            self.game_channel(game.id),
            self.deadlines_key,
        ]
        hit = pending_hit.get()
        window = limit = 0
        if hit is not None and hit.limit:  # the request's rate-limit hit, counted here
            pending_hit.set(None)
            window, limit = hit.window_s, hit.limit
            keys.append(f"{self.p}rl:{hit.who}:{int(time.time()) // window}")
        else:
            hit = None
            keys.append("")
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
            "1" if (deadline is not None or game.deadline is not None
                    or game.meta.get("move_limit")
                    or (meta is not None and meta.get("move_limit"))) else "",
            _stamp(updated),
            idem_bot,
            retry_tag(idem_key) if idem_key else "",
        ]
        out = self._commit(keys=keys, args=args)
        code, value = int(out[0]), out[1]
        if code == 2:
            value = retry_record(value, idem_key)
        if code == 3:
            assert hit is not None
            hit.check(int(out[1]), int(out[2]))  # raises
        if code == 1 and cache_generation is not None:
            self.games.put(Game(game.id, int(value), status,
                                meta if meta is not None else game.meta,
                                state_json or game.state_json, None,  # type: ignore[arg-type]
                                deadline, updated, state if state is not None else game._state),
                           cache_generation)
        return code, value

    def list_games(
        self, status: str | None, limit: int, cursor: int | None
    ) -> tuple[list[Game], int | None]:
        """Newest first; ``cursor`` is the creation sequence to continue below."""
        index = f"{self.p}games:{status or 'all'}"
        hi = f"({cursor}" if cursor is not None else "+inf"
        rows = self.r.zrevrangebyscore(index, hi, "-inf", start=0, num=limit + 1, withscores=True)
        more = len(rows) > limit
        rows = rows[:limit]
        pipe = self.r.pipeline(transaction=False)
        for gid, _ in rows:
            pipe.hgetall(self.game_key(gid.decode()))
        games = []
        for (gid, _), raw in zip(rows, pipe.execute()):
            game = self._game(gid.decode(), raw)
            if game is not None:
                games.append(game)
        next_cursor = int(rows[-1][1]) if more and rows else None
        return games, next_cursor

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

    def drop_deadline(self, game_id: str, version: int) -> None:
        """Forget an entry whose version is no longer current (its timeout is void)."""
        self.r.zrem(self.deadlines_key, f"{game_id}:{version}")

    # --- rate limits ---------------------------------------------------------------------

    def hit(self, who: str, window_s: int) -> tuple[int, int]:
        """Count one request for ``who`` in the current fixed window: (count, ms left)."""
        slot = int(time.time()) // window_s
        n, ttl = self._rate(keys=[f"{self.p}rl:{who}:{slot}"], args=[window_s])
        return int(n), int(ttl)

    def peek(self, who: str, window_s: int) -> tuple[int, int]:
        """``who``'s count in the current window without counting: (count, ms left)."""
        key = f"{self.p}rl:{who}:{int(time.time()) // window_s}"
        pipe = self.r.pipeline(transaction=False)
        pipe.get(key)
        pipe.pttl(key)
        n, ttl = pipe.execute()
        return int(n or 0), max(1, int(ttl))


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
