"""A rule-of-thumb All Fours player: the middle rung of the strength ladder.

Only two things can be won by playing the cards well: the Jack (keep your own from being
hung for 3, hang the opponents') and Game (win the tens and honours). High and Low go to
whoever was *dealt* the cards (R17, R18), so the play below is all about the jack of
trumps and card points, and about not spending a high trump where a low card will do.

The decisions before play weigh trump strength against the score: beg or stand (R8),
give one or run the pack (R9).
"""

from __future__ import annotations

from service.engine.cards import GAME_POINTS, JACK, SUIT_MASK, parse_card

from .base import View
from .knowledge import Knowledge, bits, read_view

# Trump strength of one card: the honours that win tricks and the jack that scores.
_TRUMP_WEIGHT = {12: 3.0, 11: 2.5, 10: 2.0, JACK: 3.0, 8: 1.5}
GIVE_ONE_THRESHOLD = 5.5
# The beggar's score for keeping the kicked suit (R8): one a trump, plus the cards that
# make High and Low likely ours (R17, R18) — the ace (sure High), king, queen, the jack
# (R19), the two (sure Low) and three — less a little for each ace of another suit (a run
# may turn its suit up as trumps, R9, and the ace is then High). Fitted on 22,000 of the
# heuristic's beggar decisions against random, each played out both ways on the same deal
# to the end of the game (8 rollouts each way): the hand margin standing adds over
# begging was -0.98, plus 0.26 a trump, A 0.74, K 0.42, Q 0.23, J 0.31, 2 0.47, 3 0.23,
# and -0.17 a side ace; the weights below are those over 0.26, rounded. The old rule
# (honours only, 5.0) stood on 11% of hands, this one on about 28%. Against random, the
# same 20,000 duplicate games (seed 1): win rate +0.0074 [0.0041, 0.0107], margin +0.015
# [0.007, 0.024] a hand; bench/strength.py, 4000 games: seed 1 0.850 -> 0.861, seed 7
# 0.836 -> 0.844. Standing on 3 or 2.5 (more hands) measured no better: +0.005 each
# against +0.006 for 3.5 over the old rule (seed 7, 10,000 duplicate games).
_STAND_BONUS = {12: 3.0, 11: 1.5, 10: 1.0, JACK: 1.0, 0: 2.0, 1: 1.0}
SIDE_ACE_PENALTY = 0.5
STAND_THRESHOLD = 3.5
# A card whose chance of being beaten by a later opponent is at most this counts as safe.
# 0 (only a card nobody left can beat) measured as well as 0.1 or 0.3 against random
# (2000 duplicate games each), and it never gambles our jack, which risks 4 points.
RISK = 0.0
JACK_RISK = 0.0
# Trumps needed to lead the top trump hunting the jack / drawing trumps, and the risk
# under which partner's winning card is fed a ten. Measured against random (2000 duplicate
# games each): hunting or drawing with fewer trumps, or feeding at risk 0.3 or 0.6, moved
# the margin by at most 0.02 points a hand, within the noise.
HUNT_LEN = 2
STRONG_LEN = 3
FEED_RISK = 0.0


class HeuristicStrategy:
    """Sound, readable All Fours play from the seat view alone."""

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed  # unused: the heuristic is deterministic; kept for a uniform API

    def choose(self, view: View, legal: list[str]) -> str:
        if len(legal) == 1:
            return legal[0]
        k = read_view(view)
        if "stand" in legal:
            return stand_or_beg(k)
        if "run_pack" in legal:
            return give_one_or_run(k, legal)
        cards = [parse_card(a) for a in legal]
        return _name(choose_card(k, cards), legal)


def _name(card: int, legal: list[str]) -> str:
    for a in legal:
        if parse_card(a) == card:
            return a
    raise AssertionError("chosen card is not legal")


# --- before play ------------------------------------------------------------------------


def trump_strength(hand: int, trump: int) -> float:
    """How much a hand is worth with ``trump`` as trumps: honours, the jack, and length."""
    return sum(_TRUMP_WEIGHT.get(c % 13, 1.0) for c in bits(hand & SUIT_MASK[trump]))


def stand_or_beg(k: Knowledge) -> str:
    """Stand on a good trump hand; beg otherwise (R8)."""
    return "stand" if stands(k.hand, k.kicks[-1] // 13, k.scores, k.dealer, k.target) else "beg"


def stand_score(hand: int, trump: int) -> float:
    """How much keeping ``trump`` is worth to the beggar: see ``_STAND_BONUS``."""
    trumps = bits(hand & SUIT_MASK[trump])
    side_aces = sum(1 for c in bits(hand & ~SUIT_MASK[trump]) if c % 13 == 12)
    bonus = sum(_STAND_BONUS.get(c % 13, 0.0) for c in trumps)
    return len(trumps) + bonus - SIDE_ACE_PENALTY * side_aces


def stands(hand: int, trump: int, scores: list[int], dealer: int, target: int) -> bool:
    """The beggar's rule on raw values (the search bot's rollouts call it too).

    Begging against a dealer who gives one half the time is worth half a point plus half
    a fresh trump suit; standing is better only when this suit likely brings us High or
    Low. The score does not move with the scores: standing on less when the dealer's
    team neared the target (a run may kick them home, R6, R9) or when one point would
    win us the game measured no better (within +-0.001 a game on the same decisions).
    """
    return stand_score(hand, trump) >= STAND_THRESHOLD


def give_one_or_run(k: Knowledge, legal: list[str]) -> str:
    """Give one or run the pack (R9): see ``gives_one``."""
    if "give_one" not in legal:
        return "run_pack"
    trump = k.kicks[-1] // 13
    return "give_one" if gives_one(k.hand, trump, k.scores, k.dealer, k.target) else "run_pack"


def gives_one(hand: int, trump: int, scores: list[int], dealer: int, target: int) -> bool:
    """Give one only with a strong hand in the kicked suit, and never when it hands the
    beggar's team the game; run the pack when the kicks could win it for us (R9, R22)."""
    our_team = dealer & 1
    if scores[1 - our_team] + 1 >= target:
        return False
    if target - scores[our_team] <= 2:
        return False
    return trump_strength(hand, trump) >= GIVE_ONE_THRESHOLD


# --- the trick ----------------------------------------------------------------------------


def beats(c: int, best: int, trump: int) -> bool:
    """R16: does ``c`` take the lead from ``best``, the card winning the trick so far?"""
    if c // 13 == best // 13:
        return c > best
    return c // 13 == trump


def trick_winner(k: Knowledge) -> tuple[int, int]:
    """The card winning the current trick and the seat that played it."""
    best, best_i = k.trick[0], 0
    for i, c in enumerate(k.trick):
        if beats(c, best, k.trump):
            best, best_i = c, i
    return best, (k.leader + best_i) % k.players


def later_seats(k: Knowledge) -> list[int]:
    """The seats still to play to the current trick after this one."""
    start = len(k.trick) + 1
    return [(k.leader + i) % k.players for i in range(start, k.players)]


def beat_risk(k: Knowledge, c: int, seats: list[int]) -> float:
    """The chance that one of ``seats`` holds a card that beats ``c``.

    Each unseen card is in a given seat's hand with odds of hand size over unseen cards
    (the rest lie in the stock), unless a revealed void rules it out; cards are treated
    as independent, which is close enough to steer play.
    """
    if not seats:
        return 0.0
    unseen = k.unseen
    total = unseen.bit_count() or 1
    none = 1.0
    sizes, forbidden = k.hand_sizes, k.forbidden
    for x in bits(unseen & beaters(c, k.trump)):
        p = sum(sizes[s] for s in seats if not forbidden[s] >> x & 1) / total
        none *= max(0.0, 1.0 - p)
    return 1.0 - none


def beaters(c: int, trump: int) -> int:
    """The mask of every card that ``beats`` ``c``: higher ones of its suit, and every
    trump when ``c`` is not one."""
    suit = c // 13
    higher = SUIT_MASK[suit] & ~((2 << c) - 1)
    return higher if suit == trump else higher | SUIT_MASK[trump]


def could_beat(k: Knowledge, c: int, seats: list[int]) -> bool:
    """Is ``c`` at real risk of being beaten by one of ``seats``? (Our jack: any risk.)"""
    limit = JACK_RISK if c == k.trump * 13 + JACK else RISK
    return beat_risk(k, c, seats) > limit


def is_opponent(k: Knowledge, seat: int) -> bool:
    return seat & 1 != k.team


def cost(c: int, trump: int) -> float:
    """What giving up ``c`` costs: card points, trump rank, and above all our jack."""
    value = GAME_POINTS[c] + (c % 13) / 13
    if c // 13 == trump:
        value += 6 + c % 13
        if c % 13 == JACK:
            value += 30
    return value


def cheapest(cards: list[int], trump: int) -> int:
    return min(cards, key=lambda c: cost(c, trump))


def choose_card(k: Knowledge, legal: list[int]) -> int:
    if not k.trick:
        return lead(k, legal)
    return follow(k, legal)


def follow(k: Knowledge, legal: list[int]) -> int:
    """Play to a trick someone else led."""
    best, winner_seat = trick_winner(k)
    later = later_seats(k)
    opponents_later = [s for s in later if is_opponent(k, s)]
    winners = [c for c in legal if beats(c, best, k.trump)]
    safe = [c for c in winners if not could_beat(k, c, opponents_later)]
    jack = k.trump * 13 + JACK
    at_stake = sum(GAME_POINTS[c] for c in k.trick) + (12 if jack in k.trick else 0)
    if not is_opponent(k, winner_seat):
        if beat_risk(k, best, opponents_later) <= FEED_RISK:
            return feed_partner(k, legal)
        if at_stake >= 10 and safe:  # partner's card may fall: make the trick ours
            return cheapest(safe, k.trump)
        surer = surer_side_winner(k, winners, best, opponents_later)
        if surer is not None:
            return surer
        return cheapest(legal, k.trump)
    own_jack_safe = [c for c in safe if c == jack]
    if own_jack_safe:
        return jack  # our jack takes a trick for us: it scores 1 and cannot be hung
    winners = [c for c in winners if c != jack]
    safe = [c for c in safe if c != jack]
    reserve = jack_catcher(k, legal)
    if at_stake < 10:  # keep a trump that can hang the opponents' jack for when it falls
        safe = [c for c in safe if c != reserve]
        winners = [c for c in winners if c != reserve]
    tens = [c for c in safe if c % 13 == 8]
    if tens:
        return tens[0]  # a ten that takes the trick brings its own 10 Game points home
    # A trump spent on a trick with no points buys only the lead, which is worth less than
    # the trump kept for a trick with a ten in it: so not even when we play last (measured).
    if safe and (at_stake > 0 or not _is_trump(safe, k.trump)):
        return cheapest(safe, k.trump)
    if winners and at_stake >= 10:
        return cheapest(winners, k.trump)
    non_trump_winners = [c for c in winners if c // 13 != k.trump]
    tens = [c for c in non_trump_winners if c % 13 == 8]
    if tens:  # if the trick is ours, so are the ten's 10 points; a ten kept to the end of
        return tens[0]  # the hand is often forced under an honour of its suit
    if non_trump_winners:
        return cheapest(non_trump_winners, k.trump)
    return cheapest(legal, k.trump)


def surer_side_winner(k: Knowledge, winners: list[int], best: int, seats: list[int]) -> int | None:
    """Partner wins the trick so far but an opponent to come may beat it: our side card
    (not a ten, not a trump) that takes over and is less likely to be beaten, else None.

    The trick stays ours more often, and the card played is one that would have had to
    win a trick of its own later anyway.
    """
    risk = beat_risk(k, best, seats)
    side = [c for c in winners if c // 13 != k.trump and GAME_POINTS[c] < 10]
    side = [c for c in side if beat_risk(k, c, seats) < risk]
    return max(side) if side else None


def jack_catcher(k: Knowledge, legal: list[int]) -> int | None:
    """Our lowest trump above the jack while the jack is still unseen, else None."""
    jack = k.trump * 13 + JACK
    if not k.unseen >> jack & 1:
        return None
    above = [c for c in legal if c // 13 == k.trump and c > jack]
    return min(above) if above else None


def _opponents(k: Knowledge) -> list[int]:
    return [s for s in range(k.players) if is_opponent(k, s)]


def _is_trump(cards: list[int], trump: int) -> bool:
    return all(c // 13 == trump for c in cards)


def feed_partner(k: Knowledge, legal: list[int]) -> int:
    """Partner holds the trick safely: give it our jack or a ten, else our lowest card."""
    jack = k.trump * 13 + JACK
    if jack in legal:
        return jack
    counters = [c for c in legal if c // 13 != k.trump and GAME_POINTS[c] >= 2]
    if counters:
        return max(counters, key=lambda c: GAME_POINTS[c])
    return cheapest(legal, k.trump)


def lead(k: Knowledge, legal: list[int]) -> int:
    """Lead: draw trumps when strong, hunt the opponents' jack, else a safe side card."""
    trump = k.trump
    ours = [c for c in legal if c // 13 == trump]
    outstanding = [c for c in bits(k.unseen & SUIT_MASK[trump])]
    jack = trump * 13 + JACK
    if ours and outstanding:
        top = max(ours)
        we_hold_top = top > max(outstanding)
        # hunt the jack with a trump above it: from length, or with the top trump alone,
        # which cannot lose the trick (a holder of few trumps may have to play the jack)
        hunting = jack in outstanding and top > jack and (len(ours) >= HUNT_LEN or we_hold_top)
        strong = len(ours) >= STRONG_LEN and we_hold_top
        if top != jack and (strong or hunting or (we_hold_top and jack in ours)):
            return top
        if jack in ours and not could_beat(k, jack, _opponents(k)):
            return jack  # nothing above it is likely out: cash our jack now
    side = [c for c in legal if c // 13 != trump]
    if side:
        masters = [c for c in side if not k.unseen & SUIT_MASK[c // 13] & ~((2 << c) - 1)]
        # a master led into a possible trump hands its points over: lead it only when safe
        masters = [c for c in masters if not could_beat(k, c, _opponents(k))]
        if masters:  # nothing higher is out and no opponent can trump it
            return max(masters, key=lambda c: (GAME_POINTS[c], c % 13))
        plain = [c for c in side if GAME_POINTS[c] < 10] or side
        return cheapest(plain, trump)
    non_jack = [c for c in legal if c != jack] or legal
    return min(non_jack)
