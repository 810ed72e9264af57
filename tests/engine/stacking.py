"""Hand-built ("stacked") deals for the rule tests.

``stacked_deck`` lays out a full 52-card deck in the engine's dealing order (R5, R9, R11):

1. two rounds; in each, every seat from the dealer's right gets 3 consecutive cards
   (its first three, then its next three);
2. the kick;
3. for each run of the pack: 3 cards to every seat from the dealer's right, then the kick
   that run turns up;
4. any further cards to turn up one at a time (R11), then the rest of the stock.

Cards not named anywhere fill the gaps in ascending order (2C, 3C, … AC, 2D, … AS), so a
test that cares about every card of a hand names all six.

``rigged_game`` deals such a deck into a fresh game through ``game.deal_hand``, the same
step the engine uses for its own shuffles.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

from service.engine import (
    Variants,
    apply,
    card_name,
    deal_hand,
    legal_actions,
    new_game,
    parse_card,
)

Packets = Mapping[int, Sequence[str]]


def _cards(names: Sequence[str] | str) -> list[int]:
    if isinstance(names, str):
        names = names.split()
    return [parse_card(n) for n in names]


def stacked_deck(
    players: int,
    dealer: int,
    hands: Packets,
    kicks: Sequence[str] | str,
    runs: Sequence[Packets | None] | int = (),
) -> list[int]:
    """A 52-card deck that deals ``hands`` (seat -> up to 6 cards), then turns ``kicks[0]``.

    ``runs``: for each run of the pack, seat -> up to 3 cards (``None`` or an int count:
    filled). ``kicks[i]`` is the card turned after run ``i``; kicks beyond the runs are the
    cards turned one at a time when the pack runs low. Unnamed slots take filler cards.
    """
    if isinstance(runs, int):
        runs = [None] * runs
    kick_cards = _cards(kicks)
    if len(kick_cards) < len(runs) + 1:
        raise ValueError("name a kick for the deal and for every run")
    wanted: list[list[int]] = [_cards(hands.get(s, ())) for s in range(players)]
    run_cards = [[_cards((r or {}).get(s, ())) for s in range(players)] for r in runs]
    named = [c for h in wanted for c in h] + kick_cards
    named += [c for r in run_cards for p in r for c in p]
    if len(set(named)) != len(named):
        raise ValueError("a card is named twice")
    if any(len(h) > 6 for h in wanted) or any(len(p) > 3 for r in run_cards for p in r):
        raise ValueError("at most 6 cards a hand and 3 a run packet")
    filler = iter(sorted(set(range(52)) - set(named)))

    def packet(cards: list[int], start: int) -> list[int]:
        got = cards[start : start + 3]
        return got + [next(filler) for _ in range(3 - len(got))]

    order = [(dealer + 1 + k) % players for k in range(players)]
    deck: list[int] = []
    for start in (0, 3):
        for seat in order:
            deck += packet(wanted[seat], start)
    deck.append(kick_cards[0])
    for i, run in enumerate(run_cards):
        for seat in order:
            deck += packet(run[seat], 0)
        deck.append(kick_cards[i + 1])
    deck += kick_cards[len(run_cards) + 1 :]
    deck += list(filler)
    assert sorted(deck) == list(range(52))
    return deck


def rigged_game(
    players: int,
    dealer: int,
    hands: Packets,
    kicks: Sequence[str] | str,
    runs: Sequence[Packets | None] | int = (),
    scores: Sequence[int] = (0, 0),
    variants: Variants | None = None,
    hand_no: int = 0,
):
    """A game whose current hand is dealt from ``stacked_deck`` (see there).

    ``scores`` are the points each team holds before this deal; the kick's points, if
    any, are scored on top of them. Returns ``(state, events)`` of the deal.
    """
    state, _ = new_game(players, seed=0)
    state.dealer = dealer
    state.scores = list(scores)
    state.variants = variants or Variants()
    state.hand_no = hand_no
    state.deal_no = 0
    state.items = []
    state.last_items = []
    state.winner = None
    events: list[dict] = []
    deal_hand(state, stacked_deck(players, dealer, hands, kicks, runs), events)
    return state, events


def play(state, cards: Sequence[str] | str):
    """Apply ``cards`` (names, or one space-separated string) in turn; (state, events)."""
    events: list[dict] = []
    for c in _cards(cards):
        state, more = apply(state, c)
        events += more
    return state, events


def score_items(events) -> list[tuple[str, int | None, int]]:
    """The ``(item, team, points)`` of every score event, in order."""
    return [(e["item"], e["team"], e["points"]) for e in events if e["type"] == "score"]


def names(cards) -> list[str]:
    """Card ints (or a list of actions that are all cards) as sorted names."""
    return sorted(card_name(c) for c in cards)


def held(state, seat: int) -> list[str]:
    """The names of the cards ``seat`` holds now, sorted."""
    return names(c for c in range(52) if state.hands[seat] >> c & 1)


def legal_names(state) -> list[str]:
    """The legal actions of the seat in turn, as sorted card names (play phase only)."""
    return names(legal_actions(state))


def snapshot(state) -> dict:
    """A deep copy of the state's data, to check that a refused action changed nothing."""
    return copy.deepcopy(state.to_dict())
