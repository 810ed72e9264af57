"""A determinized Monte Carlo player ("perfect information Monte Carlo").

For each decision in play it repeatedly deals the cards it cannot see in a way that
agrees with everything its seat has seen — its own hand, the kicks, every card played
this hand, and the voids the plays revealed (R14, R15) — builds an engine ``State`` from
that deal, and plays every legal card out to the end of the hand with a quick rollout
policy. The card with the best mean result for its team (the hand's point margin, plus a
bonus for winning the game) is played. Evaluating all candidate cards on the same deals
cancels most of the luck of the deal out of the comparison.

The decisions before play (stand or beg, give one or run) are searched the same way:
each sampled deal also fixes the stock, so running the pack, its kicks and the cards it
deals are simulated by the engine itself; the dealer a beggar faces is modelled by the
heuristic's rule on its sampled hand. Both options are scored on the same deals.

It never reads hidden state: the only input is the seat view.
"""

from __future__ import annotations

import random
import time

from service.engine.actions import BEG, GIVE_ONE, RUN_PACK, STAND, parse_action
from service.engine.cards import GAME_POINTS, JACK, SUIT_MASK, cards_of, parse_card
from service.engine.game import apply
from service.engine.play import legal_play_mask, winning_index
from service.engine.state import GIVE_ONE_OR_RUN, OVER, PLAY, STAND_OR_BEG, State
from service.engine.variants import Variants

from . import heuristic
from .base import View
from .knowledge import Knowledge, bits, read_view

DEFAULT_MOVE_TIME = 0.1
WIN_VALUE = 10.0  # a won (lost) game is worth this many hand points on top of the margin

# Cost of giving a card up, per trump suit (see ``heuristic.cost``), precomputed so the
# rollout policy is a few list lookups a move.
_COST = [[heuristic.cost(c, t) for c in range(52)] for t in range(4)]


class SearchStrategy:
    """Determinized Monte Carlo over the rules engine, within a per-move budget.

    ``move_time`` seconds a move (default 0.1), or, when ``simulations`` is given, that
    many sampled deals a move whatever the time (reproducible, for tests and benches).
    ``epsilon`` is the rollout policy's share of random moves.
    """

    def __init__(
        self,
        seed: int | None = None,
        move_time: float = DEFAULT_MOVE_TIME,
        simulations: int | None = None,
        epsilon: float = 0.0,
    ) -> None:
        self.rng = random.Random(seed)
        self.move_time = move_time
        self.simulations = simulations
        self.epsilon = epsilon
        self.heuristic = heuristic.HeuristicStrategy()
        self._variants: dict[tuple, Variants] = {}

    def choose(self, view: View, legal: list[str]) -> str:
        if len(legal) == 1:
            return legal[0]
        k = read_view(view)
        if view.get("decision") != PLAY:
            actions = [parse_action(a) for a in legal]
            scores = self.evaluate(k, view, actions)
            best = max(actions, key=lambda a: scores[a])
            return legal[actions.index(best)]
        cards = [parse_card(a) for a in legal]
        scores = self.evaluate(k, view, cards)
        best = max(cards, key=lambda c: scores[c])
        return legal[cards.index(best)]

    def evaluate(self, k: Knowledge, view: View, cards: list[int]) -> dict[int, float]:
        """Mean rollout value of each action (a card, or a decision before play) over
        sampled deals, within the budget."""
        variants = self._variants_of(view)
        totals = dict.fromkeys(cards, 0.0)
        deadline = time.perf_counter() + self.move_time
        n = 0
        while True:
            state = determinize(k, view, variants, self.rng)
            for c in cards:
                s, _ = apply(state, c)
                totals[c] += rollout(s, k.team, self.rng, self.epsilon)
            n += 1
            if self.simulations is not None:
                if n >= self.simulations:
                    break
            elif time.perf_counter() >= deadline:
                break
        return {c: t / n for c, t in totals.items()}

    def _variants_of(self, view: View) -> Variants:
        raw = view.get("variants") or {}
        key = tuple(sorted(raw.items()))
        v = self._variants.get(key)
        if v is None:
            v = self._variants[key] = Variants.from_dict(raw)
        return v


# --- sampling the unseen cards ------------------------------------------------------------


def sample_hands(k: Knowledge, rng: random.Random) -> tuple[list[int], list[int]]:
    """Deal the unseen cards: hands (masks, the seat's own as it is) and the stock.

    Every other seat gets exactly ``hand_sizes[seat]`` cards, none it is known not to hold
    (``Knowledge.forbidden``); the rest go to the stock, which takes anything. Cards are
    dealt most-constrained first to seats chosen in proportion to the room they have left,
    which is how a real deal spreads cards; if that paints itself into a corner (rare: only
    when many voids are known) a randomized bipartite matching finds a consistent deal.
    """
    n = k.players
    others = [s for s in range(n) if s != k.seat]
    unseen = bits(k.unseen)
    room = {s: k.hand_sizes[s] for s in others}
    stock_room = len(unseen) - sum(room.values())
    if stock_room < 0:
        raise ValueError("view is inconsistent: more hidden cards in hands than unseen cards")
    allowed = {c: [s for s in others if not k.forbidden[s] >> c & 1] for c in unseen}
    for _ in range(20):
        dealt = _greedy_deal(unseen, allowed, room, stock_room, rng)
        if dealt is not None:
            return _finish(k, dealt, rng)
    return _finish(k, _matching_deal(unseen, allowed, room, stock_room, rng), rng)


_STOCK = -1


def _greedy_deal(
    unseen: list[int],
    allowed: dict[int, list[int]],
    room: dict[int, int],
    stock_room: int,
    rng: random.Random,
) -> dict[int, int] | None:
    left = dict(room)
    left[_STOCK] = stock_room
    order = unseen[:]
    rng.shuffle(order)
    order.sort(key=lambda c: len(allowed[c]))
    out: dict[int, int] = {}
    for c in order:
        places = [s for s in allowed[c] if left[s]]
        if left[_STOCK]:
            places.append(_STOCK)
        if not places:
            return None
        total = sum(left[s] for s in places)
        r = rng.randrange(total)
        for s in places:
            r -= left[s]
            if r < 0:
                break
        out[c] = s
        left[s] -= 1
    return out


def _matching_deal(
    unseen: list[int],
    allowed: dict[int, list[int]],
    room: dict[int, int],
    stock_room: int,
    rng: random.Random,
) -> dict[int, int]:
    """A consistent deal by augmenting paths (Kuhn), with random orders for variety."""
    slots: list[int] = [s for s, r in room.items() for _ in range(r)] + [_STOCK] * stock_room
    slot_of: dict[int, int] = {}  # card -> slot index
    card_in: dict[int, int] = {}  # slot index -> card

    def fits(c: int, i: int) -> bool:
        return slots[i] == _STOCK or slots[i] in allowed[c]

    def place(c: int, seen: set[int]) -> bool:
        order = list(range(len(slots)))
        rng.shuffle(order)
        for i in order:
            if i in seen or not fits(c, i):
                continue
            seen.add(i)
            if i not in card_in or place(card_in[i], seen):
                card_in[i] = c
                slot_of[c] = i
                return True
        return False

    cards = unseen[:]
    rng.shuffle(cards)
    for c in cards:
        if not place(c, set()):
            raise ValueError("no deal of the unseen cards agrees with the revealed voids")
    return {c: slots[i] for c, i in slot_of.items()}


def _finish(k: Knowledge, dealt: dict[int, int], rng: random.Random) -> tuple[list[int], list[int]]:
    hands = [0] * k.players
    hands[k.seat] = k.hand
    stock = []
    for c, s in dealt.items():
        if s == _STOCK:
            stock.append(c)
        else:
            hands[s] |= 1 << c
    rng.shuffle(stock)
    return hands, stock


def determinize(k: Knowledge, view: View, variants: Variants, rng: random.Random) -> State:
    """An engine state for one sampled deal that agrees with everything the seat saw."""
    hands, stock = sample_hands(k, rng)
    s = State.__new__(State)
    s.players = k.players
    s.seed = rng.getrandbits(32)  # only shuffles the hands after this one
    s.variants = variants
    s.first_dealer = k.dealer
    s.ply = view.get("ply", 0)
    s.scores = list(k.scores)
    s.hand_no = view.get("hand_number", 1) - 1
    s.deal_no = 0
    s.dealer = k.dealer
    s.phase = view["decision"]
    s.turn = view["turn"]
    s.hands = hands
    s.dealt = [h | p for h, p in zip(hands, k.played_by)]
    s.stock = stock
    s.kicks = list(k.kicks)
    s.beg = view.get("beg")
    s.trump = k.trump
    s.leader = k.leader
    s.trick = list(k.trick)
    s.tricks = [[lead, cards, w] for lead, cards, w in k.tricks]
    s.items = []
    s.last_items = []
    s.winner = None
    return s


# --- playing a sampled deal out -----------------------------------------------------------


def rollout(s: State, team: int, rng: random.Random, epsilon: float) -> float:
    """Play to the end of the hand with ``rollout_card``; the value for ``team``.

    The value is the hand's point margin (items scored after the search began), plus
    ``WIN_VALUE`` if the game ended this hand in ``team``'s favour (minus, against).
    """
    hand_no = s.hand_no
    while s.hand_no == hand_no and s.phase != OVER:
        if s.phase == PLAY:
            s, _ = apply(s, rollout_card(s, rng, epsilon))
        else:  # a decision before play, or again after a redeal (R11)
            s, _ = apply(s, rollout_decision(s))
    if s.hand_no == hand_no:  # the game ended during this hand's scoring
        items = s.items
        bonus = WIN_VALUE if s.phase == OVER and s.winner == team else -WIN_VALUE
    else:
        items = s.last_items
        bonus = 0.0
    margin = 0.0
    for _item, t, points, _detail in items:
        if t is not None:
            margin += points if t == team else -points
    return margin + bonus


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
