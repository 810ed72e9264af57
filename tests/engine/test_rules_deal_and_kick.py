"""R5 (the deal and the kick), R6 (kick points), and a kick that ends the game (R22)."""

import pytest
from stacking import held, rigged_game, score_items, stacked_deck

from service.engine import (
    BEG,
    OVER,
    RUN_PACK,
    STAND,
    STAND_OR_BEG,
    IllegalAction,
    State,
    Variants,
    apply,
    deal_hand,
    legal_actions,
    new_game,
    parse_card,
    seat_view,
    spectator_view,
)
from service.engine.cards import cards_of

HANDS4 = {
    1: ["2C", "3C", "4C", "5C", "7C", "8C"],
    2: ["2D", "3D", "4D", "5D", "7D", "8D"],
    3: ["2H", "3H", "4H", "5H", "7H", "8H"],
    0: ["2S", "3S", "4S", "5S", "7S", "8S"],
}


def test_R5_deal_order_two_rounds_of_three_from_dealers_right_then_the_kick():
    """R5: six cards each, dealt in threes from the dealer's right, then the kick is turned.

    Built from a raw deck (not the stacking helper), so the helper's layout is checked too.
    """
    state, _ = new_game(4, seed=3)
    state.dealer = 2
    state.scores = [0, 0]
    state.items = []
    deck = list(range(52))
    deal_hand(state, deck, [])
    # Seats in dealing order: 3, 0, 1, 2; round 1 takes deck[0:12], round 2 deck[12:24].
    for k, seat in enumerate((3, 0, 1, 2)):
        expected = deck[3 * k : 3 * k + 3] + deck[12 + 3 * k : 12 + 3 * k + 3]
        assert cards_of(state.hands[seat]) == sorted(expected)
        assert state.dealt[seat] == state.hands[seat]
    assert state.kicks == [deck[24]]
    assert state.stock == deck[25:]
    assert stacked_deck(4, 2, {s: [] for s in range(4)}, ["2C"])[24] == parse_card("2C")


def test_R5_stacked_deal_gives_each_seat_its_six_cards_and_turns_the_kick():
    """R5: each seat holds exactly its six cards; the kick's suit is the proposed trump and
    the beggar is asked to stand or beg; the rest of the pack is the stock."""
    state, events = rigged_game(4, 0, HANDS4, ["9H"])
    for seat, cards in HANDS4.items():
        assert held(state, seat) == sorted(cards)
    assert state.kicks == [parse_card("9H")]
    assert len(state.stock) == 52 - 24 - 1
    assert state.phase == STAND_OR_BEG
    assert state.trump == -1
    assert [e["card"] for e in events if e["type"] == "kick"] == ["9H"]


@pytest.mark.parametrize("players", [2, 4])
@pytest.mark.parametrize("seed", [0, 1, 2, 17])
def test_R5_R6_seeded_deal_six_each_and_the_kick_belongs_to_no_hand(players, seed):
    """R5: every player gets 6 cards; R6: the kick belongs to no hand; the 52 cards are
    hands + kick + stock."""
    state, _ = new_game(players, seed)
    assert [h.bit_count() for h in state.hands] == [6] * players
    kick = state.kicks[0]
    assert not any(h >> kick & 1 for h in state.hands)
    everything = [c for h in state.hands for c in cards_of(h)] + state.kicks + state.stock
    assert sorted(everything) == list(range(52))


@pytest.mark.parametrize(
    ("kick", "points"), [("AH", 1), ("6H", 2), ("JH", 3), ("AC", 1), ("6S", 2), ("JD", 3)]
)
@pytest.mark.parametrize("dealer", [0, 1, 2, 3])
def test_R6_kick_ace_six_jack_score_1_2_3_for_dealers_team(kick, points, dealer):
    """R6: a kicked Ace scores 1, Six 2, Jack 3, at once, for the dealer's team."""
    state, events = rigged_game(4, dealer, {}, [kick])
    team = dealer & 1
    assert score_items(events) == [("kick", team, points)]
    expected = [0, 0]
    expected[team] = points
    assert state.scores == expected
    assert state.phase == STAND_OR_BEG


def test_R6_kicked_jack_scores_three_for_dealer_team_in_two_player_game():
    """R6 with 2 players: the dealer is a team of its own and scores the kicked Jack's 3."""
    state, events = rigged_game(2, 1, {}, ["JS"])
    assert score_items(events) == [("kick", 1, 3)]
    assert state.scores == [0, 3]


@pytest.mark.parametrize("rank", list("2345789TQK"))
def test_R6_other_kicked_ranks_score_nothing(rank):
    """R6: any kicked rank other than Ace, Six, Jack scores 0."""
    state, events = rigged_game(4, 0, {}, [rank + "D"], scores=(5, 4))
    assert score_items(events) == []
    assert state.scores == [5, 4]
    kick_events = [e for e in events if e["type"] == "kick"]
    assert [(e["card"], e["points"]) for e in kick_events] == [(rank + "D", 0)]


def test_R6_R22_kick_that_reaches_target_ends_the_game_before_any_play():
    """R22: a kick can end the game before anyone has played a card; R6 scores it for the
    dealer's team. Nothing can be done afterwards."""
    state, events = rigged_game(4, 3, {}, ["AC"], scores=(13, 13))
    assert state.scores == [13, 14]
    assert state.phase == OVER
    assert state.winner == 1
    assert [e["type"] for e in events][-2:] == ["score", "game_over"]
    assert legal_actions(state) == []
    for action in (STAND, BEG, RUN_PACK):
        with pytest.raises(IllegalAction) as err:
            apply(state, action)
        assert err.value.rule == "R22"


def test_R6_R22_kicked_jack_ends_the_game_from_eleven():
    """R6/R22: a kicked Jack (3) takes the dealer's team from 11 to 14: game over."""
    state, _ = rigged_game(2, 0, {}, ["JH"], scores=(11, 13))
    assert state.scores == [14, 13]
    assert state.phase == OVER
    assert state.winner == 0


def test_R6_R22_kick_short_of_target_does_not_end_the_game():
    """R22: 12 + a kicked Ace is 13: the game goes on to the beggar's decision."""
    state, _ = rigged_game(4, 0, {}, ["AD"], scores=(12, 13))
    assert state.scores == [13, 13]
    assert state.phase == STAND_OR_BEG
    assert state.winner is None
    assert legal_actions(state) == [STAND, BEG]


def test_R6_R22_first_kick_of_a_new_game_can_end_it_and_the_state_stays_usable():
    """R22: a kick can end the game before anyone plays — even the very first kick of a new
    game (target 1, variant). The finished game must still be a valid state: R7 views work
    and it survives the JSON round trip like any other state."""
    seed = next(s for s in range(100) if new_game(4, s)[0].scores != [0, 0])
    state, events = new_game(4, seed, Variants(target=1))
    assert state.phase == OVER
    assert state.winner == state.dealer & 1
    assert [e["type"] for e in events][-1] == "game_over"
    assert seat_view(state, 0)["winner"] == state.winner
    assert spectator_view(state)["phase"] == OVER
    assert State.from_dict(state.to_dict()) == state
