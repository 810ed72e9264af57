"""The rollouts' model of a heuristic player (``playout.heuristic_card``) is the heuristic.

The search's rollouts can have a seat play the heuristic's card on what that seat could
know, decided on the rollout's masks; it must be the card ``HeuristicStrategy`` plays from
the seat's view, in every position, or the search models a player that does not exist.
"""

from __future__ import annotations

import random

from clients.strategies import HeuristicStrategy
from clients.strategies.knowledge import read_view
from clients.strategies.playout import heuristic_card, shown_voids
from service.engine import (
    OVER,
    PLAY,
    Variants,
    action_name,
    apply,
    new_game,
    parse_action,
    seat_view,
)

VARIANT_SETS = [
    Variants(),
    Variants(under_trumping=False),
    Variants(void_may_discard=True),
    Variants(under_trumping=False, void_may_discard=True, target=7),
]


def positions(games: int, seed: int):
    """Card-play positions of games between the heuristic and random play, mixed in a
    proportion drawn per game (random play shows voids; the heuristic's plays reach the
    positions it knows), at both table sizes and under every variant set."""
    rng = random.Random(seed)
    bot = HeuristicStrategy()
    for _ in range(games):
        players = rng.choice((2, 4))
        state, _ = new_game(players, rng.randrange(10**9), rng.choice(VARIANT_SETS))
        randomness = rng.random()
        while state.phase != OVER:
            view = seat_view(state, state.turn)
            legal = view["legal_actions"]
            choice = bot.choose(view, list(legal))
            if state.phase == PLAY and len(legal) > 1:
                yield state, view, choice
            if rng.random() < randomness:
                choice = rng.choice(legal)
            state, _ = apply(state, parse_action(choice))


def kicked(state) -> int:
    m = 0
    for c in state.kicks:
        m |= 1 << c
    return m


def test_the_rollout_model_plays_the_heuristics_card_in_every_position_R13_R16():
    """R13–R16: led or followed, partner or opponent winning, under every variant of R15."""
    checked = 0
    leads = follows = 0
    for state, _view, choice in positions(120, seed=5):
        card = heuristic_card(state, shown_voids(state), kicked(state))
        assert action_name(card) == choice, (state.to_dict(), choice)
        checked += 1
        leads += not state.trick
        follows += bool(state.trick)
    assert checked >= 5000
    assert leads >= 1000 and follows >= 3000


def test_the_voids_a_rollout_tracks_are_those_the_seat_reads_from_its_view_R14_R15():
    checked = 0
    for state, view, _choice in positions(30, seed=6):
        assert shown_voids(state) == read_view(view).forbidden
        checked += 1
    assert checked > 500
