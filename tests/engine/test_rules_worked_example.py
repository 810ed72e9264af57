"""The worked example at the end of the rule book, played as a test (R5–R22)."""

from stacking import held, play, rigged_game, score_items

from service.engine import BEG, PLAY, RUN_PACK, apply

# Each seat's 12 cards: the first 6 dealt, then 3 in each of the two runs. Seat 3 holds
# JS (dealt in the second run), seat 2 QS; KS (seat 0, second run) is the highest trump
# dealt and 2S (seat 1) the lowest. 2H stays in the stock.
CARDS = {
    0: ["2C", "3C", "4C", "5C", "6C", "7C", "8C", "9C", "TC", "3S", "5S", "KS"],
    1: ["2D", "3D", "4D", "5D", "6D", "7D", "8D", "9D", "TD", "2S", "4S", "7S"],
    2: ["3H", "4H", "5H", "7H", "8H", "TH", "JH", "QH", "KH", "QS", "TS", "9S"],
    3: ["JC", "QC", "KC", "AC", "JD", "QD", "KD", "AD", "AH", "8S", "6S", "JS"],
}
PLAYS = [
    "2S QS JS 3S",  # trump led; seat 2 wins with QS, capturing seat 3's JS: hang jack
    "TS 8S KS 4S",  # seat 0's KS wins
    "5S 7S 9S 6S",  # seat 2
    "KH AH 2C 2D",  # seat 3 (AH)
    "AC 3C 3D 3H",  # seat 3 leads the rest and wins every trick
    "KC 4C 4D 4H",
    "QC 5C 5D 5H",
    "JC 6C 6D 7H",
    "AD 7C 7D 8H",
    "KD 8C 8D TH",
    "QD 9C 9D JH",
    "JD TC TD QH",
]
WINNERS = [2, 0, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3]


def test_R9_R11_R12_R19_R22_worked_example():
    """The rule book's example: dealer 0, kick 6H (team 0 scores 2); seat 1 begs, seat 0
    runs the pack: 9H (same suit, 0), then AS: spades trump, team 0 has 3. Hands of 12;
    seat 1 leads the first of 12 tricks. Seat 3 was dealt JS and seat 2 wins it with QS:
    hang jack, 3 for team 0, scored after High and Low."""
    hands = {s: c[:6] for s, c in CARDS.items()}
    runs = [{s: c[6:9] for s, c in CARDS.items()}, {s: c[9:] for s, c in CARDS.items()}]
    state, events = rigged_game(4, 0, hands, ["6H", "9H", "AS"], runs=runs)
    assert score_items(events) == [("kick", 0, 2)]
    state, _ = apply(state, BEG, seat=1)
    state, events = apply(state, RUN_PACK, seat=0)
    assert [(e["card"], e["points"]) for e in events if e["type"] == "kick"] == [
        ("9H", 0),
        ("AS", 1),
    ]
    assert state.scores == [3, 0]
    assert state.trump == 3
    assert state.phase == PLAY
    assert state.turn == 1
    for seat, cards in CARDS.items():
        assert held(state, seat) == sorted(cards)

    state, events = play(state, " ".join(PLAYS))
    won = [e for e in events if e["type"] == "trick_won"]
    assert len(won) == 12
    assert [e["winner"] for e in won] == WINNERS
    assert score_items(events)[:4] == [
        ("high", 0, 1),  # KS, seat 0, dealt in a run
        ("low", 1, 1),  # 2S, seat 1
        ("hang_jack", 0, 3),  # JS of seat 3 won by seat 2's QS
        ("game", 1, 1),  # team 0: 3 + 13 + 0 = 16; team 1: 60
    ]
    (game,) = [e for e in events if e["type"] == "score" and e["item"] == "game"]
    assert game["totals"] == [16, 60]
    assert [e["scores"] for e in events if e["type"] == "hand_over"] == [[7, 2]]
