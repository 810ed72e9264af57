"""Move deadlines: the default action a late seat gets, and the sweeper that applies it.

A game created with a ``move_limit`` (seconds per decision) has, while a seat is to act,
one entry ``{game id}:{version}`` in the sorted set ``{p}deadlines`` scored by the
deadline. ``Store.COMMIT`` swaps that entry atomically with every change of the game, so
the set never lags the game.

The sweeper runs in **every** gunicorn worker (``gunicorn_conf.post_worker_init`` starts
it; under gevent it is a greenlet) and duplicates are harmless by construction:

- ``Store.claim_due`` (Lua: ZRANGEBYSCORE + ZADD XX) hands each due entry to exactly one
  sweeper and leases it (pushes its score ``LEASE_S`` into the future). A sweeper that dies
  before acting loses nothing: the entry falls due again when the lease ends.
- The default action goes through ``Arena.timeout``: the game's ordinary compare-and-set
  with the version the deadline was set for. A move that arrived in time bumped the
  version, so the timeout is void; two sweepers holding the same entry (after a lease ran
  out) cannot both apply, since only one compare-and-set on a version succeeds.
- Enforcement needs no client: the sweeper reads only Redis.

Default actions (documented in ``openapi.yaml``): the least committal legal choice.

- ``stand_or_beg`` → ``stand`` (keep the kicked trump; begging could hand over a point);
- ``give_one_or_run`` → ``give_one`` when legal (one point for the beggar's team, a known
  cost), else ``run_pack``;
- ``play`` → the lowest legal card: lowest rank (Two lowest, Ace highest), ties by suit
  in the order clubs, diamonds, hearts, spades.

The sweeper also re-checks open tournaments every ``REPAIR_S`` seconds (a crash between
finishing a game and scheduling the next is repaired there; see
``service.arena.tournaments.service``), and every ``RETAIN_S`` seconds runs the retention
pass: casual games expire on their own (their keys' TTL, set by the commit that gives them
their status), and the pass removes their entries from the game indexes
(``Store.forget_expired``, a batch a pass, going round ``games:all``; any number of
sweepers at once, as a removal of what is gone is).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from service.arena.core.loop import BackgroundLoop
from service.engine import GIVE_ONE, PLAY, RUN_PACK, STAND, STAND_OR_BEG, State, legal_actions

if TYPE_CHECKING:
    from service.arena.games.commands import Arena

log = logging.getLogger(__name__)

SWEEP_S = 0.2  # how often due deadlines are looked for: a timeout fires within this late
REPAIR_S = 2.0  # how often open tournaments are re-checked
# How often a cluster's cross-game indexes are rebuilt from the per-game truth (only a
# process killed between a commit's steps leaves them off, and readers repair what they
# read meanwhile): a pass reads every live game, so not every repair pass.
RECONCILE_S = 30.0
LEASE_S = 10.0  # a claimed entry is retried by any sweeper after this long
# How often the retention pass looks at the next batch of ``games:all`` (1,000 entries):
# 12,000 entries a minute per worker, a round of a million games in under 1.5 hours per
# worker, for one pipelined EXISTS per entry.
RETAIN_S = 5.0


def default_action(state: State) -> int:
    """The action a seat gets when its time runs out (see the module docstring)."""
    legal = legal_actions(state)
    if state.phase == STAND_OR_BEG:
        return STAND
    if state.phase == PLAY:
        return min(legal, key=lambda c: (c % 13, c // 13))
    return GIVE_ONE if GIVE_ONE in legal else RUN_PACK


class Sweeper(BackgroundLoop):
    """Applies due timeouts every ``sweep_s`` and runs the repairs every ``repair_s``;
    one per worker, any number at once. The repairs are the domains above the games
    (tournaments' ``advance_all``): passed in, so the games import none of them."""

    thread_name = "allfours-sweeper"
    what = "sweeper"
    log = logging.getLogger(__name__)

    def __init__(self, arena: Arena, repairs: Sequence[Callable[[], Any]] = (),
                 sweep_s: float = SWEEP_S, repair_s: float = REPAIR_S,
                 retain_s: float = RETAIN_S) -> None:
        super().__init__()
        self.arena = arena
        self.repairs = list(repairs)
        self.sweep_s = sweep_s
        self.repair_s = repair_s
        self.retain_s = retain_s
        self._next_reconcile = 0.0
        self._next_retain = 0.0
        self._retain_after = 0  # where in ``games:all`` the next retention pass goes on
        self._suspects: set[str] = set()  # cluster: games seen missing once

    def sweep_once(self, now: float | None = None) -> int:
        """Claim the due deadlines and apply their default actions; how many applied."""
        store = self.arena.store
        now = time.time() if now is None else now
        applied = 0
        for game_id, version in store.claim_due(now, LEASE_S):
            try:
                done = self.arena.timeout(game_id, version, default_action, now)
            except Exception:
                log.exception("timeout for %s:%s failed; retried after the lease", game_id,
                              version)
                continue
            if done:
                applied += 1
            elif not store.drop_deadline(game_id, version):  # void unless still live
                log.warning("timeout for %s:%s not applied though it is the game's live "
                            "deadline; its entry is kept for the next pass", game_id, version)
        return applied

    def repair_once(self) -> None:
        # in a cluster: the cross-game indexes from the per-game truth (a process killed
        # between a commit's steps left an extra entry; service.storage.keys)
        if self.arena.store.cluster and time.monotonic() >= self._next_reconcile:
            self._next_reconcile = time.monotonic() + RECONCILE_S
            self.arena.store.reconcile()
        for repair in self.repairs:
            repair()
        self.arena.invitations.expire_due()  # games whose invitations went unanswered

    def retain_once(self) -> int:
        """One batch of the retention pass (see the module docstring): entries removed."""
        self._retain_after, removed = self.arena.store.forget_expired(
            self._retain_after, suspects=self._suspects)
        return removed

    def pass_once(self) -> None:
        self.sweep_once()
        if self.due(self.repair_s):
            self.repair_once()
        if self.retain_s and time.monotonic() >= self._next_retain:
            self._next_retain = time.monotonic() + self.retain_s
            self.retain_once()

    def idle_s(self) -> float:
        return self.sweep_s


def start_sweeper(app: Any) -> Sweeper:
    """Start a sweeper for a Flask app built by ``create_app`` (kept in its extensions)."""
    tournaments = app.extensions.get("tournaments")
    repairs = [tournaments.advance_all] if tournaments is not None else []
    sweeper = Sweeper(app.extensions["arena"], repairs)
    app.extensions["sweeper"] = sweeper
    return sweeper.start()
