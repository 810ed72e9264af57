"""Deals of the unseen cards drawn in proportion to how well they explain the table.

``inference.py`` says how likely a deal makes what the other seats did (a stand, a beg, a
give-one, every card they played); the search needs deals drawn from the prior — every
deal that agrees with the voids equally likely — weighted by that likelihood. Drawing
deals from the prior and keeping each with its likelihood (rejection) is exact but
starves: by the middle of a 4-player hand hardly any prior deal explains every card the
heuristic opponents played, so within the tries a move can afford most deals the search
played out contradicted something it had seen (the figures: docs/benchmarks.md).

``Chain`` is a Metropolis sampler instead: its state is one deal; a step swaps two unseen
cards between two places (two hands, or a hand and the stock), allowed by the voids, and
keeps the swap with probability ``min(1, L'/L)`` — the ratio of the two hands'
likelihoods after and before, since the swap is its own reverse and every hand keeps its
size. The prior is uniform over the deals the voids allow, so the chain's deals come from
the posterior; a swap changes two hands, so only their evidence is weighed again. Deals a
few steps apart are correlated, which costs far less than deals that contradict the
table: the search values every action on the same deals, and its budget goes mostly to
playing them out.

The likelihood factors by seat (what a seat did depends on its own hand and on what it
could see), which is what makes a swap cheap: ``SeatEvidence`` holds one seat's part.
"""

from __future__ import annotations

import random

from service.engine.variants import Variants

from . import heuristic
from .inference import Evidence, Play
from .playout import heuristic_choice


class SeatEvidence:
    """What one seat did this hand, to weigh a hand of it against: its bids (``ev``) and
    the cards it played (``plays``), each contradicted at a cost of its ``miss``."""

    def __init__(self, seat: int, ev: list[Evidence], plays: list[Play], played: int) -> None:
        self.seat = seat
        self.ev = ev
        self.plays = plays
        self.played = played  # every card the seat played this hand
        # hand -> likelihood: a chain proposes the same hands again and again (a third
        # of its proposals, measured), and a seat's evidence is fixed for a decision
        self.known: dict[int, float] = {}

    def likelihood(self, hand: int, trump: int, variants: Variants) -> float:
        """The chance the model gives of what this seat did, if it holds ``hand`` now
        (``trump`` and ``variants`` the same at every call: those of the decision)."""
        found = self.known.get(hand)
        if found is not None:
            return found
        w = self._likelihood(hand, trump, variants)
        if len(self.known) < 1 << 16:
            self.known[hand] = w
        return w

    def _likelihood(self, hand: int, trump: int, variants: Variants) -> float:
        w = 1.0
        for e in self.ev:
            dealt = hand | self.played
            if e.kind == "stand":
                agrees = (
                    heuristic.stands(dealt, e.trump, list(e.scores), e.dealer, e.target) == e.did
                )
            else:
                agrees = (
                    heuristic.gives_one(dealt, e.trump, list(e.scores), e.dealer, e.target)
                    == e.did
                )
            if not agrees:
                w *= e.miss
        for p in self.plays:
            then = hand | p.later | (1 << p.card)
            k = p.k
            chosen = heuristic_choice(then, k.trick, k.leader, p.seat, k.players, trump,
                                      variants, p.gone, k.hand_sizes, k.forbidden)
            if chosen != p.card:
                w *= p.miss
        return w


class Chain:
    """A Metropolis chain over the deals of the unseen cards (see the module docstring).

    ``hands`` (a mask per seat, the deciding seat's own as it is) and ``stock`` are the
    starting deal; ``allowed[s]`` the cards seat ``s`` may hold (not its revealed voids);
    ``evidence`` what each seat did. ``step`` moves the chain once; ``deal`` gives the
    current deal (hands and a shuffled stock) after ``thin`` steps.
    """

    def __init__(
        self,
        seat: int,
        hands: list[int],
        stock: list[int],
        allowed: list[int],
        evidence: list[SeatEvidence],
        trump: int,
        variants: Variants,
    ) -> None:
        n = len(hands)
        self.n = n
        self.trump = trump
        self.variants = variants
        self.hands = list(hands)
        self.allowed = [*allowed, -1]  # place n is the stock: it takes anything
        self.by_seat: list[SeatEvidence | None] = [None] * n
        for se in evidence:
            self.by_seat[se.seat] = se
        # Every unseen card in a slot; a slot belongs to one place for good, and a step
        # swaps the cards of two slots, so every place keeps its size.
        self.cards: list[int] = []
        self.place: list[int] = []
        for s in range(n):
            if s == seat:
                continue
            h = hands[s]
            while h:
                low = h & -h
                self.cards.append(low.bit_length() - 1)
                self.place.append(s)
                h ^= low
        self.held = len(self.cards)  # the slots in hands come first, by seat
        for c in stock:
            self.cards.append(c)
            self.place.append(n)
        # each place's slots, [start, end)
        self.span = [(0, 0)] * (n + 1)
        start = 0
        for p in range(n + 1):
            end = start
            while end < len(self.place) and self.place[end] == p:
                end += 1
            if end > start:
                self.span[p] = (start, end)
            start = end
        self.weight = [1.0] * n
        for s in range(n):
            found = self.by_seat[s]
            if found is not None:
                self.weight[s] = found.likelihood(self.hands[s], trump, variants)
        self.steps = 0
        self.accepted = 0

    def step(self, rng: random.Random) -> None:
        """Propose swapping the cards of two slots in different places — the first in a
        hand, so no proposal is wasted on the stock alone — and keep the swap by the
        Metropolis rule. The pair of slots is as likely to be proposed from either deal,
        so the proposal is symmetric."""
        held = self.held
        if held == 0:
            return
        i = int(rng.random() * held)
        a = self.place[i]
        lo, hi = self.span[a]
        j = int(rng.random() * (len(self.cards) - (hi - lo)))
        if j >= lo:
            j += hi - lo
        b = self.place[j]
        self.steps += 1
        x = self.cards[i]
        y = self.cards[j]
        if not (self.allowed[b] >> x & 1 and self.allowed[a] >> y & 1):
            return
        n = self.n
        swap = (1 << x) | (1 << y)
        wa = wb = 1.0
        ratio = 1.0
        if a < n:
            ea = self.by_seat[a]
            if ea is not None:
                wa = ea.likelihood(self.hands[a] ^ swap, self.trump, self.variants)
                if self.weight[a] > 0:
                    ratio = wa / self.weight[a]
        if b < n:
            eb = self.by_seat[b]
            if eb is not None:
                wb = eb.likelihood(self.hands[b] ^ swap, self.trump, self.variants)
                if self.weight[b] > 0:
                    ratio *= wb / self.weight[b]
        if ratio < 1.0 and rng.random() >= ratio:
            return
        self.cards[i] = y
        self.cards[j] = x
        if a < n:
            self.hands[a] ^= swap
            self.weight[a] = wa
        if b < n:
            self.hands[b] ^= swap
            self.weight[b] = wb
        self.accepted += 1

    def deal(self, rng: random.Random, thin: int) -> tuple[list[int], list[int]]:
        """The deal after ``thin`` more steps: hands, and the stock in a random order."""
        for _ in range(thin):
            self.step(rng)
        stock = [c for c, p in zip(self.cards, self.place) if p == self.n]
        for k in range(len(stock) - 1, 0, -1):
            r = int(rng.random() * (k + 1))
            stock[k], stock[r] = stock[r], stock[k]
        return list(self.hands), stock


def seat_evidence(ev: list[Evidence], ps: list[Play], played_by: list[int]) -> list[SeatEvidence]:
    """The evidence grouped by the seat it is about."""
    seats = sorted({e.seat for e in ev} | {p.seat for p in ps})
    return [
        SeatEvidence(
            s, [e for e in ev if e.seat == s], [p for p in ps if p.seat == s], played_by[s]
        )
        for s in seats
    ]
