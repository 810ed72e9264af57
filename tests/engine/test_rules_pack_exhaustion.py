"""R11: running out of cards while running the pack, and the redeal by the same dealer."""

import pytest
from stacking import rigged_game, score_items

from service.engine import (
    BEG,
    PLAY,
    RUN_PACK,
    STAND_OR_BEG,
    Variants,
    apply,
    kick_points,
    legal_actions,
)


def _run(state):
    state, _ = apply(state, BEG)
    return apply(state, RUN_PACK)


def _kicks(events):
    return [e["card"] for e in events if e["type"] == "kick"]


def test_R11_four_players_two_runs_then_the_last_card_gives_trump():
    """R11 (4 players): at most two runs (hands of 12); then the one remaining card is turned
    up without dealing; it scores kick points and, being a new suit, is trump."""
    state, _ = rigged_game(4, 0, {}, ["2H", "3H", "4H", "6S"], runs=2)
    state, events = _run(state)
    assert [e["type"] for e in events].count("run_deal") == 2
    assert _kicks(events) == ["3H", "4H", "6S"]
    assert score_items(events) == [("kick", 0, 2)]
    assert [h.bit_count() for h in state.hands] == [12] * 4
    assert state.stock == []
    assert state.trump == 3
    assert state.phase == PLAY
    assert state.turn == 1
    assert state.deal_no == 0


def test_R11_four_players_exhausted_pack_is_redealt_by_the_same_dealer_keeping_points():
    """R11 (4 players): two same-suit runs and a same-suit last card exhaust the pack: the
    same dealer deals the hand again from the start (fresh 6-card hands, a new kick scored
    for the dealer's team); every point already scored stands."""
    state, _ = rigged_game(4, 2, {}, ["6H", "AH", "JH", "2H"], runs=2, scores=(1, 4))
    assert state.scores == [3, 4]
    state, events = _run(state)
    types = [e["type"] for e in events]
    assert types.count("run_deal") == 2
    assert _kicks(events)[:3] == ["AH", "JH", "2H"]
    assert "redeal" in types
    assert types.index("redeal") > types.index("run_deal")
    # Kicks turned before the redeal scored and still count: 1 + 3 for AH and JH.
    assert score_items(events[: types.index("redeal")]) == [("kick", 0, 1), ("kick", 0, 3)]
    new_kick = state.kicks[0]
    assert len(state.kicks) == 1
    assert state.scores == [3 + 1 + 3 + kick_points(new_kick, state.variants), 4]
    assert state.dealer == 2
    assert state.deal_no == 1
    assert state.hand_no == 0
    assert [h.bit_count() for h in state.hands] == [6] * 4
    assert state.dealt == state.hands
    assert len(state.stock) == 27
    assert state.phase == STAND_OR_BEG
    assert state.turn == 3
    assert state.trump == -1
    deal = [e for e in events if e["type"] == "deal"]
    assert len(deal) == 1
    assert deal[0]["dealer"] == 2
    assert deal[0]["deal"] == 1


def test_R11_two_players_five_runs_then_cards_turned_one_by_one():
    """R11 (2 players): up to five runs (hands of 21), then the remaining cards are turned
    one at a time; each scores kick points; the first of a new suit is trump."""
    kicks = ["2H", "3H", "4H", "5H", "7H", "8H", "AH", "JH", "AD"]
    state, _ = rigged_game(2, 0, {}, kicks, runs=5)
    state, events = _run(state)
    assert [e["type"] for e in events].count("run_deal") == 5
    assert _kicks(events) == kicks[1:]
    assert score_items(events) == [("kick", 0, 1), ("kick", 0, 3), ("kick", 0, 1)]
    assert state.scores == [5, 0]
    assert [h.bit_count() for h in state.hands] == [21, 21]
    assert state.trump == 1
    assert len(state.stock) == 1
    assert state.phase == PLAY
    assert state.turn == 1


def test_R11_two_players_exhausted_pack_is_redealt_by_the_same_dealer_keeping_points():
    """R11 (2 players): five same-suit runs, then the last four cards one by one, all of the
    begged suit: the same dealer redeals from the start; the points stand."""
    kicks = ["2C", "3C", "4C", "5C", "6C", "7C", "8C", "9C", "JC", "AC"]
    state, _ = rigged_game(2, 1, {}, kicks, runs=5, scores=(2, 0))
    state, events = _run(state)
    types = [e["type"] for e in events]
    assert types.count("run_deal") == 5
    cut = types.index("redeal")
    assert _kicks(events[:cut]) == kicks[1:]
    assert score_items(events[:cut]) == [("kick", 1, 2), ("kick", 1, 3), ("kick", 1, 1)]
    assert state.scores == [2, 6 + kick_points(state.kicks[0], state.variants)]
    assert state.dealer == 1
    assert state.deal_no == 1
    assert [h.bit_count() for h in state.hands] == [6, 6]
    assert state.phase == STAND_OR_BEG
    assert state.turn == 0


def test_R11_R10_redealt_hand_starts_again_with_stand_or_beg():
    """R11: the redeal is the hand dealt again from the start (R5), so the beggar decides
    again on the new kick (interpretation: R10's one beg is per deal)."""
    state, _ = rigged_game(4, 0, {}, ["2H", "3H", "4H", "5H"], runs=2)
    state, _ = _run(state)
    assert state.deal_no == 1
    assert state.phase == STAND_OR_BEG  # scores were 0: the new kick cannot end the game
    assert legal_actions(state) == [52, 53]
    assert state.turn == 1


@pytest.mark.parametrize("players", [2, 4])
def test_R11_variant_pack_runs_out_redeal_at_once(players):
    """R11 variant pack_runs_out='redeal': as soon as a full run is impossible the hand is
    redealt by the same dealer; no card is turned one by one."""
    runs = 2 if players == 4 else 5
    kicks = [*["2H", "3H", "4H", "5H", "7H", "8H"][: runs + 1], "AS"]
    # Under the default rule this deck would turn AS one by one and make spades trump.
    default, _ = _run(rigged_game(players, 0, {}, kicks, runs=runs)[0])
    assert default.trump == 3
    assert default.deal_no == 0
    v = Variants(pack_runs_out="redeal")
    state, _ = rigged_game(players, 0, {}, kicks, runs=runs, variants=v)
    state, events = _run(state)
    types = [e["type"] for e in events]
    cut = types.index("redeal")
    assert types.count("run_deal") == runs
    assert _kicks(events[:cut]) == kicks[1 : runs + 1]
    assert state.dealer == 0
    assert state.deal_no == 1
    assert [h.bit_count() for h in state.hands] == [6] * players
    assert len(state.kicks) == 1
    assert state.phase == STAND_OR_BEG


def test_R11_R22_a_card_turned_one_by_one_can_end_the_game_before_the_redeal():
    """R11/R22: each card turned one at a time scores kick points at once; the last card
    (6H, same suit, 2 points) takes the dealer's team from 12 to 14: game over, no redeal."""
    state, _ = rigged_game(4, 1, {}, ["2H", "3H", "4H", "6H"], runs=2, scores=(0, 12))
    state, events = _run(state)
    types = [e["type"] for e in events]
    assert "redeal" not in types
    assert types[-1] == "game_over"
    assert state.scores == [0, 14]
    assert state.winner == 1
