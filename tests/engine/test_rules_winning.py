"""R22: the first team to reach the target wins; items are counted High, Low, Jack, Game
and the game ends at the first one that reaches the target."""

import pytest
from test_rules_scoring import (
    HANG_JACK_HANDS,
    HANG_JACK_PLAYS,
    OWN_JACK_HANDS,
    OWN_JACK_PLAYS,
    S1_HANDS,
    S1_PLAYS,
    end_items,
    hand,
)

from service.engine import OVER, STAND, IllegalAction, Variants, apply, legal_actions


def assert_game_over(state, events, winner, scores):
    assert state.phase == OVER
    assert state.winner == winner
    assert state.scores == scores
    assert legal_actions(state) == []
    assert max(scores) >= state.variants.target > min(scores)
    types = [e["type"] for e in events]
    assert types[-1] == "game_over"
    assert "hand_over" not in types
    assert [e["type"] for e in events].count("deal") == 1  # no next hand is dealt
    with pytest.raises(IllegalAction) as err:
        apply(state, STAND)
    assert err.value.rule == "R22"


def test_R22_counting_order_is_high_low_jack_game():
    """R22: the end-of-hand items are scored in the order High, Low, Jack, Game."""
    _, events = hand(HANG_JACK_HANDS, HANG_JACK_PLAYS)
    assert [i[0] for i in end_items(events)] == ["high", "low", "hang_jack", "game"]
    this_hand = events[: [e["type"] for e in events].index("hand_over")]
    running = [e["scores"] for e in this_hand if e["type"] == "score"]
    assert running == [[1, 0], [1, 1], [4, 1], [5, 1]]


def test_R22_high_reaching_the_target_ends_the_game_before_low():
    """R22: High takes team 1 from 13 to 14: the game is over; Low (team 0, also on 13) and
    Game are never scored, so both teams never reach 14."""
    state, events = hand(S1_HANDS, S1_PLAYS, scores=(13, 13))
    assert end_items(events) == [("high", 1, 1)]
    assert_game_over(state, events, 1, [13, 14])


def test_R22_low_reaching_the_target_ends_the_game_before_game():
    """R22: High (team 1) is scored first, then Low takes team 0 to 14; Game (team 0) is not
    scored."""
    state, events = hand(S1_HANDS, S1_PLAYS, scores=(13, 12))
    assert end_items(events) == [("high", 1, 1), ("low", 0, 1)]
    assert_game_over(state, events, 0, [14, 13])


def test_R22_hang_jack_ends_the_game_and_game_is_not_counted():
    """R22: hang jack (3) takes team 0 from 12 to 15 and ends the game: Game is not
    scored."""
    state, events = hand(HANG_JACK_HANDS, HANG_JACK_PLAYS, scores=(11, 0))
    assert end_items(events) == [("high", 0, 1), ("low", 1, 1), ("hang_jack", 0, 3)]
    assert_game_over(state, events, 0, [15, 1])


def test_R22_own_jack_ends_the_game_before_game():
    """R22: Jack (1 to the holder's team) takes team 1 to 14; Game is not scored."""
    state, events = hand(OWN_JACK_HANDS, OWN_JACK_PLAYS, players=4, scores=(0, 12))
    assert end_items(events) == [("high", 1, 1), ("low", 0, 1), ("jack", 1, 1)]
    assert_game_over(state, events, 1, [1, 14])


def test_R22_game_point_ends_the_game_when_both_teams_stand_at_13():
    """R22: High and Low bring both teams to 13; Game then decides: team 0 wins on 14."""
    state, events = hand(S1_HANDS, S1_PLAYS, scores=(12, 12))
    assert end_items(events) == [("high", 1, 1), ("low", 0, 1), ("game", 0, 1)]
    assert_game_over(state, events, 0, [14, 13])


def test_R22_below_target_the_hand_ends_and_the_next_is_dealt():
    """R22: while no team has reached the target, the game goes on to the next hand."""
    state, events = hand(S1_HANDS, S1_PLAYS, scores=(10, 10))
    assert state.phase != OVER
    assert state.winner is None
    assert [e["scores"] for e in events if e["type"] == "hand_over"] == [[12, 11]]
    assert end_items(events)[-1] == ("game", 0, 1)
    assert state.hand_no == 1
    assert state.phase == "stand_or_beg" or state.scores[1] >= 14


def test_R22_variant_target_7_ends_the_game_at_seven():
    """R22 with the target variant 7: Low takes team 0 from 6 to 7 and wins."""
    state, events = hand(S1_HANDS, S1_PLAYS, scores=(6, 5), variants=Variants(target=7))
    assert end_items(events) == [("high", 1, 1), ("low", 0, 1)]
    assert_game_over(state, events, 0, [7, 6])
