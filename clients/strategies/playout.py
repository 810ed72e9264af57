"""The search bot's inner loop: deal the cards a seat cannot see, and play the deal out.

``search.py`` decides what to sample and how to score it; every sample then comes here
twice — once to deal the unseen cards (``Deals``), once per candidate action to play the
hand to its end (``rollout``). That is nearly all of a move's time, so this module is
compiled with mypyc together with the engine (setup.py), which roughly doubles the
samples the bot gets through in its 0.1 s a move; it is kept to plain, typed code on the
engine's card integers and masks for that reason.
"""

from __future__ import annotations

import random
from typing import Any, Final

from service.engine.actions import BEG, GIVE_ONE, RUN_PACK, STAND
from service.engine.cards import ALL_CARDS, GAME_POINTS, JACK, SUIT_MASK, cards_of
from service.engine.game import apply, hand_done, play_in_place
from service.engine.play import legal_play_mask, winning_index
from service.engine.state import GIVE_ONE_OR_RUN, OVER, PLAY, STAND_OR_BEG, State
from service.engine.variants import Variants

from . import heuristic

WIN_VALUE: Final = 10.0  # a won (lost) game is worth this many hand points on top of the margin

# Cost of giving a card up, per trump suit (see ``heuristic.cost``), precomputed so the
# rollout policy is a few list lookups a move.
_COST: Final[list[list[float]]] = [[heuristic.cost(c, t) for c in range(52)] for t in range(4)]


# --- dealing the unseen cards ------------------------------------------------------------


class Deals:
    """Random deals of the cards a seat has not seen, each agreeing with what it saw.

    Prepared once a move (the constraints do not change between samples): ``hand`` is the
    seat's own, ``unseen`` the cards it has not seen, ``allowed[i]`` the
    seats (a bit per seat) that may hold ``unseen[i]`` (not the seat itself, nor a seat
    whose plays proved it void), ``room[s]`` how many hidden cards seat ``s`` holds; the
    rest of the unseen cards are the stock, which takes anything.

    Cards that could be anywhere are dealt by one shuffle (a uniform deal of them into the
    room left); cards some seats cannot hold are dealt first, most constrained first, each
    to a place chosen in proportion to the room it has left — how a real deal spreads
    them. That can paint itself into a corner when many voids are known: ``deal`` then
    answers ``None`` and the caller falls back on an exact matching.
    """

    def __init__(
        self,
        seat: int,
        hand: int,
        unseen: list[int],
        allowed: list[int],
        room: list[int],
        played_by: list[int],
    ) -> None:
        self.seat = seat
        self.hand = hand
        self.room = room
        self.played_by = played_by
        self.stock_room = len(unseen) - sum(room)
        if self.stock_room < 0:
            raise ValueError("view is inconsistent: more hidden cards in hands than unseen cards")
        everyone = 0
        for s in range(len(room)):
            if s != seat:
                everyone |= 1 << s
        self.free: list[int] = []
        by_choice: dict[int, list[tuple[int, int]]] = {}
        for c, seats in zip(unseen, allowed):
            if seats == everyone:
                self.free.append(c)
            else:
                by_choice.setdefault(seats.bit_count(), []).append((c, seats))
        # constrained cards in groups of equal freedom, the least free first
        self.constrained: list[list[tuple[int, int]]] = [by_choice[n] for n in sorted(by_choice)]

    def deal(self, rng: random.Random) -> tuple[list[int], list[int]] | None:
        """Hands (card masks, the seat's own as it is) and the stock, in a random order."""
        n = len(self.room)
        left = list(self.room)
        stock_left = self.stock_room
        hands = [0] * n
        hands[self.seat] = self.hand
        stock: list[int] = []
        for group in self.constrained:
            order = list(group)
            _shuffle(order, rng)
            for c, seats in order:
                total = stock_left
                for s in range(n):
                    if seats >> s & 1:
                        total += left[s]
                if total == 0:
                    return None
                r = int(rng.random() * total)
                placed = -1
                for s in range(n):
                    if seats >> s & 1 and left[s]:
                        r -= left[s]
                        if r < 0:
                            placed = s
                            break
                if placed < 0:
                    stock.append(c)
                    stock_left -= 1
                else:
                    hands[placed] |= 1 << c
                    left[placed] -= 1
        free = list(self.free)
        _shuffle(free, rng)
        i = 0
        for s in range(n):
            for _ in range(left[s]):
                hands[s] |= 1 << free[i]
                i += 1
        shuffled = bool(stock)
        stock.extend(free[i:])
        if shuffled:
            _shuffle(stock, rng)
        return hands, stock

    def sample(self, template: State, rng: random.Random) -> State | None:
        """``template`` (the game as the seat sees it) with a random deal of the hidden
        cards, or ``None`` when the quick deal got stuck."""
        dealt = self.deal(rng)
        if dealt is None:
            return None
        return with_deal(template, dealt[0], dealt[1], self.played_by, rng)


def _shuffle(xs: list[Any], rng: random.Random) -> None:
    """Fisher–Yates on ``rng.random()`` (C) rather than ``rng.shuffle`` (Python, a
    ``_randbelow`` call a card): a sample shuffles ~40 cards, and this is 5 times faster."""
    for i in range(len(xs) - 1, 0, -1):
        j = int(rng.random() * (i + 1))
        xs[i], xs[j] = xs[j], xs[i]


def with_deal(
    template: State, hands: list[int], stock: list[int], played_by: list[int], rng: random.Random
) -> State:
    """A copy of ``template`` holding this deal of the cards."""
    s = template.clone()
    s.hands = hands
    s.dealt = [h | p for h, p in zip(hands, played_by)]
    s.stock = stock
    s.seed = rng.getrandbits(32)  # only shuffles the hands after this one
    return s


# --- playing a sampled deal out -----------------------------------------------------------


def rollout(s: State, team: int, rng: random.Random, epsilon: float) -> float:
    """Play to the end of the hand with ``rollout_card``; the value for ``team``.

    The value is the hand's point margin (its score items), plus ``WIN_VALUE`` if the game
    ended this hand in ``team``'s favour (minus, against). The hand is scored but the next
    one not dealt (``apply(..., deal_next=False)``): dealing would double a rollout's cost.
    """
    hand_no = s.hand_no
    end = play_hand(s, rng, epsilon)
    ours, theirs = hand_points(end, hand_no, team)
    bonus = 0.0
    if end.hand_no == hand_no and end.phase == OVER:
        bonus = WIN_VALUE if end.winner == team else -WIN_VALUE
    return ours - theirs + bonus


def play_hand(s: State, rng: random.Random, epsilon: float) -> State:
    """``s`` played to the end of its hand (scored, the next not dealt) or of the game.

    ``s`` itself is not changed: the cards are played into one copy of it
    (``play_in_place``), not a copy a card with its events as ``apply`` makes."""
    hand_no = s.hand_no
    own = False  # whether ``s`` is this function's own copy yet
    while s.phase != OVER and s.hand_no == hand_no:
        if s.phase == PLAY:
            if hand_done(s):
                break
            if not own:
                s = s.clone()
                own = True
            play_in_place(s, rollout_card(s, rng, epsilon))
        else:  # a decision before play, or again after a redeal (R11)
            s, _ = apply(s, rollout_decision(s))
            own = True
    return s


def hand_points(end: State, hand_no: int, team: int) -> tuple[float, float]:
    """The points ``team`` and its opponents scored in hand ``hand_no`` (kicks, give one,
    High, Low, Jack, Game), read from ``end``'s score items."""
    items = end.items if end.hand_no == hand_no else end.last_items
    ours = 0.0
    theirs = 0.0
    for _item, t, points, _detail in items:
        if t is not None:
            if t == team:
                ours += points
            else:
                theirs += points
    return ours, theirs


def rollout_decision(s: State) -> int:
    """Stand or beg, give one or run, by the heuristic's rules on the sampled hand."""
    trump = s.kicks[-1] // 13
    hand = s.hands[s.turn]
    target = s.variants.target
    if s.phase == STAND_OR_BEG:
        return STAND if heuristic.stands(hand, trump, s.scores, s.dealer, target) else BEG
    assert s.phase == GIVE_ONE_OR_RUN
    gives = heuristic.gives_one(hand, trump, s.scores, s.dealer, target)
    return GIVE_ONE if gives else RUN_PACK


def _beaten_by(c: int, hand: int, trump: int) -> bool:
    """Does ``hand`` hold a card that would beat ``c`` (a higher one of its suit, or any
    trump over a plain card)? Trumping is always allowed (R14), so this is exact."""
    suit = c // 13
    if hand & SUIT_MASK[suit] & ~((2 << c) - 1):
        return True
    return suit != trump and bool(hand & SUIT_MASK[trump])


def rollout_card(s: State, rng: random.Random, epsilon: float) -> int:
    """A quick, decent card for the seat in turn, playing the sampled deal open-handed.

    Within one sampled deal every hand is known, so "is this card safe?" is a few mask
    tests: cash or feed the jack and tens when nobody left can beat them, win what is
    worth winning cheaply, draw trumps with the top trump, otherwise throw the cheapest
    card; now and then (``epsilon``) any legal card.
    """
    trump = s.trump
    hands = s.hands
    seat = s.turn
    hand = hands[seat]
    cards = cards_of(legal_play_mask(hand, s.trick, trump, s.variants))
    if len(cards) == 1:
        return cards[0]
    if epsilon and rng.random() < epsilon:
        return rng.choice(cards)
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
                return c  # a master card nobody can beat or trump
        return min(cards, key=cost.__getitem__)
    i = winning_index(trick, trump)
    best = trick[i]
    later = 0
    for k in range(len(trick) + 1, n):
        other = (s.leader + k) % n
        if (other ^ seat) & 1:
            later |= hands[other]
    if n == 4 and len(trick) - i == 2:  # partner is winning
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
        if c % 13 == 8:  # a ten: its own 10 Game points come home
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


# --- the heuristic's card play, on masks ---------------------------------------------------


def _beaters(c: int, trump: int) -> int:
    """``heuristic.beaters``: every card that beats ``c`` (higher of its suit; any trump
    over a plain card)."""
    suit = c // 13
    higher = SUIT_MASK[suit] & ~((2 << c) - 1)
    return higher if suit == trump else higher | SUIT_MASK[trump]


def _may_beat(c: int, trump: int, unseen: int, seats: list[int], sizes: list[int],
              forbidden: list[int]) -> bool:
    """``heuristic.could_beat`` at its risk of 0: might one of ``seats`` (as far as the
    seat in turn can tell) hold a card that beats ``c``?"""
    b = unseen & _beaters(c, trump)
    if b:
        for o in seats:
            if sizes[o] and b & ~forbidden[o]:
                return True
    return False


def _beat_risk(c: int, trump: int, unseen: int, seats: list[int], sizes: list[int],
               forbidden: list[int]) -> float:
    """``heuristic.beat_risk``, the same arithmetic in the same order."""
    if not seats:
        return 0.0
    total = unseen.bit_count() or 1
    none = 1.0
    for x in cards_of(unseen & _beaters(c, trump)):
        room = 0
        for o in seats:
            if not forbidden[o] >> x & 1:
                room += sizes[o]
        p = room / total
        none *= max(0.0, 1.0 - p)
    return 1.0 - none


def _cheapest(cards: list[int], cost: list[float]) -> int:
    best = cards[0]
    for c in cards:
        if cost[c] < cost[best]:
            best = c
    return best


def heuristic_choice(
    hand: int, trick: list[int], leader: int, seat: int, n: int, trump: int, variants: Variants,
    gone: int, sizes: list[int], forbidden: list[int],
) -> int:
    """The card ``heuristic.choose_card`` plays for ``seat`` holding ``hand``, decided on
    masks: ``gone`` is every card the seat has seen leave play (played this hand, kicked),
    ``sizes`` every seat's hand size and ``forbidden`` the voids shown, as ``Knowledge``
    has them. The inference asks it of every card the others played, in every deal it
    weighs (``inference.play_likelihood``, ``posterior.SeatEvidence``): built from a
    ``Knowledge`` each time, ``heuristic.choose_card`` took three quarters of a 4-player
    move. tests/clients/test_heuristic_masks.py checks it is the same card, position by
    position."""
    cards = cards_of(legal_play_mask(hand, trick, trump, variants))
    if len(cards) == 1:
        return cards[0]
    unseen = ALL_CARDS & ~(hand | gone)
    cost = _COST[trump]
    jack = trump * 13 + JACK
    team = seat & 1
    if not trick:
        opponents = [o for o in range(n) if o & 1 != team]
        return _heuristic_lead(cards, trump, jack, unseen, opponents, sizes, forbidden, cost)
    i = winning_index(trick, trump)
    best = trick[i]
    winner_seat = (leader + i) % n
    opp_later = [
        (leader + k) % n for k in range(len(trick) + 1, n) if (leader + k) % n & 1 != team
    ]
    best_suit = best // 13
    winners = [c for c in cards if (c > best if c // 13 == best_suit else c // 13 == trump)]
    safe = [c for c in winners if not _may_beat(c, trump, unseen, opp_later, sizes, forbidden)]
    at_stake = 0
    for c in trick:
        at_stake += GAME_POINTS[c]
    if jack in trick:
        at_stake += 12
    if winner_seat & 1 == team:
        if not _may_beat(best, trump, unseen, opp_later, sizes, forbidden):
            if jack in cards:  # feed the partner: our jack, a counter, else the cheapest
                return jack
            counter = -1
            for c in cards:
                if c // 13 != trump and GAME_POINTS[c] >= 2 and (
                    counter < 0 or GAME_POINTS[c] > GAME_POINTS[counter]
                ):
                    counter = c
            return counter if counter >= 0 else _cheapest(cards, cost)
        if at_stake >= 10 and safe:
            return _cheapest(safe, cost)
        risk = _beat_risk(best, trump, unseen, opp_later, sizes, forbidden)
        surer = -1
        for c in winners:
            if (
                c // 13 != trump
                and GAME_POINTS[c] < 10
                and _beat_risk(c, trump, unseen, opp_later, sizes, forbidden) < risk
                and c > surer
            ):
                surer = c
        return surer if surer >= 0 else _cheapest(cards, cost)
    if jack in safe:
        return jack
    winners = [c for c in winners if c != jack]
    safe = [c for c in safe if c != jack]
    if at_stake < 10 and unseen >> jack & 1:  # keep a trump that can hang their jack
        above = [c for c in cards if c // 13 == trump and c > jack]
        if above:
            reserve = above[0]
            safe = [c for c in safe if c != reserve]
            winners = [c for c in winners if c != reserve]
    for c in safe:
        if c % 13 == 8:
            return c
    if safe and (at_stake > 0 or any(c // 13 != trump for c in safe)):
        return _cheapest(safe, cost)
    if winners and at_stake >= 10:
        return _cheapest(winners, cost)
    plain = [c for c in winners if c // 13 != trump]
    for c in plain:
        if c % 13 == 8:
            return c
    if plain:
        return _cheapest(plain, cost)
    return _cheapest(cards, cost)


def _heuristic_lead(
    cards: list[int], trump: int, jack: int, unseen: int, opponents: list[int],
    sizes: list[int], forbidden: list[int], cost: list[float],
) -> int:
    """``heuristic.lead`` on masks: draw trumps when strong, hunt their jack, else a safe
    side card."""
    ours = [c for c in cards if c // 13 == trump]
    outstanding = unseen & SUIT_MASK[trump]
    if ours and outstanding:
        top = ours[-1]
        we_hold_top = top > outstanding.bit_length() - 1
        hunting = bool(outstanding >> jack & 1) and top > jack and (
            len(ours) >= heuristic.HUNT_LEN or we_hold_top
        )
        strong = len(ours) >= heuristic.STRONG_LEN and we_hold_top
        if top != jack and (strong or hunting or (we_hold_top and jack in ours)):
            return top
        if jack in ours and not _may_beat(jack, trump, unseen, opponents, sizes, forbidden):
            return jack
    side = [c for c in cards if c // 13 != trump]
    if side:
        master = -1
        for c in side:
            if unseen & SUIT_MASK[c // 13] & ~((2 << c) - 1):
                continue
            if _may_beat(c, trump, unseen, opponents, sizes, forbidden):
                continue
            if master < 0 or (GAME_POINTS[c], c % 13) > (GAME_POINTS[master], master % 13):
                master = c
        if master >= 0:
            return master
        plain = [c for c in side if GAME_POINTS[c] < 10] or side
        return _cheapest(plain, cost)
    non_jack = [c for c in cards if c != jack] or cards
    return non_jack[0]
