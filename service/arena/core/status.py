"""What a stored game's status, turn, deadline and embargo are, from its state and meta.

Why a module of its own: the game commands (``service.arena.games.commands``), the waiting
(``service.arena.games.waiting``) and the tournaments all decide from these, and the commit
script keeps Redis's indexes by them; one definition keeps them agreeing.
"""

from __future__ import annotations

import time
from typing import Any

from service.arena.core.clock import bank_of
from service.engine import State

WAITING, ACTIVE, FINISHED = "waiting", "active", "finished"


def status_of(state: State, seats: list[str | None]) -> str:
    if state.is_over:
        return FINISHED
    return ACTIVE if all(seats) else WAITING


def turn_bot(state: State, seats: list[str | None], status: str) -> str | None:
    """The bot that must act now, if the game is under way."""
    if status != ACTIVE or state.is_over:
        return None
    return seats[state.turn]


def deadline_for(meta: dict[str, Any], state: State, status: str,
                 now: float | None = None) -> float | None:
    """When the clock plays for the decision now due: the move limit from now (the
    service's clock) plus what is left in the bank of the seat in turn
    (``service.arena.core.clock``), or None when the game has no limit or nobody is to act.
    Every action starts a new decision, even when the same seat acts again (a trick
    winner leading)."""
    limit = meta.get("move_limit")
    if not limit or status != ACTIVE or state.is_over:
        return None
    bank = bank_of(meta, state.turn) or 0.0
    return round((time.time() if now is None else now) + float(limit) + bank, 3)


def embargo_key(prefix: str) -> str:
    """The set of deals being played at several tables, not all finished (``service.
    tournaments``): a game whose meta names one in ``embargo`` shows nothing of its cards
    to anyone but its own seats, and no hands or seed even to them, until it leaves the
    set."""
    return f"{prefix}embargoed"


EMBARGOED = ("this game's deal is still being played at another table of its tournament: "
             "until every table of the deal has finished, only the seats at this table see "
             "anything of it")
