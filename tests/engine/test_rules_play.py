"""R12–R16 (leading, following, trumping, the R15 house rules, trick winner) and R23
(refused actions change nothing)."""

import pytest
from stacking import held, legal_names, play, rigged_game, snapshot

from service.engine import (
    BEG,
    PLAY,
    STAND,
    IllegalAction,
    Variants,
    apply,
    card_name,
    parse_card,
)

# 4 players, dealer 0: seat 1 (the beggar) leads; the kick 3S makes spades trump.
BASE = {
    1: ["AH", "5H", "9S", "2C", "4D", "8D"],
    2: ["KH", "7H", "QS", "4S", "3C", "5D"],
    3: ["KS", "2S", "6C", "7C", "9D", "TD"],
    0: ["KC", "QC", "JD", "QD", "AC", "AD"],
}
NO_UNDER = Variants(under_trumping=False)
DISCARD = Variants(void_may_discard=True)


def start(hands=None, variants=None, players=4):
    """Stand on the kick 3S (spades trump, no kick points); the beggar is to lead."""
    state, _ = rigged_game(players, 0, hands or BASE, ["3S"], variants=variants)
    state, _ = apply(state, STAND)
    assert state.phase == PLAY
    assert state.trump == 3
    return state


def refused(state, card: str, rule: str):
    """Assert that playing ``card`` now is refused citing ``rule`` and changes nothing."""
    before = snapshot(state)
    with pytest.raises(IllegalAction) as err:
        apply(state, parse_card(card))
    assert err.value.rule == rule
    assert str(err.value).startswith(rule + ":")
    assert snapshot(state) == before


@pytest.mark.parametrize("lead", BASE[1])
def test_R13_any_card_may_be_led(lead):
    """R13: the leader may lead any card it holds, trump or not."""
    state = start()
    assert legal_names(state) == sorted(BASE[1])
    state, events = play(state, [lead])
    assert state.trick == [parse_card(lead)]
    assert events[0] == {"type": "card_played", "seat": 1, "card": lead}
    assert state.turn == 2


def test_R14_trump_led_must_play_a_trump_if_able():
    """R14: to a trump lead, a player holding a trump must play one (any one)."""
    state, _ = play(start(), ["9S"])
    assert legal_names(state) == ["4S", "QS"]
    refused(state, "KH", "R14")
    refused(state, "3C", "R14")
    state, _ = play(state, ["4S"])  # a lower trump is fine: no need to beat
    assert legal_names(state) == ["2S", "KS"]
    refused(state, "9D", "R14")


def test_R14_trump_led_without_trumps_any_card():
    """R14: to a trump lead, a player with no trump may play any card."""
    state, _ = play(start(), ["9S", "QS", "KS"])
    assert legal_names(state) == sorted(BASE[0])
    state, _ = play(state, ["AC"])
    assert state.tricks[-1][2] == 3


def test_R14_non_trump_led_follow_suit_or_trump_by_choice():
    """R14: to a non-trump lead, follow suit or trump — trumping is allowed even when the
    player could follow; a third suit is refused."""
    state, _ = play(start(), ["5H"])
    assert legal_names(state) == ["4S", "7H", "KH", "QS"]
    refused(state, "3C", "R14")
    refused(state, "5D", "R14")
    trumped, _ = play(state, ["QS"])  # trumps while holding KH and 7H
    assert trumped.trick == [parse_card("5H"), parse_card("QS")]
    followed, _ = play(state, ["7H"])
    assert followed.trick == [parse_card("5H"), parse_card("7H")]


def test_R14_player_void_in_led_suit_holding_trumps_must_trump():
    """R14 (default): a player void in the led suit who holds a trump must trump."""
    state, _ = play(start(), ["5H", "KH"])
    assert held(state, 3) == sorted(BASE[3])
    assert legal_names(state) == ["2S", "KS"]
    for card in ("6C", "7C", "9D", "TD"):
        refused(state, card, "R14")


def test_R14_player_with_neither_led_suit_nor_trump_may_play_anything():
    """R14: only a player holding neither the led suit nor a trump may play any card."""
    state, _ = play(start(), ["5H", "KH", "KS"])
    assert legal_names(state) == sorted(BASE[0])
    state, _ = play(state, ["QD"])
    assert state.tricks[-1] == [1, [parse_card(c) for c in ("5H", "KH", "KS", "QD")], 3]


def test_R15_under_trumping_allowed_by_default():
    """R15 (default): a trump lower than one already in the trick may be played."""
    state, _ = play(start(), ["5H", "QS"])
    assert legal_names(state) == ["2S", "KS"]
    state, _ = play(state, ["2S"])
    assert state.trick[-1] == parse_card("2S")
    # ... also by a player who could follow suit
    state, _ = play(start(), ["4D", "QS"])
    assert legal_names(state) == ["2S", "9D", "KS", "TD"]


def test_R15_no_under_trumping_variant_forbids_a_lower_trump_when_following_is_possible():
    """R15 variant under_trumping=False: to a non-trump lead, a trump lower than the
    highest trump in the trick is refused (R15) to a player holding other cards; following
    and over-trumping stay legal."""
    state, _ = play(start(variants=NO_UNDER), ["4D", "QS"])
    assert legal_names(state) == ["9D", "KS", "TD"]
    refused(state, "2S", "R15")
    state, _ = play(start(variants=NO_UNDER), ["5H", "QS"])
    assert legal_names(state) == ["KS"]
    refused(state, "2S", "R15")
    refused(state, "6C", "R14")


def test_R15_no_under_trumping_player_left_without_a_legal_card_may_play_any_other():
    """R15 variant: a player void in the led suit whose only trumps are under-trumps is left
    with no legal card under R14, so may play any card that is not an under-trump."""
    hands = {**BASE, 3: ["TS", "2S", "6C", "7C", "9D", "TD"]}
    state, _ = play(start(hands, NO_UNDER), ["5H", "QS"])
    assert legal_names(state) == ["6C", "7C", "9D", "TD"]
    refused(state, "TS", "R15")
    refused(state, "2S", "R15")
    # the default rule would force the (under-)trump instead
    default, _ = play(start(hands), ["5H", "QS"])
    assert legal_names(default) == ["2S", "TS"]


def test_R15_no_under_trumping_exception_hand_of_nothing_but_trumps():
    """R15 variant: a player whose hand holds nothing but trumps may under-trump."""
    hands = {**BASE, 3: ["2S", "5S", "6S", "7S", "8S", "TS"]}
    state, _ = play(start(hands, NO_UNDER), ["5H", "QS"])
    assert legal_names(state) == sorted(hands[3])
    state, _ = play(state, ["2S"])
    assert state.trick[-1] == parse_card("2S")


def test_R15_no_under_trumping_does_not_apply_to_a_trump_lead():
    """R15 variant: the restriction is for a non-trump lead; to a trump lead R14 applies."""
    state, _ = play(start(variants=NO_UNDER), ["9S", "QS"])
    assert legal_names(state) == ["2S", "KS"]
    state, _ = play(state, ["2S"])
    assert state.trick[-1] == parse_card("2S")


def test_R15_void_may_discard_variant():
    """R15 variant void_may_discard=True: a player void in the led suit may play any card,
    trump or not; a player holding the led suit must still follow or trump (R14)."""
    state, _ = play(start(variants=DISCARD), ["5H"])
    assert legal_names(state) == ["4S", "7H", "KH", "QS"]
    refused(state, "3C", "R14")
    state, _ = play(state, ["KH"])
    assert legal_names(state) == sorted(BASE[3])
    discarded, _ = play(state, ["6C"])
    assert discarded.trick[-1] == parse_card("6C")
    trumped, _ = play(state, ["2S"])
    assert trumped.trick[-1] == parse_card("2S")


@pytest.mark.parametrize(
    ("cards", "winner"),
    [
        (["5H", "KH", "KS", "AC"], 3),  # the only trump wins
        (["5H", "QS", "KS", "AD"], 3),  # the highest of two trumps wins
        (["AH", "7H", "2S", "KC"], 3),  # the lowest trump beats the Ace of the led suit
        (["4D", "5D", "9D", "AD"], 0),  # no trump: the highest of the led suit
        (["8D", "5D", "TD", "JD"], 0),  # R2: J beats 10
        (["8D", "QS", "TD", "AD"], 2),  # a trump beats the Ace of the led suit
        (["2C", "3C", "7C", "KC"], 0),  # no trump: K is highest of clubs played
        (["9S", "4S", "KS", "AC"], 3),  # trump led: highest trump
    ],
)
def test_R16_trick_winner_and_R12_winner_leads_next(cards, winner):
    """R16: the highest trump wins the trick; with no trump, the highest card of the led
    suit. R12: the winner leads the next trick."""
    state, events = play(start(), cards)
    assert state.tricks == [[1, [parse_card(c) for c in cards], winner]]
    won = [e for e in events if e["type"] == "trick_won"]
    assert [(e["winner"], e["team"]) for e in won] == [(winner, winner & 1)]
    assert state.turn == winner
    assert state.trick == []
    assert [h.bit_count() for h in state.hands] == [5, 5, 5, 5]


def test_R16_off_suit_card_never_wins():
    """R16: a card neither of the led suit nor trump cannot win, however high."""
    hands = {1: ["2H", "3D", "4D", "5D", "7D", "8D"], 0: ["AC", "KC", "QC", "JC", "TC", "AD"]}
    state, _ = play(start(hands, players=2), ["2H"])
    assert legal_names(state) == sorted(hands[0])
    state, _ = play(state, ["AC"])
    assert state.tricks == [[1, [parse_card("2H"), parse_card("AC")], 1]]
    assert state.turn == 1


def test_R23_out_of_turn_actions_are_refused_and_change_nothing():
    """R23: an action from a seat whose turn it is not is refused (IllegalAction) and the
    state is left unchanged; the same card from the right seat is accepted."""
    state = start()
    before = snapshot(state)
    for seat, card in ((2, "KH"), (0, "AC"), (3, "KS")):
        with pytest.raises(IllegalAction) as err:
            apply(state, parse_card(card), seat=seat)
        assert err.value.rule == "R23"
    with pytest.raises(IllegalAction):
        apply(state, BEG, seat=2)
    assert snapshot(state) == before
    state, _ = apply(state, parse_card("AH"), seat=1)
    with pytest.raises(IllegalAction) as err:
        apply(state, parse_card("AC"), seat=0)
    assert err.value.rule == "R23"


def test_R23_card_not_in_hand_or_not_a_card_is_refused_and_reveals_nothing():
    """R23: playing a card one does not hold (e.g. another seat's) or a non-card action is
    refused, changes nothing, and the message names no card the actor has not seen."""
    state = start()
    before = snapshot(state)
    with pytest.raises(IllegalAction) as err:
        apply(state, parse_card("KH"))
    message = str(err.value)
    assert message.split(":")[0] in {"R13", "R14", "R23"}
    others = {c for s in (0, 2, 3) for c in BASE[s]} - {"KH"}
    assert not [c for c in others if c in message]
    for action in (STAND, BEG, 99, -1):
        with pytest.raises(IllegalAction):
            apply(state, action)
    assert snapshot(state) == before


def test_R23_apply_never_mutates_its_input_state():
    """R23 / plain data: a legal action returns a new state and leaves the old one as it
    was."""
    state = start()
    before = snapshot(state)
    new, _ = play(state, ["AH", "KH", "KS", "AC"])
    assert snapshot(state) == before
    assert new.tricks and not state.tricks
    assert [card_name(c) for c in new.tricks[0][1]] == ["AH", "KH", "KS", "AC"]
