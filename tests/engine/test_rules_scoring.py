"""R17–R21: High, Low, Jack and Game at the end of a hand (and R16: every card is played).

Each hand is stacked and played card by card with chosen plays, so the items are known.
"""

import pytest
from stacking import play, rigged_game, score_items

from service.engine import STAND, apply

# S1 — 2 players, dealer 0, seat 1 leads. Trump hearts (kick 3H); AH and JH stay in the
# stock. Seat 1 is dealt KH (highest trump), seat 0 the 2H (lowest), which seat 1 captures.
S1_HANDS = {1: ["KH", "QH", "TC", "7C", "8D", "9D"], 0: ["2H", "4H", "AC", "KC", "5D", "6D"]}
# KH 2H → s1 | QH 4H → s1 | TC AC → s0 | KC 7C → s0 | 5D 8D → s1 | 9D 6D → s1
S1_PLAYS = "KH 2H QH 4H TC AC KC 7C 5D 8D 9D 6D"
# Game: seat 0 won TC AC KC 7C = 10+4+3 = 17; seat 1 won KH QH 2H 4H 8D 5D 9D 6D = 3+2 = 5.
S1_TOTALS = [17, 5]

# 4 players, dealer 0, seat 1 leads, trump hearts (kick 3H). Seat 1 leads its JH; its
# partner, seat 3, takes the trick with QH.
OWN_JACK_HANDS = {
    1: ["JH", "2D", "3D", "4D", "5D", "6D"],
    2: ["2H", "2C", "3C", "4C", "5C", "6C"],
    3: ["QH", "7D", "8D", "9D", "TD", "JD"],
    0: ["4H", "2S", "3S", "4S", "5S", "6S"],
}
OWN_JACK_PLAYS = "JH 2H QH 4H  7D 2S 2D 2C  8D 3S 3D 3C  9D 4S 4D 4C  TD 5S 5D 5C  JD 6S 6D 6C"

# 2 players, dealer 0: seat 1 leads JH, seat 0 must trump and takes it with QH.
HANG_JACK_HANDS = {
    1: ["JH", "2C", "3C", "4C", "5C", "6C"],
    0: ["QH", "2D", "3D", "4D", "5D", "6D"],
}
HANG_JACK_PLAYS = "JH QH 2D 2C 3D 3C 4D 4C 5D 5C 6D 6C"


def hand(hands, plays, kick="3H", players=2, **kw):
    """Deal with dealer 0, stand, play ``plays``; (state, events of the play)."""
    state, deal_events = rigged_game(players, 0, hands, [kick], **kw)
    state, events = apply(state, STAND)
    state, more = play(state, plays)
    return state, deal_events + events + more


def end_items(events):
    """Score items counted at the end of the hand (not kicks or give-one)."""
    return [i for i in score_items(events) if i[0] not in ("kick", "give_one")]


def game_event(events):
    (event,) = [e for e in events if e["type"] == "score" and e["item"] == "game"]
    return event


def test_R17_R18_high_and_low_go_to_the_teams_dealt_them_not_the_capturer():
    """R17: High to the team dealt the highest trump in play (KH; AH was not dealt).
    R18: Low to the team dealt the lowest trump (2H, seat 0), although seat 1 captured it."""
    _, events = hand(S1_HANDS, S1_PLAYS)
    assert end_items(events) == [("high", 1, 1), ("low", 0, 1), ("game", 0, 1)]
    high, low = [e for e in events if e["type"] == "score" and e["item"] in ("high", "low")]
    assert (high["card"], low["card"]) == ("KH", "2H")
    hand_over = [e for e in events if e["type"] == "hand_over"]
    assert hand_over[0]["scores"] == [2, 1]


def test_R16_play_goes_on_until_every_card_is_played_then_R4_deal_passes_right():
    """R16: play continues until the hands are empty (6 tricks here); the hand is then
    scored and R4: the next hand is dealt by the player to the right."""
    state, events = hand(S1_HANDS, S1_PLAYS)
    won = [e for e in events if e["type"] == "trick_won"]
    assert [e["winner"] for e in won] == [1, 1, 0, 0, 1, 1]
    types = [e["type"] for e in events]
    assert types.index("hand_over") > types.index("score")
    assert state.hand_no == 1
    assert state.dealer == 1
    assert [e["dealer"] for e in events if e["type"] == "deal"] == [0, 1]
    assert [h.bit_count() for h in state.hands] == [6, 6]


def test_R17_a_kicked_card_does_not_count_for_high():
    """R17: kicks do not count: with AH kicked (1 point to the dealer, R6), High goes to KH's
    holder, seat 1."""
    _, events = hand(S1_HANDS, S1_PLAYS, kick="AH")
    assert score_items(events)[0] == ("kick", 0, 1)
    assert end_items(events) == [("high", 1, 1), ("low", 0, 1), ("game", 0, 1)]


def test_R18_low_stays_with_its_holders_team_in_a_four_player_game():
    """R18: the 2H dealt to seat 2 and captured by seat 3's QH still scores Low for team 0;
    R17: High (QH) for team 1."""
    _, events = hand(OWN_JACK_HANDS, OWN_JACK_PLAYS, players=4)
    items = end_items(events)
    assert items[:2] == [("high", 1, 1), ("low", 0, 1)]


def test_R19_jack_scores_one_when_its_holders_team_wins_it_partner_captures():
    """R19: the jack of trumps scores 1 for its holder's team when that team wins the trick
    holding it — here the holder's partner takes it with a higher trump."""
    _, events = hand(OWN_JACK_HANDS, OWN_JACK_PLAYS, players=4)
    items = end_items(events)
    assert items == [("high", 1, 1), ("low", 0, 1), ("jack", 1, 1), ("game", 1, 1)]
    assert game_event(events)["totals"] == [0, 14]
    assert [e["scores"] for e in events if e["type"] == "hand_over"] == [[1, 3]]


def test_R19_jack_scores_one_when_holder_wins_with_it():
    """R19: the holder leads its jack and wins the trick with it: 1 for its team."""
    hands = {1: ["JH", "5H", "2C", "3C", "4C", "5C"], 0: ["4H", "2D", "3D", "4D", "5D", "6D"]}
    # JH 4H → s1 | 5H 2D → s1 | 2C 3D → s1 | 3C 4D | 4C 5D | 5C 6D → all s1
    _, events = hand(hands, "JH 4H 5H 2D 2C 3D 3C 4D 4C 5D 5C 6D")
    assert end_items(events) == [("high", 1, 1), ("low", 0, 1), ("jack", 1, 1), ("game", 1, 1)]


def test_R19_hang_jack_scores_three_for_the_team_that_captures_it():
    """R19: when the other team captures the jack of trumps (with a higher trump), it
    scores 3 ('hang jack'), counted after High and Low."""
    _, events = hand(HANG_JACK_HANDS, HANG_JACK_PLAYS)
    assert end_items(events) == [
        ("high", 0, 1),
        ("low", 1, 1),
        ("hang_jack", 0, 3),
        ("game", 0, 1),
    ]
    hang = [e for e in events if e["type"] == "score" and e["item"] == "hang_jack"]
    assert hang[0]["card"] == "JH"


def test_R6_R19_kicked_jack_scores_three_as_a_kick_and_never_as_jack():
    """R6/R19: a kicked jack of trumps scores 3 for the dealer's team as a kick; it was
    dealt to no player, so there is no Jack item at the end of the hand."""
    _, events = hand(S1_HANDS, S1_PLAYS, kick="JH")
    assert score_items(events)[0] == ("kick", 0, 3)
    assert end_items(events) == [("high", 1, 1), ("low", 0, 1), ("game", 0, 1)]
    assert [e["scores"] for e in events if e["type"] == "hand_over"] == [[5, 1]]


def test_R19_no_jack_item_when_the_jack_stays_in_the_stock():
    """R19: Jack counts only if the jack of trumps was dealt; JH left in the stock: none."""
    _, events = hand(S1_HANDS, S1_PLAYS)
    assert not [i for i in end_items(events) if i[0] in ("jack", "hang_jack")]


def test_R20_game_totals_count_card_points_of_every_suit():
    """R20: each team totals A 4, K 3, Q 2, J 1, T 10 over the cards it won, every suit
    counting (here mostly clubs); the higher total scores 1."""
    _, events = hand(S1_HANDS, S1_PLAYS)
    event = game_event(events)
    assert event["totals"] == S1_TOTALS
    assert (event["team"], event["points"]) == (0, 1)


TIE_BEGGAR = ["TC", "2C", "3C", "4H", "7D", "8D"]
TIE_DEALER = ["4C", "5C", "6C", "TD", "2D", "3D"]
# b TC d 4C → b (10) | b 2C d 5C → d | d TD b 7D → d (10) | d 2D b 8D → b | b 3C d 6C → d |
# d 3D b 4H → b: 10 each. The 4H is the only trump dealt.
TIE_PLAYS = "TC 4C 2C 5C TD 7D 2D 8D 3C 6C 3D 4H"


def test_R20_tied_game_scores_nobody():
    """R20: on equal Game totals nobody scores Game."""
    _, events = hand({1: TIE_BEGGAR, 0: TIE_DEALER}, TIE_PLAYS)
    event = game_event(events)
    assert event["totals"] == [10, 10]
    assert (event["team"], event["points"]) == (None, 0)
    assert [e["scores"] for e in events if e["type"] == "hand_over"] == [[0, 2]]


def test_R21_a_single_trump_dealt_scores_high_and_low_for_its_holder():
    """R21: one trump dealt in all (4H) is both highest and lowest: its holder's team scores
    High and Low; no Jack."""
    _, events = hand({1: TIE_BEGGAR, 0: TIE_DEALER}, TIE_PLAYS)
    assert end_items(events) == [("high", 1, 1), ("low", 1, 1), ("game", None, 0)]


def test_R21_single_trump_in_a_four_player_game():
    """R21 with 4 players: the lone trump's holder's team (seat 2 → team 0) scores both."""
    hands = {
        1: ["2C", "3C", "4C", "5C", "6C", "7C"],
        2: ["9C", "2H", "2D", "3D", "4D", "5D"],
        3: ["8C", "TC", "JC", "QC", "KC", "AC"],
        0: ["2S", "3S", "4S", "5S", "6S", "7S"],
    }
    # seat 2 trumps the club lead with its lone 2H (while holding 9C), then leads and wins
    # its diamonds; seat 3 takes the last trick with AC.
    plays = "2C 2H 8C 2S  2D TC 3S 3C  3D JC 4S 4C  4D QC 5S 5C  5D KC 6S 6C  9C AC 7S 7C"
    _, events = hand(hands, plays, kick="3H", players=4)
    assert end_items(events) == [("high", 0, 1), ("low", 0, 1), ("game", 0, 1)]
    assert game_event(events)["totals"] == [16, 4]


def test_R21_no_trump_dealt_no_high_low_or_jack():
    """R21: no trump dealt at all: only Game is counted."""
    hands = {1: ["AC", "KC", "2D", "3D", "4D", "5D"], 0: ["2C", "3C", "QD", "KD", "AD", "TD"]}
    # AC 2C → s1 (4) | KC 3C → s1 (3) | 2D QD → s0 | KD 3D | AD 4D | TD 5D → s0 (19)
    _, events = hand(hands, "AC 2C KC 3C 2D QD KD 3D AD 4D TD 5D")
    assert end_items(events) == [("game", 0, 1)]
    assert game_event(events)["totals"] == [19, 7]


def test_R16_R22_a_hand_scored_without_dealing_the_next_scores_the_same():
    """``apply(..., deal_next=False)`` (for simulations) scores the last card's hand exactly
    as a real step does (R17–R21, and R22: the game ends at once when a team reaches the
    target), but deals nothing: every hand is empty and no card can be played."""
    from service.engine import OVER, PLAY, IllegalAction, legal_actions
    from service.engine.game import hand_done, new_game

    checked = ended = 0
    for seed in range(30):
        state, _ = new_game(4 if seed % 2 else 2, seed)
        while state.phase != OVER:
            action = legal_actions(state)[seed % len(legal_actions(state))]
            dealt, events = apply(state, action)
            quiet, quiet_events = apply(state, action, None, False)
            if state.phase == PLAY and dealt.hand_no != state.hand_no:
                assert hand_done(quiet) and not hand_done(dealt)
                assert quiet.hand_no == state.hand_no
                assert quiet.items == dealt.last_items
                assert quiet_events == events[: len(quiet_events)]
                assert events[len(quiet_events)]["type"] == "deal"
                assert legal_actions(quiet) == []
                with pytest.raises(IllegalAction):
                    apply(quiet, action)  # every hand is empty: no card is legal
                checked += 1
            else:  # not the end of a hand, or the end of the game: the same step
                assert quiet.to_dict() == dealt.to_dict()
                ended += dealt.phase == OVER
            state = dealt
    assert checked > 100 and ended > 10


def test_R16_R22_a_card_played_in_place_is_the_same_step_as_apply_without_the_next_deal():
    """``play_in_place`` (the search's rollouts) is ``apply(..., deal_next=False)`` for a
    card without the copy and the events: the same trick winners (R16), score items and
    end of the game (R17–R22) at every card, and the state it was cloned from unchanged."""
    from service.engine import OVER, PLAY, legal_actions
    from service.engine.game import hand_done, new_game, play_in_place

    cards = ended = 0
    for seed in range(30):
        state, _ = new_game(4 if seed % 2 else 2, seed)
        while state.phase != OVER:
            action = legal_actions(state)[seed % len(legal_actions(state))]
            if state.phase == PLAY:
                before = state.to_dict()
                quiet, _ = apply(state, action, None, False)
                mine = state.clone()
                play_in_place(mine, action)
                assert mine.to_dict() == quiet.to_dict()
                assert state.to_dict() == before  # the original is untouched
                assert hand_done(mine) == hand_done(quiet)
                cards += 1
                ended += mine.phase == OVER
            state, _ = apply(state, action)
    assert cards > 1000 and ended > 10
