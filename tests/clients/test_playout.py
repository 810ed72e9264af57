"""The rollout's card play on masks (``playout._pick``, through ``rollout_card``) and its
hand played out on local lists (``playout.play_hand``) are the ones they replaced.

The search values every action by playing sampled deals out with this policy; the
analysis's values and the bot's moves are only reproducible from one version to the next
if the policy plays the same card in every position. ``reference_card`` below is the
policy as it was written on card lists, kept as its specification; ``reference_hand``
plays a hand out a card at a time through the engine (``play_in_place``).
"""

from __future__ import annotations

import random

from clients.strategies.playout import _COST, play_hand, rollout_card
from service.engine import OVER, PLAY
from service.engine.cards import GAME_POINTS, JACK, SUIT_MASK, cards_of
from service.engine.game import hand_done, play_in_place
from service.engine.play import legal_play_mask, winning_index
from service.engine.state import State
from tests.clients.test_heuristic_masks import positions


def _beaten_by(c: int, hand: int, trump: int) -> bool:
    suit = c // 13
    if hand & SUIT_MASK[suit] & ~((2 << c) - 1):
        return True
    return suit != trump and bool(hand & SUIT_MASK[trump])


def reference_card(s: State) -> int:
    """The rollout policy on lists of cards (``epsilon`` 0), as it was first written."""
    trump = s.trump
    hands = s.hands
    seat = s.turn
    cards = cards_of(legal_play_mask(hands[seat], s.trick, trump, s.variants))
    if len(cards) == 1:
        return cards[0]
    cost = _COST[trump]
    trick = s.trick
    n = s.players
    jack = trump * 13 + JACK
    if not trick:
        opp = 0
        for o in range(n):
            if (o ^ seat) & 1:
                opp |= hands[o]
        trumps = [c for c in cards if c // 13 == trump]
        if trumps:
            top = trumps[-1]
            if not _beaten_by(top, opp, trump) and (
                opp & SUIT_MASK[trump] or top == jack or GAME_POINTS[top] >= 10
            ):
                return top
        side = [c for c in cards if c // 13 != trump]
        for c in reversed(side):
            if not opp & SUIT_MASK[c // 13] & ~((2 << c) - 1) and not opp & SUIT_MASK[trump]:
                return c
        return min(cards, key=cost.__getitem__)
    i = winning_index(trick, trump)
    best = trick[i]
    later = 0
    for k in range(len(trick) + 1, n):
        other = (s.leader + k) % n
        if (other ^ seat) & 1:
            later |= hands[other]
    if n == 4 and len(trick) - i == 2:
        if not _beaten_by(best, later, trump):
            if jack in cards:
                return jack
            return max(cards, key=lambda c: GAME_POINTS[c] - (c // 13 == trump) * 20)
        return min(cards, key=cost.__getitem__)
    best_suit = best // 13
    winners = [c for c in cards if (c > best if c // 13 == best_suit else c // 13 == trump)]
    if not winners:
        return min(cards, key=cost.__getitem__)
    safe = [c for c in winners if not _beaten_by(c, later, trump)]
    if jack in safe:
        return jack
    for c in safe:
        if c % 13 == 8:
            return c
    stake = sum(GAME_POINTS[c] for c in trick) + (10 if jack in trick else 0)
    if safe:
        cheap = min(safe, key=cost.__getitem__)
        if stake or cheap // 13 != trump:
            return cheap
    if stake >= 10:
        return min(winners, key=cost.__getitem__)
    plain = [c for c in winners if c // 13 != trump]
    if plain:
        return min(plain, key=cost.__getitem__)
    return min(cards, key=cost.__getitem__)


def reference_hand(s: State) -> State:
    """``s``'s hand played out a card at a time by the engine with ``reference_card``."""
    s = s.clone()
    while s.phase == PLAY and not hand_done(s):
        play_in_place(s, reference_card(s))
    return s


def test_the_rollout_card_on_masks_is_the_reference_card_in_every_position_R13_R16():
    """Led and followed, partner or opponent winning, under every variant of R15."""
    rng = random.Random(3)
    checked = 0
    for state, _view, _choice in positions(60, seed=9):
        assert rollout_card(state, rng, 0.0) == reference_card(state), state.to_dict()
        checked += 1
    assert checked >= 2000


def test_a_hand_played_out_ends_where_the_engine_card_by_card_ends_R16_R22():
    """Every trick's winner (R16), the hand's score items and whether the game ended (R17–R22)
    as the engine has them, from positions at every trick of both table sizes."""
    rng = random.Random(4)
    ended = 0
    for state, _view, _choice in positions(30, seed=11):
        before = state.to_dict()
        got = play_hand(state, rng, 0.0)
        assert got.to_dict() == reference_hand(state).to_dict()
        assert state.to_dict() == before  # played into a copy
        ended += got.phase == OVER
    assert ended > 0
