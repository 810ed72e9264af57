"""A game as read from Redis (``Game``), and the per-process cache of recently used games
(``GameCache``): a guess that saves a read before an action, never a source of truth."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from service import jsonio
from service.engine import State, Variants

GAME_CACHE_MAX = 4096


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
    # Cluster mode: the game's creation sequence (its score in the status indexes).
    seq: int | None = None

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
                                         msg.deadline, msg.updated, seq=old.seq),
                                    generation)

    def clear(self) -> None:
        with self._lock:
            self._games.clear()
