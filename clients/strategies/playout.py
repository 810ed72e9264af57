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
from service.engine.game import apply, award, hand_done
from service.engine.play import legal_play_mask, winning_index
from service.engine.scoring import score_hand
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
    (``_play_out``), not a copy a card with its events as ``apply`` makes."""
    return _play_hand(s, rng, epsilon, False)


def _play_hand(s: State, rng: random.Random, epsilon: float, own: bool) -> State:
    """``play_hand``; ``own``: ``s`` is the caller's copy, to be played into."""
    hand_no = s.hand_no
    while s.phase != OVER and s.hand_no == hand_no:
        if s.phase == PLAY:
            if hand_done(s):
                break
            if not own:
                s = s.clone()
                own = True
            _play_out(s, rng, epsilon, -1)
        else:  # a decision before play, or again after a redeal (R11)
            s, _ = apply(s, rollout_decision(s))
            own = True
    return s


def _play_out(s: State, rng: random.Random, epsilon: float, first: int) -> None:
    """Play the hand of ``s`` (a state nobody else holds) to its last card with
    ``rollout_card`` — ``first`` first, unless it is -1 — and score it, as
    ``play_in_place`` a card at a time would, but on local lists: the hands copied once,
    not every card, and no trick list rebuilt a card. tests/clients/test_playout.py
    checks it ends where ``play_in_place`` does."""
    n = s.players
    trump = s.trump
    v = s.variants
    cost = _COST[trump]
    hands = s.hands = list(s.hands)
    trick = list(s.trick)
    tricks = list(s.tricks)
    leader = s.leader
    seat = s.turn
    ply = s.ply
    c = first
    while True:
        if c < 0:
            c = _pick(hands, trick, seat, leader, n, trump, v, cost, rng, epsilon)
        hands[seat] ^= 1 << c
        trick.append(c)
        c = -1
        ply += 1
        if len(trick) < n:
            seat = (seat + 1) % n
            continue
        winner = (leader + winning_index(trick, trump)) % n
        tricks.append([leader, trick, winner])
        trick = []
        leader = winner
        seat = winner
        if hands[winner] == 0:
            break
    s.trick = trick
    s.tricks = tricks
    s.leader = leader
    s.turn = seat
    s.ply = ply
    score_hand(s, [], award)


def value_deal(
    state: State, actions: list[int], team: int, rng: random.Random, epsilon: float
) -> list[float]:
    """Each action taken in ``state`` (one sampled deal) and the hand played out: four
    figures an action for ``team`` — the hand's points, its margin, the game won (1 or 0
    where the hand ends it, else ``race`` on the scores it leaves), and ``WIN_VALUE`` for
    a game won in this hand (minus, lost). ``SearchStrategy.evaluate_all`` sums them over
    the deals; here so that the loop over the actions runs compiled."""
    out: list[float] = []
    for a in actions:
        if state.phase == PLAY:  # a card, and the hand after it, played into one copy
            hand_no = state.hand_no
            end = state.clone()
            _play_out(end, rng, epsilon, a)
        else:
            s, _ = apply(state, a, None, False)
            hand_no = s.hand_no
            end = _play_hand(s, rng, epsilon, True)
        ours, theirs = hand_points(end, hand_no, team)
        bonus = 0.0
        if end.phase == OVER:
            won = end.winner == team
            win = 1.0 if won else 0.0
            if end.hand_no == hand_no:
                bonus = WIN_VALUE if won else -WIN_VALUE
        else:
            target = end.variants.target
            win = race(max(target - end.scores[team], 0), max(target - end.scores[1 - team], 0))
        out.append(ours)
        out.append(ours - theirs)
        out.append(win)
        out.append(bonus)
    return out


def add_into(sums: list[float], xs: list[float]) -> None:
    """``sums[i] += xs[i]`` for every i, compiled."""
    for i in range(len(xs)):
        sums[i] += xs[i]


_RACES: Final[dict[int, float]] = {}


def race(a: int, b: int) -> float:
    """The chance of taking ``a`` fair points before the other side takes ``b``: the
    negative binomial tail, summed over the other side's points k < b at the moment of the
    ``a``-th point, each ``C(a-1+k, k) / 2^(a+k)``. A loop of ``min(a, b)`` terms, never a
    recursion: the variants allow targets up to 1,000, far past Python's recursion limit
    (``race(a, b) = 1 - race(b, a)`` lets the shorter side be summed). Remembered: a
    search asks the same few scores again and again (``search.win_chance``)."""
    if a == 0:
        return 1.0
    if b == 0:
        return 0.0
    key = a * 65536 + b
    found = _RACES.get(key)
    if found is not None:
        return found
    if b > a:
        chance = 1.0 - race(b, a)
    else:
        # term_k = C(a-1+k, k) / 2^(a+k), from term_0 = 2^-a by term_{k+1} = term_k (a+k)
        # / (2 (k+1)); 2^-a stays a normal float up to a = 1022, past any target allowed
        term = 0.5 ** a
        total = term
        for k in range(b - 1):
            term *= (a + k) / (2.0 * (k + 1))
            total += term
        chance = min(1.0, total)
    if len(_RACES) < 65536:
        _RACES[key] = chance
    return chance


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
    return _pick(s.hands, s.trick, s.turn, s.leader, s.players, s.trump, s.variants,
                 _COST[s.trump], rng, epsilon)


# the tens (rank 8) of every suit: a ten's own 10 Game points
_TENS: Final = sum(1 << (suit * 13 + 8) for suit in range(4))


def _cheapest_of(m: int, cost: list[float]) -> int:
    """The card of mask ``m`` that costs least to give up (the lowest of equals)."""
    best = -1
    least = 0.0
    while m:
        low = m & -m
        c = low.bit_length() - 1
        if best < 0 or cost[c] < least:
            best = c
            least = cost[c]
        m ^= low
    return best


def _pick(
    hands: list[int], trick: list[int], seat: int, leader: int, n: int, trump: int,
    variants: Variants, cost: list[float], rng: random.Random, epsilon: float,
) -> int:
    """``rollout_card`` on masks: every choice is a mask of cards (the lowest card of
    equals wins a tie, as ``min`` over the ascending list of cards did)."""
    legal = legal_play_mask(hands[seat], trick, trump, variants)
    if legal & (legal - 1) == 0:
        return legal.bit_length() - 1
    if epsilon and rng.random() < epsilon:
        return rng.choice(cards_of(legal))
    trump_mask = SUIT_MASK[trump]
    jack = trump * 13 + JACK
    if not trick:
        opp = 0
        for o in range(n):
            if (o ^ seat) & 1:
                opp |= hands[o]
        trumps = legal & trump_mask
        if trumps:
            top = trumps.bit_length() - 1
            if not _beaten_by(top, opp, trump) and (
                opp & trump_mask or top == jack or GAME_POINTS[top] >= 10
            ):
                return top
        if not opp & trump_mask:
            side = legal & ~trump_mask
            while side:  # from the highest: a master card nobody can beat or trump
                c = side.bit_length() - 1
                if not opp & SUIT_MASK[c // 13] & ~((2 << c) - 1):
                    return c
                side ^= 1 << c
        return _cheapest_of(legal, cost)
    i = winning_index(trick, trump)
    best = trick[i]
    later = 0
    for k in range(len(trick) + 1, n):
        other = (leader + k) % n
        if (other ^ seat) & 1:
            later |= hands[other]
    if n == 4 and len(trick) - i == 2:  # partner is winning
        if not _beaten_by(best, later, trump):
            if legal >> jack & 1:
                return jack
            top = -1
            most = 0
            m = legal
            while m:
                low = m & -m
                c = low.bit_length() - 1
                worth = GAME_POINTS[c] - (20 if c // 13 == trump else 0)
                if top < 0 or worth > most:
                    top = c
                    most = worth
                m ^= low
            return top
        return _cheapest_of(legal, cost)
    best_suit = best // 13
    above = ~((2 << best) - 1)
    if best_suit == trump:
        winners = legal & trump_mask & above
    else:
        winners = (legal & SUIT_MASK[best_suit] & above) | (legal & trump_mask)
    if not winners:
        return _cheapest_of(legal, cost)
    safe = 0
    m = winners
    while m:
        low = m & -m
        if not _beaten_by(low.bit_length() - 1, later, trump):
            safe |= low
        m ^= low
    if safe >> jack & 1:
        return jack
    tens = safe & _TENS
    if tens:  # a ten: its own 10 Game points come home
        return (tens & -tens).bit_length() - 1
    stake = 0
    for c in trick:
        stake += GAME_POINTS[c]
        if c == jack:
            stake += 10
    if safe:
        cheap = _cheapest_of(safe, cost)
        if stake or cheap // 13 != trump:
            return cheap
    if stake >= 10:
        return _cheapest_of(winners, cost)
    plain = winners & ~trump_mask
    if plain:
        return _cheapest_of(plain, cost)
    return _cheapest_of(legal, cost)


# --- the heuristic's card play, on masks ---------------------------------------------------


def _beaters(c: int, trump: int) -> int:
    """``heuristic.beaters``: every card that beats ``c`` (higher of its suit; any trump
    over a plain card)."""
    suit = c // 13
    higher = SUIT_MASK[suit] & ~((2 << c) - 1)
    return higher if suit == trump else higher | SUIT_MASK[trump]


def _reach(seats: list[int], sizes: list[int], forbidden: list[int]) -> int:
    """The cards one of ``seats`` might hold, as far as the seat in turn can tell: every
    card but the voids they showed, of the seats with a card left."""
    reach = 0
    for o in seats:
        if sizes[o]:
            reach |= ALL_CARDS & ~forbidden[o]
    return reach


def _may_beat(c: int, trump: int, unseen: int, reach: int) -> bool:
    """``heuristic.could_beat`` at its risk of 0: might a seat that can hold ``reach``
    hold an unseen card that beats ``c``? (A beater one seat may hold is in ``reach``.)"""
    return bool(unseen & _beaters(c, trump) & reach)


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
    legal = legal_play_mask(hand, trick, trump, variants)
    if legal & (legal - 1) == 0:
        return legal.bit_length() - 1
    unseen = ALL_CARDS & ~(hand | gone)
    cost = _COST[trump]
    trump_mask = SUIT_MASK[trump]
    jack = trump * 13 + JACK
    team = seat & 1
    if not trick:
        opponents = [o for o in range(n) if o & 1 != team]
        reach = _reach(opponents, sizes, forbidden)
        return _heuristic_lead(legal, trump, jack, unseen, reach, cost)
    i = winning_index(trick, trump)
    best = trick[i]
    winner_seat = (leader + i) % n
    opp_later = [
        (leader + k) % n for k in range(len(trick) + 1, n) if (leader + k) % n & 1 != team
    ]
    reach = _reach(opp_later, sizes, forbidden)
    best_suit = best // 13
    above = ~((2 << best) - 1)
    if best_suit == trump:
        winners = legal & trump_mask & above
    else:
        winners = (legal & SUIT_MASK[best_suit] & above) | (legal & trump_mask)
    safe = 0
    m = winners
    while m:
        low = m & -m
        if not _may_beat(low.bit_length() - 1, trump, unseen, reach):
            safe |= low
        m ^= low
    at_stake = 0
    for c in trick:
        at_stake += GAME_POINTS[c]
        if c == jack:
            at_stake += 12
    if winner_seat & 1 == team:
        if not _may_beat(best, trump, unseen, reach):
            if legal >> jack & 1:  # feed the partner: our jack, a counter, else the cheapest
                return jack
            counter = -1
            m = legal & ~trump_mask
            while m:
                low = m & -m
                c = low.bit_length() - 1
                if GAME_POINTS[c] >= 2 and (counter < 0 or GAME_POINTS[c] > GAME_POINTS[counter]):
                    counter = c
                m ^= low
            return counter if counter >= 0 else _cheapest_of(legal, cost)
        if at_stake >= 10 and safe:
            return _cheapest_of(safe, cost)
        risk = _beat_risk(best, trump, unseen, opp_later, sizes, forbidden)
        surer = -1
        m = winners & ~trump_mask
        while m:  # from the highest: the first that is surer is the largest
            c = m.bit_length() - 1
            if GAME_POINTS[c] < 10 and _beat_risk(c, trump, unseen, opp_later, sizes,
                                                  forbidden) < risk:
                surer = c
                break
            m ^= 1 << c
        return surer if surer >= 0 else _cheapest_of(legal, cost)
    jack_bit = 1 << jack
    if safe & jack_bit:
        return jack
    winners &= ~jack_bit
    safe &= ~jack_bit
    if at_stake < 10 and unseen & jack_bit:  # keep a trump that can hang their jack
        higher = legal & trump_mask & ~((2 << jack) - 1)
        if higher:
            reserve = higher & -higher
            safe &= ~reserve
            winners &= ~reserve
    tens = safe & _TENS
    if tens:
        return (tens & -tens).bit_length() - 1
    if safe and (at_stake > 0 or safe & ~trump_mask):
        return _cheapest_of(safe, cost)
    if winners and at_stake >= 10:
        return _cheapest_of(winners, cost)
    plain = winners & ~trump_mask
    tens = plain & _TENS
    if tens:
        return (tens & -tens).bit_length() - 1
    if plain:
        return _cheapest_of(plain, cost)
    return _cheapest_of(legal, cost)


def _count(m: int) -> int:
    """The cards in mask ``m``."""
    count = 0
    while m:
        m &= m - 1
        count += 1
    return count


def _heuristic_lead(legal: int, trump: int, jack: int, unseen: int, reach: int,
                    cost: list[float]) -> int:
    """``heuristic.lead`` on masks: draw trumps when strong, hunt their jack, else a safe
    side card. ``reach``: the cards the opponents might hold (``_reach``)."""
    trump_mask = SUIT_MASK[trump]
    ours = legal & trump_mask
    outstanding = unseen & trump_mask
    if ours and outstanding:
        top = ours.bit_length() - 1
        we_hold_top = top > outstanding.bit_length() - 1
        held = _count(ours)
        hunting = bool(outstanding >> jack & 1) and top > jack and (
            held >= heuristic.HUNT_LEN or we_hold_top
        )
        strong = held >= heuristic.STRONG_LEN and we_hold_top
        if top != jack and (strong or hunting or (we_hold_top and ours >> jack & 1)):
            return top
        if ours >> jack & 1 and not _may_beat(jack, trump, unseen, reach):
            return jack
    side = legal & ~trump_mask
    if side:
        master = -1
        m = side
        while m:
            low = m & -m
            c = low.bit_length() - 1
            m ^= low
            if unseen & SUIT_MASK[c // 13] & ~((2 << c) - 1):
                continue
            if _may_beat(c, trump, unseen, reach):
                continue
            if master < 0 or GAME_POINTS[c] > GAME_POINTS[master] or (
                GAME_POINTS[c] == GAME_POINTS[master] and c % 13 > master % 13
            ):
                master = c
        if master >= 0:
            return master
        plain = 0
        m = side
        while m:
            low = m & -m
            if GAME_POINTS[low.bit_length() - 1] < 10:
                plain |= low
            m ^= low
        return _cheapest_of(plain or side, cost)
    rest = legal & ~(1 << jack)
    m = rest or legal
    return (m & -m).bit_length() - 1
