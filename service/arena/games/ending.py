"""How a game ends: one door for every way.

A game ends by its last trick (R22: a team reached the target), or it is ended early:
forfeited by a side (a tournament entrant that left, a ladder bot paused or suspended, a
bot that failed its validation game), voided (its tournament was cancelled; a validation
game no entry names), or cancelled before it started (an invitation declined or expired).
Each of them goes through ``Ending``: the commit that finishes the game carries why it
ended (``meta.ended``), so every waiter, stream and later read learns it from the same
write; then the end is announced (``on_status``: the webhook ``end`` notification) and
the after-finish hooks run (``on_finish``: analysis, the tournament's and the ladder's
bookkeeping). Two doors were where defects lived: an end that skipped the announcement
left webhook bots and the analysis hook unaware, and a view that disagreed with the
ladder's history about who won.

**What is stored** (``meta.ended``): ``reason`` (one of ``REASONS``), ``winner`` (the
team credited with the game, or None), ``by`` (the bots that forfeited) and ``why`` (the
detail: ``withdrawn``, ``no_show``, ``disqualified``, ``suspended``, ``paused``,
``absent``, ``validation``; for a cancel ``declined`` or ``expired``). A game played to
its end stores nothing unless a side was absent (see ``played_meta``): its ``ended`` is
read from the engine's state (``ended_of``).

**What is shown** (``ended_of``): ``{reason, winner, forfeit_by, why}``, the same object
in the view, the summary, the record and the stream's ``game_over`` event, and the
``winner`` each of them shows is its ``winner``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from service.arena.core.status import FINISHED, turn_bot
from service.engine import apply, new_game, team_of
from service.storage.commits import commit_time
from service.storage.store import Game, Store

log = logging.getLogger(__name__)

PLAYED, FORFEIT, VOID, CANCELLED = "played", "forfeit", "void", "cancelled"
REASONS = [PLAYED, FORFEIT, VOID, CANCELLED]
ABSENT = "absent"  # ``why`` of a forfeit found at a played game's end (``played_meta``)
CAS_ATTEMPTS = 50


class EndingHost(Protocol):
    """What the door uses of the ``Arena`` (``service.arena.games.commands``), which
    imports this module: the store, the announcement and the after-finish hooks."""

    store: Store

    def announce_status(self, game: Game, status: str) -> None: ...

    def _after_finish(self, game: Game) -> None: ...


# --- who played ------------------------------------------------------------------------------


def own_moves(game: Game) -> tuple[list[int], list[int]]:
    """(moves, clock moves) per team in ``game``: every decision its seats made, and how many
    of those the move clock played (``meta.timeouts``). A replay of the log: the engine is
    pure and a game is a few hundred actions at most."""
    moves = [0, 0]
    state, _ = new_game(game.players, game.meta["seed"], game.variants)
    for action in game.actions:
        moves[team_of(state.turn)] += 1
        state, _ = apply(state, action)
    clock = [0, 0]
    for t in game.meta.get("timeouts", ()):
        clock[team_of(t["seat"])] += 1
    return moves, clock


def absent_teams(game: Game) -> list[int]:
    """Teams whose every decision in ``game`` (at least one) the clock played."""
    moves, clock = own_moves(game)
    return [t for t in (0, 1) if moves[t] and moves[t] == clock[t]]


def moved_teams(game: Game) -> list[bool]:
    """Per team: whether it made a move of its own in ``game`` (not the clock's)."""
    moves, clock = own_moves(game)
    return [m > c for m, c in zip(moves, clock, strict=True)]


def forfeit_winner(seats: list[str | None], by: Iterable[str]) -> int | None:
    """The team credited with a game forfeited by the bots ``by``: the other team when
    they are all of one team, else nobody."""
    gone = set(by)
    teams = {team_of(i) for i, b in enumerate(seats) if b is not None and b in gone}
    return 1 - teams.pop() if len(teams) == 1 else None


# --- what is shown -----------------------------------------------------------------------------


def ended_of(meta: dict[str, Any], over: bool, winner: int | None,
             seats: list[str | None] | None = None) -> dict[str, Any] | None:
    """Why a finished game ended, as every answer shows it; None for a live one. ``over``
    and ``winner`` are the engine's (a game played to its end); ``seats`` lets a game
    ended before the field ``winner`` was stored be credited from ``by``."""
    e = meta.get("ended")
    if e:
        by = list(e.get("by") or ())
        if "winner" in e:
            won = e["winner"]
        elif e.get("reason") == FORFEIT and seats is not None:
            won = forfeit_winner(seats, by)
        else:
            won = None
        return {"reason": e.get("reason") or VOID, "winner": won, "forfeit_by": by,
                "why": e.get("why")}
    cancel = meta.get("cancelled")
    if cancel:
        return {"reason": CANCELLED, "winner": None, "forfeit_by": [],
                "why": cancel.get("reason")}
    if over:
        return {"reason": PLAYED, "winner": winner, "forfeit_by": [], "why": None}
    return None


def game_ended(game: Game) -> dict[str, Any] | None:
    """``ended_of`` for a stored game (None unless it is finished)."""
    if game.status != FINISHED:
        return None
    state = game.state
    return ended_of(game.meta, state.is_over, state.winner, game.seats)


def played_meta(game: Game, action: int, meta: dict[str, Any] | None
                ) -> dict[str, Any] | None:
    """The meta the commit of a rated game's last move (``action``, on ``game``; ``meta``:
    the meta that commit writes, None: unchanged) carries: ``meta``, or with
    ``ended`` when a side never played — a side whose every
    decision the clock played never played, and forfeits — the rule the tournaments and
    the ladder rate by (docs/ratings.md), written into the game so that its view and
    record credit the same winner as their standings and histories."""
    base = game.meta if meta is None else meta
    if not (base.get("tournament") or base.get("ladder")):
        return meta
    absent = absent_teams(dataclasses.replace(game, meta=base, log=game.log + chr(action + 48),
                                              _state=None))
    if not absent:
        return meta
    by = sorted({b for i, b in enumerate(game.seats) if b and team_of(i) in absent})
    winner = 1 - absent[0] if len(absent) == 1 else None
    return {**base, "ended": {"reason": FORFEIT, "winner": winner, "by": by, "why": ABSENT}}


# --- the door ------------------------------------------------------------------------------------


class Ending:
    """Ends games (``end``) and announces every end (``announce``), for one ``Arena``."""

    def __init__(self, host: EndingHost) -> None:
        self.host = host

    def end(self, game: Game, reason: str, *, forfeit_by: Iterable[str] = (),
            why: str | None = None, only_if: Callable[[Game], bool] | None = None,
            meta: dict[str, Any] | None = None) -> Game | None:
        """End ``game`` now, whatever its position: status ``finished``, no deadline,
        nobody's turn, ``meta.ended`` saying why (and ``meta``'s keys added, e.g. a cancel's
        ``cancelled``), then ``announce``. A compare-and-set like any move, retried on a
        newer version while ``only_if`` (if given) still holds; None if the game had
        finished meanwhile, is gone, or no longer qualifies. Safe to repeat: a second call
        finds it finished."""
        assert reason in REASONS and reason != PLAYED, reason
        by = sorted(set(forfeit_by))
        store = self.host.store
        for _ in range(CAS_ATTEMPTS):
            if game.status == FINISHED or (only_if is not None and not only_if(game)):
                return None
            ended: dict[str, Any] = {
                "reason": reason,
                "winner": forfeit_winner(game.seats, by) if reason == FORFEIT else None,
                "by": by,
            }
            if why is not None:
                ended["why"] = why
            new_meta = {**game.meta, **(meta or {}), "ended": ended}
            code, value = store.commit(
                game, meta=new_meta, status=FINISHED,
                old_turn_bot=turn_bot(game.state, game.seats, game.status),
                new_turn_bot=None, deadline=None, turn_seat=None, updated=commit_time(),
            )
            if code == 1:
                game.meta, game.status, game.version = new_meta, FINISHED, int(value)
                game.deadline = None
                self.announce(game)
                return game
            if code == -1:
                return None
            fresh = store.get_game(game.id)
            if fresh is None:
                return None
            game = fresh
        return None

    def announce(self, game: Game) -> None:
        """``game`` has just finished (by this process's commit): tell the ``on_status``
        hooks (webhook ``end``), then run the after-finish hooks."""
        self.host.announce_status(game, FINISHED)
        self.host._after_finish(game)


__all__ = ["ABSENT", "CANCELLED", "FORFEIT", "PLAYED", "REASONS", "VOID", "Ending",
           "absent_teams", "ended_of", "forfeit_winner", "game_ended", "moved_teams",
           "own_moves", "played_meta"]
