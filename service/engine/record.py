"""The record of a game: everything an independent referee needs to check it.

A game is fully determined by (players, seed, variants, actions), so the service stores
only that and the record is rebuilt by replaying. ``record_from_events`` also builds the
partial record a seat may see while the game is live, from redacted events.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .actions import Action, action_name
from .game import Event, apply, new_game
from .state import State
from .variants import Variants


def replay(
    players: int, seed: int, variants: Variants | None, actions: Iterable[Action]
) -> tuple[State, list[Event]]:
    """Replay a game from its seed and actions; every action must be legal."""
    state, events = new_game(players, seed, variants)
    for action in actions:
        state, more = apply(state, action)
        events.extend(more)
    return state, events


def build_record(
    players: int, seed: int, variants: Variants | None, actions: Sequence[Action]
) -> dict[str, Any]:
    """The complete record of a game (finished or not) from its seed and actions."""
    _state, events = replay(players, seed, variants, actions)
    record = record_from_events(events)
    record["actions"] = [action_name(a) for a in actions]
    return record


def record_from_events(events: Iterable[Event]) -> dict[str, Any]:
    """Fold a game's events (redacted or not) into the record's shape.

    Per hand: dealer and beggar; each deal (a redeal after an exhausted pack, R11, starts
    a new one) with the cards each seat was dealt first and in every run, and every card
    turned up with its points; the beg decisions; the trump; every trick (leader, each
    seat's card in order, winner); each score item in order; the running score after it.
    """
    record: dict[str, Any] = {"hands": [], "winner": None, "scores": [0, 0]}
    hand: dict[str, Any] | None = None
    deal: dict[str, Any] | None = None
    trick: list[dict[str, Any]] = []
    for e in events:
        kind = e["type"]
        if kind == "game_started":
            for key in ("players", "seed", "variants", "teams", "cut", "first_dealer"):
                if key in e:
                    record[key] = e[key]
            players = e["players"]
        elif kind == "deal":
            if hand is None or e["deal"] == 0:
                hand = {
                    "hand": e["hand"],
                    "dealer": e["dealer"],
                    "beggar": (e["dealer"] + 1) % players,
                    "deals": [],
                    "beg": [],
                    "trump": None,
                    "tricks": [],
                    "items": [],
                    "scores": None,
                }
                record["hands"].append(hand)
            deal = {"deal": e["deal"], "cards": e["cards"], "runs": [], "kicks": []}
            if "sizes" in e:
                deal["sizes"] = e["sizes"]
            hand["deals"].append(deal)
        elif kind == "run_deal":
            assert deal is not None
            deal["runs"].append(e["cards"])
        elif kind == "kick":
            assert deal is not None
            deal["kicks"].append({"card": e["card"], "points": e["points"], "team": e["team"]})
        elif kind in ("stand", "beg", "give_one", "run_pack"):
            assert hand is not None
            hand["beg"].append({"seat": e["seat"], "decision": kind})
        elif kind == "redeal":
            assert hand is not None
            hand["redeals"] = hand.get("redeals", 0) + 1
        elif kind == "trump":
            assert hand is not None
            hand["trump"] = e["suit"]
        elif kind == "card_played":
            trick.append({"seat": e["seat"], "card": e["card"]})
        elif kind == "trick_won":
            assert hand is not None
            hand["tricks"].append({"leader": e["leader"], "cards": trick, "winner": e["winner"]})
            trick = []
        elif kind == "score":
            assert hand is not None
            item = {k: v for k, v in e.items() if k != "type"}
            hand["items"].append(item)
            hand["scores"] = e["scores"]
            record["scores"] = e["scores"]
        elif kind == "hand_over":
            assert hand is not None
            hand["scores"] = e["scores"]
        elif kind == "game_over":
            record["winner"] = e["winner"]
            record["scores"] = e["scores"]
    if hand is not None and trick:
        hand["current_trick"] = trick
    return record
