"""Games between strategies through the engine, with duplicate deals.

A strategy is judged from seat views only, exactly as over HTTP, but without the
network: this is what the strength bench and the tests use. Luck of the cards dominates
single games of All Fours, so ``duplicate_pair`` plays one deal sequence twice with the
teams swapped: each strategy gets each set of cards once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from service.engine import OVER, action_name, apply, legal_actions, new_game, parse_action
from service.engine.views import seat_view

from .base import Strategy


@dataclass
class GameResult:
    """One game from team 0's side: who won, and the point margin of every hand."""

    winner: int
    scores: list[int]
    hand_margins: list[int]  # team 0's points minus team 1's, per hand (the last may be cut)


def play_game(
    teams: tuple[Strategy, Strategy], seed: int, players: int = 4, variants=None
) -> GameResult:
    """Play one game: seats of team t ask ``teams[t]`` (partners share one strategy)."""
    state, _ = new_game(players, seed, variants)
    margins: list[int] = []
    hand_no = state.hand_no
    base = [0, 0]  # scores when the current hand began (its kicks count to it)
    while state.phase != OVER:
        seat = state.turn
        legal = [action_name(a) for a in legal_actions(state)]
        choice = teams[seat & 1].choose(seat_view(state, seat), legal)
        if choice not in legal:
            raise ValueError(f"strategy {teams[seat & 1]!r} chose illegal {choice!r}")
        state, _ = apply(state, parse_action(choice))
        if state.hand_no != hand_no:
            # the new hand's first kick has already scored: it belongs to the new hand
            early = [sum(p for _i, t, p, _d in state.items if t == team) for team in (0, 1)]
            ended = [state.scores[t] - early[t] for t in (0, 1)]
            margins.append((ended[0] - base[0]) - (ended[1] - base[1]))
            base, hand_no = ended, state.hand_no
    margins.append((state.scores[0] - base[0]) - (state.scores[1] - base[1]))
    return GameResult(state.winner, list(state.scores), margins)


def duplicate_pair(
    make_a: Callable[[], Strategy],
    make_b: Callable[[], Strategy],
    seed: int,
    players: int = 4,
) -> list[GameResult]:
    """The deal sequence of ``seed`` played twice, A as team 0 then A as team 1.

    Results are returned from A's side (``winner == 0`` means A won; margins are A's).
    """
    first = play_game((make_a(), make_b()), seed, players)
    second = play_game((make_b(), make_a()), seed, players)
    flipped = GameResult(1 - second.winner, second.scores[::-1], [-m for m in second.hand_margins])
    return [first, flipped]
