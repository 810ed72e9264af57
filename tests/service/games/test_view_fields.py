"""Views are built without marshmallow (``arena.view_of``): byte for byte what the
``View`` schema dumps, for every seat and the spectator across random games."""

from __future__ import annotations

import random
from typing import Any

import pytest

from service.arena.core import deals
from service.arena.core.status import ACTIVE, FINISHED, WAITING
from service.arena.games.commands import view_of
from service.arena.games.ending import ended_of
from service.engine import (
    Variants,
    action_name,
    apply,
    legal_actions,
    new_game,
    seat_view,
    spectator_view,
)
from service.http.games.schemas import TurnAnswer, View
from service.jsonio import dumps
from service.storage.store import Game

EXPECTED_S = 30  # seconds, the whole module: the order workers take it in (tests/conftest.py)

SCHEMA = View()
TURN_ANSWER = TurnAnswer()  # built once: each instance builds its nested View again


def schema_view(game: Game, engine_view: dict[str, Any], version: int, status: str,
                deadline: float | None, updated: float | None, now: float) -> dict[str, Any]:
    """The view as it was made before ``view_of``: the input dict, dumped by the schema."""
    seats = [{"seat": i, "bot_id": b, "bot_name": game.meta["names"][i]}
             for i, b in enumerate(game.seats)]
    view = {
        **engine_view,
        "id": game.id,
        "version": version,
        "status": status,
        "seats": seats,
        "your_turn": bool(engine_view["legal_actions"]) and status == ACTIVE,
        "move_limit": game.meta.get("move_limit"),
        # the view's seat's time bank; a spectator's: the seat in turn's (docs/bots.md)
        "bank_left": None if not (game.meta.get("time_bank")
                                  and game.meta.get("move_limit")) else (
            game.meta.get("banks") or [game.meta["time_bank"]] * game.players)[
                engine_view["seat"] if engine_view["seat"] is not None
                else engine_view["turn"]] if engine_view["seat"] is not None
            or status == ACTIVE else None,
        "deadline": deadline,
        "time_left": round(max(0.0, deadline - now), 3) if deadline is not None else None,
        "updated_at": updated,
        "timeouts": game.meta.get("timeouts") or [],
        # fair deals: always said; the salt only with the seed, once over
        "seed_chosen": bool(game.meta.get("seed_chosen")),
        "seed_commitment": game.meta.get("seed_commitment"),
    }
    if "seed" in engine_view:
        view["seed_salt"] = game.meta.get("seed_salt")
    if status != ACTIVE:
        view["legal_actions"] = []
    # a finished game says why it ended, and one ended early reads as over (ending.py)
    ended = (ended_of(game.meta, engine_view["phase"] == "over", engine_view["winner"],
                      game.seats) if status == FINISHED else None)
    view["ended"] = ended
    if ended is not None:
        view.update(winner=ended["winner"], phase="over", turn=None, decision=None,
                    legal_actions=[], your_turn=False, deadline=None, time_left=None)
    return SCHEMA.dump(view)


@pytest.mark.parametrize("players,move_limit,variants", [
    (2, None, {}),
    (4, None, {}),
    (4, 10, {"target": 3}),
    (2, 2.5, {"pack_runs_out": "redeal", "game_point_value": 2}),
    (4, 10, {"time_bank": 30}),  # not a house rule: the game's time bank (arena.clock)
    (2, 5, {"time_bank": 12.5, "banks": [3.25, 0]}),
    (4, None, {"tobago_kick": True, "under_trumping": True, "void_may_discard": True}),
])
def test_view_fields_match_the_schema(players, move_limit, variants):
    rng = random.Random(players * 1000 + len(variants))
    bank = {k: variants.pop(k) for k in ("time_bank", "banks") if k in variants}
    compared = 0
    for _ in range(2):
        seed = rng.getrandbits(40)
        seats = ["a1b2c3d4e5f6", None, "0a1b2c3d4e5f", "0a1b2c3d4e5f"][:players]
        names = ["alpha", None, "béta \"q\"", "béta \"q\""][:players]
        meta: dict[str, Any] = {"players": players, "seed": seed, "seats": seats,
                                "names": names}
        deals.seal(meta, chosen=rng.random() < 0.5)  # a chosen seed, or a committed one
        if move_limit is not None:
            meta["move_limit"] = move_limit
        meta.update(bank)
        state, _ = new_game(players, seed, Variants.from_dict(variants))
        version = 1
        while True:
            game = Game("abcdef012345", version, ACTIVE, meta, "", "")
            now = 1_700_000_000.0 + rng.random() * 1000
            statuses = [ACTIVE] if rng.random() < 0.9 else [WAITING, ACTIVE, FINISHED]
            for status in statuses if not state.is_over else (FINISHED,):
                deadline = (round(now + rng.uniform(-3, 30), 3)
                            if move_limit is not None and status == ACTIVE else None)
                # a finished game may have been ended early: forfeited by seat 0's bot
                forfeited = Game(game.id, version, FINISHED, {**meta, "ended": {
                    "reason": "forfeit", "winner": 1, "by": [seats[0]], "why": "withdrawn"}},
                    "", "")
                for seat, g in [(s, game) for s in [None, *range(players)]] + (
                        [(0, forfeited), (None, forfeited)] if status == FINISHED else []):
                    ev = seat_view(state, seat) if seat is not None else spectator_view(state)
                    updated = rng.choice([None, now - rng.random(), 1_700_000_000])
                    fast = view_of(g, ev, version, status, deadline, updated, now)
                    slow = schema_view(g, ev, version, status, deadline, updated, now)
                    assert dumps(fast) == dumps(slow)
                    assert dumps(TURN_ANSWER.dump({"timed_out": False, "view": fast})) == \
                        dumps({"timed_out": False, "view": fast})
                    compared += 1
            if state.is_over:
                break
            action = rng.choice(legal_actions(state))
            state, _ = apply(state, action)
            version += 1
            if move_limit is not None and rng.random() < 0.1:  # the clock played it
                meta["timeouts"] = [*meta.get("timeouts", []), {
                    "seat": 0, "ply": state.ply, "action": action_name(action)}]
    assert compared > 100
