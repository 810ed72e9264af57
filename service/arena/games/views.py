"""A game's view for one seat or a spectator, built without marshmallow on the hot path:
the engine's ``seat_view``/``spectator_view`` wrapped with the game's identity, seats,
clock and, once it is finished, why it ended (``service.arena.games.ending``)."""

from __future__ import annotations

import time
from typing import Any

from service.arena.core import clock
from service.arena.core.status import ACTIVE, FINISHED
from service.arena.games.ending import ended_of, game_ended
from service.engine import build_record
from service.storage.store import Game


def view_of(game: Game, engine_view: dict[str, Any], version: int, status: str,
            deadline: float | None, updated: float | None, now: float | None = None
            ) -> dict[str, Any]:
    """``engine_view`` wrapped with the game's identity, seats and deadline, built field
    by field in ``schemas.View``'s order and types: exactly what ``View().dump`` makes of
    it (tests/service/games/test_view_fields.py checks byte identity across random games, for
    every seat and the spectator), without marshmallow's per-field cost on the hot path.
    The engine's nested parts (kicks, tricks, score items) already have the nested
    schemas' keys, order and types, so they pass through."""
    v = engine_view
    active = status == ACTIVE
    limit = game.meta.get("move_limit")
    names = game.meta["names"]
    out: dict[str, Any] = {
        "id": game.id,
        "version": int(version),
        "status": status,
        "seats": [{"seat": i, "bot_id": b, "bot_name": names[i]}
                  for i, b in enumerate(game.seats)],
        "players": v["players"],
        "seat": v["seat"],
        "team": v["team"],
        "your_turn": bool(v["legal_actions"]) and active,
        "teams": v["teams"],
        "variants": v["variants"],
        "ply": v["ply"],
        "phase": v["phase"],
        "turn": v["turn"],
        "decision": v["decision"],
        "legal_actions": v["legal_actions"] if active else [],
        "hand_number": v["hand_number"],
        "dealer": v["dealer"],
        "beggar": v["beggar"],
        "beg": v["beg"],
        "hand": v["hand"],
        "hand_sizes": v["hand_sizes"],
        "kicks": v["kicks"],
        "trump": v["trump"],
        "trick": v["trick"],
        "tricks": v["tricks"],
        "scores": v["scores"],
        "target": v["target"],
        "hand_items": v["hand_items"],
        "last_hand_items": v["last_hand_items"],
        "winner": v["winner"],
        "ended": None,
        "seed_chosen": bool(game.meta.get("seed_chosen")),
        "seed_commitment": game.meta.get("seed_commitment"),
    }
    if "hands" in v:
        out["hands"] = v["hands"]
    if "seed" in v:
        out["seed"] = v["seed"]
        out["seed_salt"] = game.meta.get("seed_salt")  # revealed with the seed (deals)
    out["move_limit"] = float(limit) if limit is not None else None
    # the view's seat's bank (a spectator: the seat in turn's), service.arena.core.clock
    out["bank_left"] = clock.bank_of(game.meta, v["seat"] if v["seat"] is not None
                                     else v["turn"] if active else None)
    if deadline is None:
        out["deadline"] = out["time_left"] = None
    else:
        out["deadline"] = float(deadline)
        left = deadline - (time.time() if now is None else now)
        out["time_left"] = float(round(max(0.0, left), 3))
    out["updated_at"] = float(updated) if updated is not None else None
    out["timeouts"] = game.meta.get("timeouts") or []
    if status == FINISHED:
        _over(out, game)
    return out


def _over(out: dict[str, Any], game: Game) -> None:
    """A finished view says why (``ending.ended_of``) and credits its winner, whatever
    the position the game was ended in: nobody's turn, nothing to decide."""
    ended = ended_of(game.meta, out["phase"] == "over", out["winner"], game.seats)
    if ended is None:
        return
    out["ended"] = ended
    out["winner"] = ended["winner"]
    out["phase"] = "over"
    out["turn"] = out["decision"] = None
    out["legal_actions"] = []
    out["your_turn"] = False
    out["deadline"] = out["time_left"] = None


__all__ = ["view_of"]


def finished_record(game: Game) -> dict[str, Any]:
    """A finished game's complete record: what ``GET /games/{id}/record`` answers once the
    game is over (and its deal is no longer embargoed), and what a bot's export carries,
    so the two never differ."""
    record = build_record(game.players, game.meta["seed"], game.variants, game.actions)
    record["seed_salt"] = game.meta.get("seed_salt")  # to check the commitment
    record["complete"] = True
    record["timeouts"] = game.meta.get("timeouts", [])
    record["ended"] = ended = game_ended(game)
    if ended is not None:
        record["winner"] = ended["winner"]
    return record
