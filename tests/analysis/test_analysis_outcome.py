"""The evaluator behind the analysis: ``SearchStrategy.values`` and the chance of winning
from the score (clients/strategies/outcome.py)."""

from __future__ import annotations

import pytest

from clients.strategies import SearchStrategy
from clients.strategies.outcome import win_chance
from service.engine import new_game, seat_view


@pytest.mark.parametrize("players", [2, 4])
def test_win_chance_is_even_symmetric_and_grows_with_the_score_R22(players):
    """R22: the first team to the target wins; at level scores it is a coin toss."""
    assert win_chance(0, 0, 14, players) == pytest.approx(0.5)
    assert win_chance(14, 13, 14, players) == 1.0 and win_chance(13, 14, 14, players) == 0.0
    for a in range(14):
        for b in range(14):
            assert win_chance(a, b, 14, players) + win_chance(b, a, 14, players) == pytest.approx(1)
            if a < 13:
                assert win_chance(a + 1, b, 14, players) > win_chance(a, b, 14, players)
    assert 0.55 < win_chance(1, 0, 14, players) < 0.65  # a point at 0-0 matters a little
    assert win_chance(13, 10, 14, players) > 0.8
    assert 0 < win_chance(300, 200, 1000, players) < 1  # long games: a scaled table


def test_values_are_reproducible_for_a_seed_and_cover_every_legal_action():
    state, _ = new_game(2, 5)
    view = seat_view(state, state.turn)
    legal = view["legal_actions"]
    one = SearchStrategy(seed=3, simulations=40).values(view, legal)
    two = SearchStrategy(seed=3, simulations=40).values(view, legal)
    other = SearchStrategy(seed=4, simulations=40).values(view, legal)
    assert one == two and one != other
    assert list(one) == legal
    for v in one.values():
        assert v.samples == 40 and 0 <= v.win <= 1 and v.points >= 0
        assert v.margin <= v.points  # the margin is the team's points minus the others'
