"""R1–R4 (players, deck, seats and teams, the cut) and R7/R23 (nothing hidden is shown)."""

import pytest
from stacking import rigged_game

from service.engine import (
    STAND,
    IllegalAction,
    apply,
    new_game,
    parse_card,
    seat_view,
    spectator_view,
    team_of,
)
from service.engine.cards import card_name


@pytest.mark.parametrize("players", [0, 1, 3, 5, 6])
def test_R1_only_two_or_four_players(players):
    """R1: All Fours is played by 2 or 4 players."""
    with pytest.raises(ValueError):
        new_game(players, 1)


def test_R1_R3_partners_sit_opposite_and_seats_alternate_teams():
    """R1/R3: with 4 players seats 0 and 2 are one team, 1 and 3 the other; with 2 players
    each seat is its own team."""
    assert [team_of(s) for s in range(4)] == [0, 1, 0, 1]
    assert new_game(4, 3)[1][0]["teams"] == [[0, 2], [1, 3]]
    assert new_game(2, 3)[1][0]["teams"] == [[0], [1]]


def test_R2_card_notation_and_rank_order():
    """R2: 52 cards, 13 ranks per suit from 2 up to A; notation like AS, TD, 2C."""
    assert [card_name(c) for c in (0, 12, 13, 51)] == ["2C", "AC", "2D", "AS"]
    assert parse_card("10d") == parse_card("TD")
    assert len({card_name(c) for c in range(52)}) == 52
    with pytest.raises(ValueError):
        parse_card("1S")


@pytest.mark.parametrize("players", [2, 4])
@pytest.mark.parametrize("seed", range(12))
def test_R4_first_dealer_is_the_highest_cut_ties_recut(players, seed):
    """R4: every player cuts; the highest card deals; players tied for highest cut again."""
    state, events = new_game(players, seed)
    rounds = events[0]["cut"]
    cutting = list(range(players))
    for r in rounds:
        assert [x["seat"] for x in r] == cutting
        ranks = {x["seat"]: parse_card(x["card"]) % 13 for x in r}
        top = max(ranks.values())
        cutting = [s for s in cutting if ranks[s] == top]
    assert cutting == [state.first_dealer] == [state.dealer]


def test_R7_a_seat_sees_only_its_own_hand_and_a_spectator_none():
    """R7: no player's hand is shown to anyone else before the game is over."""
    hands = {1: ["AH", "KH", "QH", "JH", "TH", "9H"], 2: ["AS", "KS", "QS", "JS", "TS", "9S"]}
    state, _ = rigged_game(4, 0, hands, ["2D"])
    view = seat_view(state, 1)
    assert sorted(view["hand"]) == sorted(hands[1])
    assert not set(hands[2]) & set(str(view).replace("'", " ").split())
    spectator = spectator_view(state)
    assert spectator["hand"] is None
    shown = set(str(spectator).replace("'", " ").split())
    assert not (set(hands[1]) | set(hands[2])) & shown


def test_R23_refused_action_message_starts_with_the_rule_id():
    """R23: an out-of-turn action is refused with a clear error naming the rule."""
    state, _ = rigged_game(4, 0, {}, ["2D"])
    with pytest.raises(IllegalAction) as err:
        apply(state, STAND, seat=2)
    assert str(err.value).startswith("R23: ")
