"""Seeded games between random players, summarised: the ``allfours simulate`` command."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from service.engine import OVER, apply, legal_actions, new_game
from service.engine.variants import Variants

ITEM_ORDER = ("kick", "give_one", "high", "low", "jack", "hang_jack", "game")


def simulate(
    games: int, players: int = 4, seed: int = 0, variants: Variants | None = None
) -> dict[str, Any]:
    """Play ``games`` games, game i from seed ``seed + i``, every seat choosing uniformly
    among its legal actions (its choices drawn from a generator seeded the same way)."""
    wins = [0, 0]
    hands = 0
    points: Counter[str] = Counter()
    for i in range(games):
        game_seed = seed + i
        chooser = random.Random(game_seed)
        state, _ = new_game(players, game_seed, variants)
        while state.phase != OVER:
            state, events = apply(state, chooser.choice(legal_actions(state)))
            for e in events:
                if e["type"] == "score":
                    points[e["item"]] += e["points"]
        wins[state.winner] += 1
        hands += state.hand_no + 1
    return {
        "games": games,
        "players": players,
        "seed": seed,
        "wins": {"team_0": wins[0], "team_1": wins[1]},
        "average_hands": round(hands / games, 2) if games else 0,
        "points_by_item": {item: points[item] for item in ITEM_ORDER},
        "points_per_game": {
            item: round(points[item] / games, 3) if games else 0 for item in ITEM_ORDER
        },
    }
