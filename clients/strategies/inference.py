"""What the decisions at the table say about the hands the seat cannot see.

Voids shown by not following suit are certain (``knowledge.revealed_voids``); this module
reads the softer evidence: a beggar who stood holds trumps worth standing on, one who
begged does not, and a dealer who gave one holds a strong hand in the kicked suit (R8,
R9). The model of the other players is the heuristic's own rules (``heuristic.stands``,
``heuristic.gives_one``), exact for the heuristic bot and a guess for anyone else, so the
evidence is weighed rather than trusted: a sampled deal whose hand the model says would
have decided otherwise is kept with probability ``miss`` only (rejection sampling, so
the deals the search plays out are drawn in proportion to how well they explain what was
seen).

Only decisions made on a hand the sample can reconstruct are read: the 6 cards of a hand
with no run of the pack are exactly the seat's cards now plus the cards it has played.
After a run the hand a decision was made on is no longer known, and nothing is inferred.

The cards played say something too (``plays``): every card another seat played this
hand is compared with the card the heuristic (``heuristic.choose_card``) would have
played from that seat's hand in the sample — its cards then being its sampled cards now
plus those it played since — and with what that seat could see then. A forced card (the
only legal one) says nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from service.engine.state import BEGGED, GAVE_ONE, STOOD
from service.engine.variants import Variants

from . import heuristic
from .base import View
from .knowledge import Knowledge, revealed_voids
from .playout import heuristic_choice

# The likelihood a deal keeps for each decision the model says it contradicts: small for
# the opponents, whose bids and cards the model takes as the heuristic's, larger for a
# partner, which is usually another search bot deciding by search (it stands more often,
# and plays another card about as often as not). The opponents' misses are small because
# the Markov chain (``posterior.py``) can sample so sharp a posterior, which rejection
# could not (it found almost no deal that explained every card by mid-hand); the figures
# that chose them are in docs/benchmarks.md. Against a player that is not the heuristic
# the chain still keeps the deals that explain most of what it did.
MISS_OPPONENT = 0.02
MISS_PARTNER = 0.35
PLAY_MISS_OPPONENT = 0.02
PLAY_MISS_PARTNER = 0.5
# Deals drawn by rejection before settling for the likeliest seen: the start of the
# search's Markov chain, and every deal of a search with the chain off (``chain=0``).
MAX_TRIES = 30


@dataclass(frozen=True)
class Evidence:
    """One decision ``seat`` made: ``stood`` (True stood, False begged) or, for the
    dealer, ``gave`` (True gave one; only recorded when the score allowed a choice)."""

    seat: int
    kind: str  # "stand" or "give"
    did: bool
    trump: int
    scores: tuple[int, ...]
    dealer: int
    target: int
    miss: float


def evidence(k: Knowledge, view: View, opponent_miss: float = MISS_OPPONENT) -> list[Evidence]:
    """The decisions before play this hand that tell the seat about hidden hands; an
    opponent's contradicted at a cost of ``opponent_miss``, the partner's ``MISS_PARTNER``."""
    beg = view.get("beg")
    if beg not in (STOOD, BEGGED, GAVE_ONE) or not k.kicks:
        return []
    trump = k.kicks[0] // 13
    out: list[Evidence] = []

    def miss(seat: int) -> float:
        return MISS_PARTNER if seat == k.partner else opponent_miss

    scores = list(k.scores)
    if beg == GAVE_ONE:
        scores[k.beggar & 1] -= 1  # the point given came after the dealer's decision
    if k.beggar != k.seat:
        out.append(
            Evidence(k.beggar, "stand", beg == STOOD, trump, tuple(scores), k.dealer,
                     k.target, miss(k.beggar))
        )
    if beg == GAVE_ONE and k.dealer != k.seat:
        out.append(
            Evidence(k.dealer, "give", True, trump, tuple(scores), k.dealer, k.target,
                     miss(k.dealer))
        )
    return out


def likelihood(ev: list[Evidence], hands: list[int], played_by: list[int]) -> float:
    """How well a sampled deal explains the decisions: 1 when the model agrees with all
    of them, ``miss`` for each it contradicts."""
    w = 1.0
    for e in ev:
        hand = hands[e.seat] | played_by[e.seat]
        if e.kind == "stand":
            agrees = heuristic.stands(hand, e.trump, list(e.scores), e.dealer, e.target) == e.did
        else:
            agrees = (
                heuristic.gives_one(hand, e.trump, list(e.scores), e.dealer, e.target) == e.did
            )
        if not agrees:
            w *= e.miss
    return w


@dataclass
class Play:
    """A card ``seat`` played this hand, with that seat's knowledge then (all but its
    hand: ``k.hand`` is filled in from each sample) and the cards it played since."""

    seat: int
    card: int
    k: Knowledge
    later: int  # the cards ``seat`` played after this one, this hand
    miss: float
    gone: int = 0  # the cards ``seat`` had seen leave play then (played, kicked)


def plays(k: Knowledge, opponent_miss: float = PLAY_MISS_OPPONENT) -> list[Play]:
    """Every card another seat played this hand, most recent first, ready to be
    compared with the heuristic's choice in each sample (``play_likelihood``)."""
    n = k.players
    all_tricks = [*k.tricks, (k.leader, k.trick, -1)]
    sequence = [((lead + i) % n, c) for lead, cs, _ in all_tricks for i, c in enumerate(cs)]
    out: list[Play] = []
    finished: list[tuple[int, list[int], int]] = []
    played_so_far = 0
    j = 0
    for t, (leader, cards, winner) in enumerate(all_tricks):
        for i, c in enumerate(cards):
            seat = (leader + i) % n
            if seat != k.seat:
                before = cards[:i]
                later = [0] * n  # what each seat played from this card on
                for s2, c2 in sequence[j:]:
                    later[s2] |= 1 << c2
                kp = replace(
                    k,
                    seat=seat,
                    hand=0,
                    leader=leader,
                    trick=list(before),
                    tricks=list(finished),
                    hand_sizes=[k.hand_sizes[x] + later[x].bit_count() for x in range(n)],
                    played=played_so_far,
                    played_by=[],
                    forbidden=revealed_voids(
                        n,
                        k.trump,
                        [(lead, cs) for lead, cs, _ in finished] + [(leader, before)],
                        k.variants,
                    ),
                )
                miss = PLAY_MISS_PARTNER if seat == k.partner else opponent_miss
                out.append(
                    Play(seat, c, kp, later[seat] & ~(1 << c), miss, kp.played | kp.kicked)
                )
            played_so_far |= 1 << c
            j += 1
        if t < len(k.tricks):
            finished.append((leader, cards, winner))
    out.reverse()
    return out


def play_likelihood(
    ps: list[Play], hands: list[int], trump: int, variants: Variants, floor: float
) -> float:
    """How well a sampled deal explains the cards played: ``miss`` for each card the
    heuristic would not have played (a forced card says nothing). Stops once below
    ``floor`` (the caller rejects). The heuristic's card is decided on masks
    (``playout.heuristic_choice``, the same card as ``heuristic.choose_card``): this runs
    for every play read in every deal tried."""
    w = 1.0
    for p in ps:
        hand = hands[p.seat] | p.later | (1 << p.card)
        k = p.k
        chosen = heuristic_choice(hand, k.trick, k.leader, p.seat, k.players, trump, variants,
                                  p.gone, k.hand_sizes, k.forbidden)
        if chosen != p.card:
            w *= p.miss
            if w < floor:
                return w
    return w
