"""The heuristic's card play on masks (``playout.heuristic_choice``) is the heuristic's.

The inference weighs every deal it samples by whether each card the others played is
the one the heuristic would have played from that deal's hand; it asks
``heuristic_choice``, decided on card masks, rather than ``heuristic.choose_card`` on a
``Knowledge``. It must be the same card in every position, or the search infers from a
player that does not exist.
"""

from __future__ import annotations

import random

from clients.strategies import HeuristicStrategy
from clients.strategies.knowledge import read_view
from clients.strategies.playout import heuristic_choice
from service.engine import (
    OVER,
    PLAY,
    action_name,
    apply,
    new_game,
    parse_action,
    seat_view,
)
from tests.clients.variant_sets import VARIANT_SETS


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


def test_the_heuristics_card_on_masks_is_its_card_in_every_position_R13_R16():
    """R13–R16: led or followed, partner or opponent winning, under every variant of R15;
    the seat's knowledge read from its view, as the inference has it for each card."""
    checked = leads = partner_played = 0
    for state, view, choice in positions(100, seed=5):
        k = read_view(view)
        card = heuristic_choice(
            k.hand, k.trick, k.leader, k.seat, k.players, k.trump, state.variants,
            k.played | k.kicked, k.hand_sizes, k.forbidden,
        )
        assert action_name(card) == choice, (state.to_dict(), choice)
        checked += 1
        leads += not k.trick
        partner_played += len(k.trick) >= 2 and k.players == 4
    assert checked >= 4000
    assert leads >= 800 and partner_played >= 800
