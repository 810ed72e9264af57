"""The seat's clock: a move limit per decision and, optionally, a time bank per seat.

Why a module of its own: the game commands (``service.arena.games.commands``), the deadline index
(``service.arena.core.status.deadline_for``, which the commit script keeps in ``{p}deadlines``)
and the views all read the clock from here, so every process agrees on it. The engine
knows nothing of time (it stays pure): the clock is the arena's.

**The rule** (Kaggle's "overage time"). A game created with a ``move_limit`` and a
``time_bank`` (seconds, both in the game's meta) gives each seat a bank of ``time_bank``
seconds. A decision may take ``move_limit`` seconds for free; what it takes beyond that
is drawn from the seat's bank; the clock plays for the seat (the sweeper's default action,
``service.arena.games.deadlines``) only when the bank is empty too. So the decision due now has
one absolute ``deadline``::

    deadline = (when the decision began) + move_limit + bank_left[seat in turn]

and that is the deadline kept with the game and in the deadline index: the sweepers of
every process read only Redis, as before. When the seat acts at ``now`` its bank becomes
``bank_left - max(0, now - (deadline - bank_left))`` (never below 0), written into the
game's meta (``banks``, one number a seat) by the same compare-and-set as the action — a
fast move writes nothing. A timeout empties the seat's bank (it had run out: that is why
the clock played).

Meta: ``time_bank`` (the starting bank; absent or 0: no bank), ``banks`` (per seat, only
once a bank has been drawn on; absent: every seat has ``time_bank``).
"""

from __future__ import annotations

from typing import Any

MAX_TIME_BANK_S = 3600.0  # the largest bank a game, tournament or ladder may give a seat


def bank_of(meta: dict[str, Any], seat: int | None) -> float | None:
    """Seconds left in ``seat``'s bank (None: the game has no bank, no move limit for
    it to extend, or no seat)."""
    start = meta.get("time_bank")
    if not start or seat is None or not meta.get("move_limit"):
        return None
    banks = meta.get("banks")
    return float(banks[seat]) if banks else float(start)


def draw(meta: dict[str, Any], deadline: float | None, seat: int, now: float
         ) -> dict[str, Any] | None:
    """The meta after ``seat`` made the decision that was due by ``deadline`` at ``now``:
    its bank less what the decision took beyond the move limit; None when nothing changes
    (no bank, no deadline, or a decision within the limit)."""
    bank = bank_of(meta, seat)
    if not bank or deadline is None:
        return None
    excess = now - (deadline - bank)  # past the move limit's end
    if excess <= 0:
        return None
    return with_bank(meta, seat, round(max(0.0, bank - excess), 3))


def exhausted(meta: dict[str, Any], seat: int) -> dict[str, Any]:
    """The meta once the clock has played for ``seat``: its bank is spent."""
    if not bank_of(meta, seat):
        return meta
    return with_bank(meta, seat, 0.0)


def with_bank(meta: dict[str, Any], seat: int, left: float) -> dict[str, Any]:
    """The meta with ``seat``'s bank at ``left`` seconds (a replayed answer shows the bank
    it had)."""
    banks = list(meta.get("banks") or [float(meta["time_bank"])] * int(meta["players"]))
    banks[seat] = left
    return {**meta, "banks": banks}


def clock_of(meta: dict[str, Any], seat: int | None, deadline: float | None
             ) -> dict[str, Any]:
    """A seat's clock as the views and turn payloads show it (``schemas.View``'s
    ``move_limit``, ``bank_left``, ``deadline``)."""
    limit = meta.get("move_limit")
    return {"move_limit": float(limit) if limit is not None else None,
            "bank_left": bank_of(meta, seat),
            "deadline": float(deadline) if deadline is not None else None}


def turn_clocks(store: Any, bot_id: str, game_ids: list[str]) -> list[dict[str, Any]]:
    """``bot_id``'s clock in each of ``game_ids`` (the games where it is its turn, as
    ``GET /bots/me/turns`` lists them) that has a move limit: ``schemas.TurnClock``, in
    their order. A game that is gone or no longer the bot's turn by the time it is read
    is left out, and so is a game without a clock."""
    out = []
    for gid in game_ids:
        game = store.get_game(gid)
        if game is None or game.status != "active" or not game.meta.get("move_limit"):
            continue
        seat = game.state.turn
        if game.seats[seat] != bot_id:
            continue
        out.append({"game_id": gid, "seat": seat,
                    **clock_of(game.meta, seat, game.deadline)})
    return out
