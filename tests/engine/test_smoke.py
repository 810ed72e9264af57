"""A whole random game through the public API (R1–R22 together)."""

import random

from service.engine import OVER, apply, build_record, legal_actions, new_game


def test_random_game_reaches_target_R22():
    rng = random.Random(0)
    state, _ = new_game(4, 99)
    actions = []
    while state.phase != OVER:
        action = rng.choice(legal_actions(state))
        actions.append(action)
        state, _ = apply(state, action)
    assert max(state.scores) >= state.variants.target > min(state.scores)
    record = build_record(4, 99, None, actions)
    assert record["winner"] == state.winner
    assert record["scores"] == state.scores
