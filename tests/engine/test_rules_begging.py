"""R8–R10 (stand, beg, give one, run the pack) and R12 (the beggar leads first)."""

import pytest
from stacking import held, rigged_game, score_items, snapshot

from service.engine import (
    BEG,
    GIVE_ONE,
    GIVE_ONE_OR_RUN,
    OVER,
    PLAY,
    RUN_PACK,
    STAND,
    STAND_OR_BEG,
    IllegalAction,
    Variants,
    apply,
    legal_actions,
    parse_card,
)

HEARTS = 2
SPADES = 3
DIAMONDS = 1


def test_R8_beggar_is_the_player_to_the_dealers_right_4_players():
    """R8: with 4 players the beggar, who alone decides first, is seat dealer + 1."""
    for dealer in range(4):
        state, _ = rigged_game(4, dealer, {}, ["9H"])
        assert state.phase == STAND_OR_BEG
        assert state.turn == (dealer + 1) % 4
        assert legal_actions(state) == [STAND, BEG]


def test_R8_beggar_is_the_non_dealer_in_a_2_player_game():
    """R8: with 2 players the beggar is the non-dealer."""
    for dealer in (0, 1):
        state, _ = rigged_game(2, dealer, {}, ["9H"])
        assert state.turn == 1 - dealer
        assert legal_actions(state) == [STAND, BEG]


def test_R8_R12_stand_accepts_the_kick_suit_and_the_beggar_leads():
    """R8: stand accepts the kick's suit as trump and play begins, no points scored;
    R12: the beggar leads the first trick."""
    state, _ = rigged_game(4, 2, {}, ["9H"], scores=(3, 4))
    state, events = apply(state, STAND, seat=3)
    assert state.phase == PLAY
    assert state.trump == HEARTS
    assert state.turn == 3
    assert state.scores == [3, 4]
    assert score_items(events) == []
    assert [h.bit_count() for h in state.hands] == [6, 6, 6, 6]


def test_R8_dealer_choices_are_refused_while_the_beggar_decides():
    """R8: the beggar must stand or beg; a dealer's choice is refused (R8) and changes
    nothing."""
    state, _ = rigged_game(4, 0, {}, ["9H"])
    before = snapshot(state)
    for action in (GIVE_ONE, RUN_PACK, parse_card("2C")):
        with pytest.raises(IllegalAction) as err:
            apply(state, action)
        assert err.value.rule == "R8"
        assert str(err.value).startswith("R8")
    assert snapshot(state) == before


def test_R8_R23_only_the_beggar_may_stand_or_beg():
    """R8/R23: the dealer (or anyone else) may not stand or beg for the beggar."""
    state, _ = rigged_game(4, 0, {}, ["9H"])
    before = snapshot(state)
    for seat in (0, 2, 3):
        for action in (STAND, BEG):
            with pytest.raises(IllegalAction) as err:
                apply(state, action, seat=seat)
            assert err.value.rule == "R23"
    assert snapshot(state) == before


def test_R9_beg_passes_the_decision_to_the_dealer():
    """R9: after a beg the dealer chooses: give one or run the pack."""
    state, events = apply(rigged_game(4, 1, {}, ["9H"])[0], BEG, seat=2)
    assert state.phase == GIVE_ONE_OR_RUN
    assert state.turn == 1
    assert legal_actions(state) == [GIVE_ONE, RUN_PACK]
    assert score_items(events) == []
    with pytest.raises(IllegalAction) as err:
        apply(state, STAND)
    assert err.value.rule == "R9"
    with pytest.raises(IllegalAction) as err:
        apply(state, GIVE_ONE, seat=2)
    assert err.value.rule == "R23"


@pytest.mark.parametrize(("players", "dealer"), [(4, 0), (4, 1), (2, 0), (2, 1)])
def test_R9_give_one_scores_one_for_the_beggars_team_and_keeps_the_trump(players, dealer):
    """R9: 'take one' gives the beggar's team 1 point; the kick's suit stays trump; R12:
    the beggar leads."""
    state, _ = rigged_game(players, dealer, {}, ["9H"], scores=(2, 5))
    beggar = (dealer + 1) % players
    state, _ = apply(state, BEG)
    state, events = apply(state, GIVE_ONE, seat=dealer)
    team = beggar & 1
    assert score_items(events) == [("give_one", team, 1)]
    expected = [2, 5]
    expected[team] += 1
    assert state.scores == expected
    assert state.trump == HEARTS
    assert state.phase == PLAY
    assert state.turn == beggar
    assert state.kicks == [parse_card("9H")]


def test_R9_R22_give_one_at_13_the_beggars_team_wins_by_default():
    """R9/R22: by default the dealer may give one even when the beggar's team has 13; that
    point wins the game at once."""
    state, _ = rigged_game(4, 0, {}, ["9H"], scores=(10, 13))
    state, _ = apply(state, BEG)
    assert GIVE_ONE in legal_actions(state)
    state, events = apply(state, GIVE_ONE)
    assert state.scores == [10, 14]
    assert state.phase == OVER
    assert state.winner == 1
    assert [e["type"] for e in events][-1] == "game_over"
    assert legal_actions(state) == []


def test_R9_run_pack_deals_three_each_and_a_new_suit_becomes_trump():
    """R9: running the pack sets the kick aside, deals 3 more cards to each player from the
    dealer's right, turns a new kick; a different suit is trump and play begins (R12: the
    beggar leads)."""
    hands = {s: [] for s in range(4)}
    run = {
        1: ["2S", "3S", "4S"],
        2: ["2D", "3D", "4D"],
        3: ["5D", "7D", "8D"],
        0: ["5S", "7S", "8S"],
    }
    state, _ = rigged_game(4, 0, hands, ["9H", "TD"], runs=[run])
    before = {s: held(state, s) for s in range(4)}
    state, _ = apply(state, BEG)
    state, events = apply(state, RUN_PACK)
    for seat in range(4):
        assert held(state, seat) == sorted(before[seat] + run[seat])
    assert state.trump == DIAMONDS
    assert state.kicks == [parse_card("9H"), parse_card("TD")]
    assert not any(h >> parse_card("9H") & 1 for h in state.hands)
    assert state.phase == PLAY
    assert state.turn == 1
    assert score_items(events) == []
    assert [e["type"] for e in events].count("run_deal") == 1


@pytest.mark.parametrize(("kick", "points"), [("AS", 1), ("6C", 2), ("JD", 3)])
def test_R9_R6_run_kick_scores_for_the_dealers_team_whatever_its_suit(kick, points):
    """R9: the dealer's team scores the new kick's points (R6), whatever its suit."""
    state, _ = rigged_game(4, 3, {}, ["9H", kick], runs=1, scores=(4, 4))
    state, _ = apply(state, BEG, seat=0)
    state, events = apply(state, RUN_PACK, seat=3)
    assert score_items(events) == [("kick", 1, points)]
    assert state.scores == [4, 4 + points]
    assert state.trump == parse_card(kick) // 13


def test_R9_same_suit_kicks_run_again_and_every_kick_scores():
    """R9: a kick of the begged suit means 3 more cards each and another kick, scoring again
    each time, until a new suit turns up; hands grow 6 → 9 → 12."""
    state, events0 = rigged_game(4, 0, {}, ["6H", "AH", "JS"], runs=2)
    assert score_items(events0) == [("kick", 0, 2)]
    state, _ = apply(state, BEG)
    state, events = apply(state, RUN_PACK)
    assert score_items(events) == [("kick", 0, 1), ("kick", 0, 3)]
    assert state.scores == [6, 0]
    assert [e["card"] for e in events if e["type"] == "kick"] == ["AH", "JS"]
    assert [e["type"] for e in events].count("run_deal") == 2
    assert [h.bit_count() for h in state.hands] == [12, 12, 12, 12]
    assert state.trump == SPADES
    assert state.phase == PLAY
    assert state.turn == 1


def test_R9_hands_grow_to_nine_after_one_run():
    """R9/R11: one run: hands of 9, then 9 tricks (checked by the stock size)."""
    state, _ = rigged_game(4, 0, {}, ["9H", "9C"], runs=1)
    state, _ = apply(state, BEG)
    state, _ = apply(state, RUN_PACK)
    assert [h.bit_count() for h in state.hands] == [9] * 4
    assert [h.bit_count() for h in state.dealt] == [9] * 4
    assert len(state.stock) == 52 - 36 - 2


def test_R9_same_suit_repeated_kick_points_in_a_two_player_game():
    """R9 with 2 players: runs of 3 cards each; repeated same-suit kicks keep scoring."""
    state, _ = rigged_game(2, 1, {}, ["AD", "6D", "JD", "2C"], runs=3)
    assert state.scores == [0, 1]
    state, _ = apply(state, BEG, seat=0)
    state, events = apply(state, RUN_PACK, seat=1)
    assert score_items(events) == [("kick", 1, 2), ("kick", 1, 3)]
    assert state.scores == [0, 6]
    assert state.trump == 0
    assert [h.bit_count() for h in state.hands] == [15, 15]


def test_R10_one_beg_per_hand_the_run_suit_is_final():
    """R10: once a run has produced a suit, play begins: no further stand or beg."""
    state, _ = rigged_game(4, 0, {}, ["9H", "9C"], runs=1)
    state, _ = apply(state, BEG)
    state, _ = apply(state, RUN_PACK)
    assert state.phase == PLAY
    assert all(a < 52 for a in legal_actions(state))
    before = snapshot(state)
    for action in (STAND, BEG, GIVE_ONE, RUN_PACK):
        with pytest.raises(IllegalAction):
            apply(state, action)
    assert snapshot(state) == before


def test_R10_after_give_one_no_further_beg():
    """R10: after 'take one' the trump is final and play begins; begging again is refused."""
    state, _ = rigged_game(2, 0, {}, ["9H"])
    state, _ = apply(state, BEG)
    state, _ = apply(state, GIVE_ONE)
    with pytest.raises(IllegalAction):
        apply(state, BEG)


@pytest.mark.parametrize("how", ["stand", "give_one", "run_pack"])
@pytest.mark.parametrize(("players", "dealer"), [(4, 2), (2, 0)])
def test_R12_beggar_leads_the_first_trick(how, players, dealer):
    """R12: the beggar leads the first trick whether it stood, was given one or the pack
    was run; it may lead any card in its hand (R13)."""
    state, _ = rigged_game(players, dealer, {}, ["9H", "9C"], runs=1)
    beggar = (dealer + 1) % players
    if how == "stand":
        state, _ = apply(state, STAND)
    else:
        state, _ = apply(state, BEG)
        state, _ = apply(state, GIVE_ONE if how == "give_one" else RUN_PACK)
    assert state.phase == PLAY
    assert state.turn == beggar
    assert state.trick == []
    assert legal_actions(state) == [c for c in range(52) if state.hands[beggar] >> c & 1]


def test_R9_variant_give_one_forbidden_at_target_minus_one():
    """R9 variant give_one_at_target_minus_one=False: when the beggar's team stands at
    target − 1, GIVE_ONE is not legal and is refused citing R9; the dealer must run."""
    v = Variants(give_one_at_target_minus_one=False)
    state, _ = rigged_game(4, 0, {}, ["9H", "9C"], runs=1, scores=(3, 13), variants=v)
    state, _ = apply(state, BEG)
    assert legal_actions(state) == [RUN_PACK]
    before = snapshot(state)
    with pytest.raises(IllegalAction) as err:
        apply(state, GIVE_ONE)
    assert err.value.rule == "R9"
    assert str(err.value).startswith("R9")
    assert snapshot(state) == before
    state, _ = apply(state, RUN_PACK)
    assert state.scores == [3, 13]
    assert state.phase == PLAY


def test_R9_R22_a_run_kick_that_reaches_the_target_ends_the_game_before_play():
    """R9/R22: the run's kick scores at once for the dealer's team; a Jack taking it from
    11 to 14 ends the game before any card is played (no trump, no play)."""
    state, _ = rigged_game(4, 0, {}, ["9H", "JS"], runs=1, scores=(11, 12))
    state, _ = apply(state, BEG)
    state, events = apply(state, RUN_PACK)
    assert state.scores == [14, 12]
    assert state.phase == OVER
    assert state.winner == 0
    assert [e["type"] for e in events][-1] == "game_over"
    assert "trump" not in [e["type"] for e in events]
    assert legal_actions(state) == []
