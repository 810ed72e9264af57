"""Acting on a game: a bot's action (``Acting.perform``: one ``ActRequest`` in, one
``ActOutcome`` out) and the clock's (``Acting.timeout``). A part of ``Arena`` (which
inherits it, as it inherits ``Waiting``).

Read, apply the engine, then compare-and-set: when another write got in first the game
is re-read and the action judged again on the position it now meets, so it either
applies there or is refused — never both, never lost. An ``Idempotency-Key`` makes a
retry answer as the first request was answered (``_replayed``), nothing applied again.
The move that finishes a game carries why it ended in its own commit and goes out
through the one door for every end (``service.arena.games.ending``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from service import metrics
from service.arena.core import clock
from service.arena.core.problems import Problem
from service.arena.core.status import (
    ACTIVE,
    FINISHED,
    WAITING,
    deadline_for,
    status_of,
    turn_bot,
)
from service.arena.games.ending import played_meta
from service.engine import (
    IllegalAction,
    State,
    action_name,
    apply,
    new_game,
    parse_action,
)
from service.jsonio import dumps
from service.storage.commits import commit_time
from service.storage.store import Game

CAS_ATTEMPTS = 50


@dataclass(frozen=True)
class ActRequest:
    """One bot's action on one game, as the HTTP layer (or a webhook's answer) asks it.
    ``body``: ``action`` and, optionally, ``version`` (the version it decided on) and
    ``seat``; ``if_match``: the ``If-Match`` version; ``idem``: the ``Idempotency-Key``
    (scoped to the bot and the game); ``wait`` > 0: answer when it is this bot's turn
    again (at any seat it holds), the game is over, or ``wait`` seconds have passed."""

    game_id: str
    bot_id: str
    body: dict[str, Any]
    if_match: int | None = None
    idem: str | None = None
    wait: float = 0.0


@dataclass(frozen=True)
class ActOutcome:
    """The answer to an ``ActRequest``: the view, whether nothing was applied because it
    was a retry of an applied action (``replayed``: the route says
    ``Idempotent-Replayed``), and when the action was applied (``committed``,
    ``time.perf_counter()``, before any waiting; None if this request applied nothing)."""

    view: dict[str, Any]
    replayed: bool = False
    committed: float | None = None


@dataclass
class _Run:
    """An ``ActRequest`` on its way: what every compare-and-set attempt shares."""

    req: ActRequest
    action: int
    body_hash: str
    waiter: Any = None
    wait_until: float = 0.0
    generation: int | None = None

    @property
    def idem_key(self) -> str:
        return self.req.idem or ""  # scoped to (bot, game): the record is the game's, by bot


@dataclass(frozen=True)
class _Judged:
    """An action judged legal on one read of the game (``Acting._judge``)."""

    state: State
    new_state: State
    seat: int
    status: str
    deadline: float | None
    meta: dict[str, Any] | None  # the new meta if the seat drew on its time bank, else None


class Acting:
    """The acting half of ``Arena`` (which inherits it): see the module docstring."""

    def act(self, game_id: str, bot_id: str, body: dict[str, Any], if_match: int | None,
            idem: str | None, wait: float = 0.0) -> dict[str, Any]:
        """``perform`` for callers that want the view only (a webhook's answer, tools)."""
        return self.perform(ActRequest(game_id, bot_id, body, if_match, idem, wait)).view

    def perform(self, req: ActRequest) -> ActOutcome:
        """Apply one action for ``req.bot_id``: the new view (see ``ActOutcome``).

        With ``wait`` the waiter is registered before the commit, so no later change
        slips by unheard. A suspended bot (``Owners.is_suspended``: an in-process set,
        refreshed once a second) is refused here too, so neither its token nor its
        webhook acts for it."""
        if self.owners.is_suspended(req.bot_id):
            reason = self.owners.suspension(req.bot_id) or "suspended by the operator"
            raise Problem("suspended", f"this bot is suspended: {reason}")
        run = _Run(req, parse_action(req.body["action"]), hashlib.sha256(dumps(
            {**req.body, "if_match": req.if_match}).encode()).hexdigest()[:32])
        if req.wait <= 0:
            return self._act(run)
        metrics.LIVE.polls += 1
        try:
            with self.wakeups.waiter(self.store.game_channel(req.game_id)) as waiter:
                run.waiter, run.wait_until = waiter, time.monotonic() + req.wait
                return self._act(run)
        finally:
            metrics.LIVE.polls -= 1

    def _act(self, run: _Run) -> ActOutcome:
        """The compare-and-set loop: a cached game first (a guess), then fresh reads."""
        req = run.req
        run.generation = self.wakeups.live_generation(self.store.game_channel(req.game_id))
        cached = self.store.games.get(req.game_id, run.generation)
        for _ in range(CAS_ATTEMPTS):
            if cached is not None:
                outcome = self._try_act(run, cached, guess=True)
                if outcome is not None:
                    return outcome
                cached = None  # stale, or refused on a guess: judge again on a fresh read
                continue
            if run.idem_key:
                found, stored = self.store.get_game_and_idem(req.game_id, req.bot_id,
                                                             run.idem_key)
                if found is None:
                    raise Problem("not-found", "no such game")
                game = found
            else:
                game, stored = self.get(req.game_id), None
            if stored:
                return self._replayed(game, stored, run)
            if run.idem_key and game.status == FINISHED and self._retry_memory_gone(game):
                last = self._last_move_answer(game, run)
                if last is not None:
                    return ActOutcome(last, replayed=True)
            self.store.games.put(game, run.generation)
            outcome = self._try_act(run, game)
            if outcome is not None:
                return outcome
        raise Problem("service-unavailable", "too much contention; retry",
                      headers={"Retry-After": "1"})

    def _try_act(self, run: _Run, game: Game, guess: bool = False) -> ActOutcome | None:
        """Judge the action on ``game`` and compare-and-set it: the outcome, or None when
        the game had moved on (read it again and retry). A cached ``game`` is a ``guess``:
        a refusal judged on it is None too (judge again on a fresh read), never an answer."""
        req = run.req
        try:
            j = self._judge(game, run)
        except (Problem, IllegalAction):
            if guess:
                return None
            raise
        meta = j.meta
        if j.status == FINISHED:  # the last move: why the game ended goes in its commit
            if game.log is None:  # a game cached from a wake-up carries no action log
                if guess:
                    return None  # judged again on a fresh read, which has it
                raw = self.store.r.hget(self.store.game_key(game.id), "log")
                # read after the version: if the game moved on, the commit below fails
                game = dataclasses.replace(game, log=(raw or b"").decode())
            meta = played_meta(game, run.action, meta)
        if meta is not None:  # the seat drew on its time bank: a copy, the cache keeps game
            game = dataclasses.replace(game, meta=meta)
        old_bot = turn_bot(j.state, game.seats, game.status)
        new_bot = turn_bot(j.new_state, game.seats, j.status)
        updated = commit_time()
        bank = clock.bank_of(game.meta, j.seat)
        code, value = self.store.commit(
            game,
            state=j.new_state,
            meta=meta,
            action=run.action,
            status=j.status,
            idem_key=run.idem_key,
            idem_value=f"{run.body_hash}|{j.new_state.ply}|{j.seat}|{j.deadline or ''}"
            f"|{updated:.6f}" + (f"|{bank}" if bank is not None else ""),
            idem_bot=req.bot_id,
            old_turn_bot=old_bot,
            new_turn_bot=new_bot,
            deadline=j.deadline,
            turn_seat=j.new_state.turn if j.status == ACTIVE else None,
            cache_generation=run.generation,
            updated=updated,
        )
        if code == 1:
            metrics.action_applied()
            self._tell_local_waiters(req.game_id, int(value),
                                     new_bot if new_bot != old_bot else None)
            if j.status == FINISHED:
                self.ending.announce(game)
            committed = time.perf_counter()
            if run.waiter is not None:
                view = self._after_action(run.waiter, run.wait_until, game, j.new_state,
                                          j.seat, int(value), j.status, j.deadline, updated,
                                          req.bot_id)
            else:
                view = self.render(game, j.new_state, j.seat, int(value), j.status,
                                   j.deadline, updated)
            return ActOutcome(view, committed=committed)
        if code == 2:  # a retry with this key won the race: answer as it was answered
            return self._replayed(self.get(req.game_id), value, run)
        if code == -1:
            raise Problem("not-found", "no such game")
        return None

    def _judge(self, game: Game, run: _Run) -> _Judged:
        """The action judged on ``game`` (raises when refused)."""
        req = run.req
        if game.status == WAITING:
            raise Problem("game-not-started", "the game is waiting for players")
        if game.status == FINISHED and not game.state.is_over:
            # ended before its end: see service.arena.games.ending
            raise IllegalAction("R22", "the game is over: its tournament ended it, it was "
                                "forfeited, or it was cancelled (an invitation declined or "
                                "expired); its view's `ended` says why")
        state = game.state
        seat = self._acting_seat(game, req.bot_id, req.body.get("seat"), state)
        if req.if_match is not None and req.if_match != game.version:
            raise Problem("precondition-failed",
                          f"If-Match is {req.if_match}; the game is at version {game.version}",
                          current_version=game.version)
        want = req.body.get("version")
        if want is not None and want != game.version:
            raise Problem("version-conflict",
                          f"you decided on version {want}; the game is at {game.version}",
                          current_version=game.version)
        new_state, _ = apply(state, run.action, seat=seat)
        status = status_of(new_state, game.seats)
        now = time.time()
        meta = clock.draw(game.meta, game.deadline, seat, now)
        return _Judged(state, new_state, seat, status,
                       deadline_for(meta or game.meta, new_state, status, now), meta)

    def _acting_seat(self, game: Game, bot_id: str, seat: int | None, state: State) -> int:
        held = [i for i, b in enumerate(game.seats) if b == bot_id]
        if seat is not None:
            if seat not in held:
                raise Problem("forbidden-seat", f"your bot does not hold seat {seat}")
            return seat
        if not held:
            raise Problem("forbidden-seat", "your bot holds no seat in this game")
        if not state.is_over and state.turn in held:
            return state.turn
        return held[0]

    def _replayed(self, game: Game, stored: str, run: _Run) -> ActOutcome:
        """The answer to a retry of the bot's last keyed action in ``game`` (read after
        the retry's waiter was registered): nothing is applied again. Without ``wait``
        it is the first answer's body (``_replay_answer``). With ``wait`` the retry waits
        as the first request did, from the game as it is now: the view when it is the
        bot's turn at any seat it holds, the game is over, or the time is up (the answer
        right after the action if the game has not moved since), so a bot's retry loop
        needs no case of its own."""
        answer = self._replay_answer(game, stored, run.body_hash)
        if run.waiter is None:
            return ActOutcome(answer, replayed=True)
        bot_id = run.req.bot_id
        seat = answer["seat"]
        held = self._held(game, bot_id, None)
        now_seat = self._answer_seat(game, bot_id, seat)
        if game.status != ACTIVE or game.state.turn in held:
            if game.version == answer["version"] and now_seat == seat:
                return ActOutcome(answer, replayed=True)
            return ActOutcome(self.view(game, bot_id, now_seat), replayed=True)
        newer, _ = self._await_turn(run.waiter, run.wait_until, game, game.version, bot_id)
        if newer is not None:
            view = self.view(newer, bot_id, self._answer_seat(newer, bot_id, seat))
        elif game.version == answer["version"]:
            view = answer
        else:
            view = self.view(game, bot_id, seat)
        return ActOutcome(view, replayed=True)

    def _replay_answer(self, game: Game, stored: str, body_hash: str) -> dict[str, Any]:
        """The answer first given for an Idempotency-Key, rebuilt from the action log
        (with the deadline and time bank it had; only ``time_left`` is counted again)."""
        # hash|ply|seat|deadline|updated[|bank]|version (see _try_act)
        parts = stored.split("|")
        want_hash, ply, seat, version = parts[0], parts[1], parts[2], parts[-1]
        deadline = float(parts[3]) if len(parts) >= 5 and parts[3] else None
        updated = float(parts[4]) if len(parts) >= 6 and parts[4] else None
        if len(parts) >= 7:  # the seat's time bank as answered then (service.arena.core.clock)
            game = dataclasses.replace(
                game, meta=clock.with_bank(game.meta, int(seat), float(parts[5])))
        if want_hash != body_hash:
            raise Problem("idempotency-key-reused",
                          "this Idempotency-Key was first used with a different request")
        state, _ = new_game(game.players, game.meta["seed"], game.variants)
        for a in game.actions[: int(ply)]:
            state, _ = apply(state, a)
        status = status_of(state, game.seats)
        return self.render(game, state, int(seat), int(version), status, deadline, updated)

    def _retry_memory_gone(self, game: Game) -> bool:
        """Whether the finished game's retry memory has expired: its grace runs from the
        commit that finished it (``updated``)."""
        return game.updated is None or time.time() >= game.updated + self.store.idem_grace_s

    def _last_move_answer(self, game: Game, run: _Run) -> dict[str, Any] | None:
        """A keyed request on a finished game whose retry memory is gone (its grace is
        over): if it is the game's last move, made by this bot and decided on the version
        before it, the answer it got then (the final view for its seat: nothing can
        follow a finished game's last move, so that answer is rebuilt exactly); else
        None (judged as any request is, so refused: the game is over). The key itself is
        not compared: once the memory is gone nothing could. During the grace only the
        remembered key is a replay (``_retry_memory_gone``): the same move under another
        key is another request, refused like any action on a finished game, so two
        processes of one bot never both hear that their move applied."""
        req = run.req
        log = game.actions
        if not log or log[-1] != run.action:
            return None
        ply = len(log)
        if any(t.get("ply") == ply for t in game.meta.get("timeouts", ())):
            return None  # the last move was a timeout's, not a bot's
        if any(v is not None and v != game.version - 1
               for v in (req.body.get("version"), req.if_match)):
            return None
        state, _ = new_game(game.players, game.meta["seed"], game.variants)
        for a in log[:-1]:
            state, _ = apply(state, a)
        seat = state.turn
        if game.seats[seat] != req.bot_id or req.body.get("seat") not in (None, seat):
            return None
        return self.render(game, game.state, seat, game.version, game.status, game.deadline,
                           game.updated)

    # --- the clock's action ------------------------------------------------------------------

    def timeout(self, game_id: str, version: int, action_for: Callable[[State], int],
                now: float | None = None) -> bool:
        """Play ``action_for(state)`` for the seat in turn if ``version`` is still current
        and its deadline has passed; True if it was applied.

        Goes through the same compare-and-set as a bot's action, with the version the
        deadline was set for: a move made in time bumped the version first, so the
        timeout finds a newer version and is void. The timeout is kept in the game's
        meta (``timeouts``: seat, ply, action) so the record and standings show it.
        """
        game = self.store.get_game(game_id)
        if game is None or game.version != version or game.status != ACTIVE:
            return False
        now = time.time() if now is None else now
        if game.deadline is None or game.deadline > now:
            return False
        state = game.state
        seat = state.turn
        action = action_for(state)
        new_state, _ = apply(state, action, seat=seat)
        status = status_of(new_state, game.seats)
        timeouts = [*game.meta.get("timeouts", []),
                    {"seat": seat, "ply": new_state.ply, "action": action_name(action)}]
        meta = {**clock.exhausted(game.meta, seat), "timeouts": timeouts}
        if status == FINISHED:
            meta = played_meta(game, action, meta) or meta
        code, _ = self.store.commit(
            game,
            state=new_state,
            meta=meta,
            action=action,
            status=status,
            old_turn_bot=turn_bot(state, game.seats, game.status),
            new_turn_bot=turn_bot(new_state, game.seats, status),
            deadline=deadline_for(meta, new_state, status, now),
            turn_seat=new_state.turn if status == ACTIVE else None,
        )
        if code != 1:
            return False
        metrics.ACTION_BY_CLOCK.inc()
        metrics.TIMEOUTS.inc()
        game.meta = meta
        if status == FINISHED:
            self.ending.announce(game)
        return True


__all__ = ["CAS_ATTEMPTS", "ActOutcome", "ActRequest", "Acting"]
