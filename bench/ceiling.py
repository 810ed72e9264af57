"""How often can anyone beat the random bot, or the heuristic? A probe of a target's headroom.

    python bench/ceiling.py [--games 2000] [--rollouts 0] [--seed 5000]
                            [--opponent random|heuristic] [--players 4|2]

An *all-seeing* player — it reads every hand and the stock from the engine state, which
no bot of the ladder can — plays the random bot (or the heuristic) in games to 14 with
duplicate deals (each deal twice, the teams swapping cards). For each of its decisions it
tries every legal action and plays the rest of the hand out open-handed:

- ``--rollouts 0``: one deterministic rollout per action, every seat playing the search
  bot's rollout policy (a decent open-handed player). This is the search bot with a
  perfect sampler: what the search would reach if its sampling and inference guessed
  every hidden card right (the issue-25 question: how far can better inference go?);
- ``--rollouts K`` (against random only): K rollouts per action in which the random team
  plays at random, as it does (a best response to random play, closer to the true
  ceiling and slower).

It prints one JSON line: the all-seeing player's game win rate with its 95% Wilson
interval. Luck alone (High and Low go to whoever is dealt them, R17 and R18, and the
kick to the dealer's team) keeps this below 100%; a bot that sees only its own hand can
at best approach it. A probe for the closing notes of issues 4 and 25, not a strategy.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.strength import wilson
from clients.strategies import get_strategy
from clients.strategies.search import (
    WIN_VALUE,
    rollout,
    rollout_card,
    rollout_decision,
)
from service.engine import OVER, action_name, apply, legal_actions, new_game, parse_action
from service.engine.state import PLAY, State
from service.engine.views import seat_view


def against_random(s: State, team: int, rng: random.Random) -> float:
    """The rest of the hand with the other team playing at random: ``team``'s margin,
    plus ``WIN_VALUE`` if the game ends this hand in its favour (minus, against)."""
    hand_no = s.hand_no
    while s.hand_no == hand_no and s.phase != OVER:
        if s.turn & 1 != team:
            action = rng.choice(legal_actions(s))
        elif s.phase == PLAY:
            action = rollout_card(s, rng, 0.0)
        else:
            action = rollout_decision(s)
        s, _ = apply(s, action)
    if s.hand_no == hand_no:
        items = s.items
        bonus = WIN_VALUE if s.phase == OVER and s.winner == team else -WIN_VALUE
    else:
        items, bonus = s.last_items, 0.0
    margin = sum(p if t == team else -p for _i, t, p, _d in items if t is not None)
    return margin + bonus


def all_seeing_choice(state: State, team: int, rng: random.Random, rollouts: int) -> int:
    best, best_value = -1, -1e9
    for action in legal_actions(state):
        s, _ = apply(state, action)
        if s.phase == OVER:
            value = 100.0 if s.winner == team else -100.0
        elif rollouts == 0:
            value = rollout(s, team, rng, 0.0)
        else:
            value = sum(against_random(s, team, rng) for _ in range(rollouts)) / rollouts
        if value > best_value:
            best, best_value = action, value
    return best


def play(seed: int, seeing_team: int, rollouts: int, opponent: str = "random",
         players: int = 4) -> bool:
    """One game; True if the all-seeing team won."""
    state, _ = new_game(players, seed)
    other = get_strategy(opponent)
    rng = random.Random(seed * 2 + seeing_team)
    while state.phase != OVER:
        seat = state.turn
        legal = legal_actions(state)
        if seat & 1 == seeing_team and len(legal) > 1:
            action = all_seeing_choice(state, seeing_team, rng, rollouts)
        else:
            names = [action_name(a) for a in legal]
            action = parse_action(other.choose(seat_view(state, seat), names))
        state, _ = apply(state, action)
    return state.winner == seeing_team


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=2000, help="games (even: duplicate pairs)")
    parser.add_argument("--rollouts", type=int, default=0, help="0: one open-handed rollout")
    parser.add_argument("--seed", type=int, default=5000, help="first deal sequence")
    parser.add_argument("--opponent", choices=("random", "heuristic"), default="random")
    parser.add_argument("--players", type=int, choices=(4, 2), default=4)
    args = parser.parse_args()
    if args.opponent != "random" and args.rollouts:
        parser.error("--rollouts K models a random opponent: use 0 against the heuristic")
    started = time.perf_counter()
    wins = games = 0
    for i in range(max(1, args.games // 2)):
        for team in (0, 1):
            wins += play(args.seed + i, team, args.rollouts, args.opponent, args.players)
            games += 1
    low, high = wilson(wins, games)
    print(json.dumps({
        "bench": "ceiling", "pairing": f"all_seeing-{args.opponent}", "players": args.players,
        "rollouts": args.rollouts,
        "games": games, "wins": wins, "win_rate": round(wins / games, 4),
        "win_rate_ci95": [round(low, 4), round(high, 4)],
        "seconds": round(time.perf_counter() - started, 1),
    }))


if __name__ == "__main__":
    main()
