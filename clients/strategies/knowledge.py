"""What a seat knows, read from its view into card integers and bit masks.

Strategies reason on the engine's card encoding (``suit * 13 + rank``, masks of
``1 << card``) because it is what the rules engine and the search bot's samples use; this
module is the one place that turns the wire's card names into it.

Everything here is derived from the seat view alone: the seat's own hand, the kicks, the
cards played in this hand's tricks, and the voids those plays reveal (R14, R15).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from service.engine.cards import ALL_CARDS, SUIT_MASK, SUITS, cards_of, parse_card

View = dict[str, Any]

_SUIT_INDEX = {s: i for i, s in enumerate(SUITS)}


def mask(cards: list[int]) -> int:
    m = 0
    for c in cards:
        m |= 1 << c
    return m


def bits(m: int) -> list[int]:
    """The cards of a mask, ascending (the compiled engine's table lookup)."""
    return cards_of(m)


@dataclass
class Knowledge:
    """A seat's view in card integers: hands as masks, tricks as card lists.

    ``forbidden[s]`` holds the cards seat ``s`` is known not to hold now, from the voids
    its plays revealed; ``unseen`` is every card this seat has not seen (in other hands
    or in the stock).
    """

    players: int
    seat: int
    hand: int
    trump: int
    dealer: int
    beggar: int
    leader: int
    trick: list[int]
    tricks: list[tuple[int, list[int], int]]
    kicks: list[int]
    hand_sizes: list[int]
    scores: list[int]
    target: int
    variants: dict[str, Any]
    played: int = 0
    played_by: list[int] = field(default_factory=list)
    forbidden: list[int] = field(default_factory=list)

    @property
    def team(self) -> int:
        return self.seat & 1

    @property
    def partner(self) -> int | None:
        return (self.seat + 2) % 4 if self.players == 4 else None

    @property
    def kicked(self) -> int:
        return mask(self.kicks)

    @property
    def unseen(self) -> int:
        return ALL_CARDS & ~(self.hand | self.played | self.kicked)

    def trick_seats(self) -> list[int]:
        return [(self.leader + i) % self.players for i in range(len(self.trick))]


def read_view(view: View) -> Knowledge:
    """Parse ``view`` into ``Knowledge``, inferring every void the plays revealed."""
    n = view["players"]
    trump = _SUIT_INDEX[view["trump"]] if view.get("trump") else -1
    trick_view = view.get("trick") or {"leader": view.get("beggar", 0), "cards": []}
    trick = [parse_card(e["card"]) for e in trick_view["cards"]]
    tricks = [
        (t["leader"], [parse_card(e["card"]) for e in t["cards"]], t["winner"])
        for t in view.get("tricks", [])
    ]
    k = Knowledge(
        players=n,
        seat=view["seat"],
        hand=mask([parse_card(c) for c in view.get("hand") or []]),
        trump=trump,
        dealer=view["dealer"],
        beggar=view["beggar"],
        leader=trick_view["leader"],
        trick=trick,
        tricks=tricks,
        kicks=[parse_card(e["card"]) for e in view.get("kicks", [])],
        hand_sizes=list(view["hand_sizes"]),
        scores=list(view["scores"]),
        target=view["target"],
        variants=dict(view.get("variants") or {}),
    )
    played_by = [0] * n
    for leader, cards, _ in [*tricks, (k.leader, trick, None)]:
        for i, c in enumerate(cards):
            played_by[(leader + i) % n] |= 1 << c
    k.played_by = played_by
    k.played = mask([c for _, cards, _ in tricks for c in cards]) | mask(trick)
    k.forbidden = revealed_voids(
        n, trump, [(lead, cards) for lead, cards, _ in tricks] + [(k.leader, trick)], k.variants
    )
    return k


def revealed_voids(
    players: int, trump: int, tricks: list[tuple[int, list[int]]], variants: dict[str, Any]
) -> list[int]:
    """Per seat, the cards its plays prove it does not hold (R14, R15 and their variants).

    - Trump led, a non-trump played: no trumps left (R14).
    - Another suit led, neither it nor a trump played: none of the led suit, and — unless
      the *void may discard* variant is on — no trump either; with *no under-trumping*
      only the trumps above the trick's highest trump are excluded (R15).
    - Another suit led and a trump played: nothing, since trumping is a free choice (R14);
      but an under-trump under *no under-trumping* proves a hand of trumps only.

    Since hands only shrink, a void proved at any trick still holds now.
    """
    under_trumping = variants.get("under_trumping", True)
    may_discard = variants.get("void_may_discard", False)
    forbidden = [0] * players
    if trump < 0:
        return forbidden
    trumps = SUIT_MASK[trump]
    for leader, cards in tricks:
        if not cards:
            continue
        led = cards[0] // 13
        top = cards[0] if led == trump else -1
        for i in range(1, len(cards)):
            c = cards[i]
            seat = (leader + i) % players
            suit = c // 13
            if led == trump:
                if suit != trump:
                    forbidden[seat] |= trumps
            elif suit == trump:
                if not under_trumping and top > c:
                    forbidden[seat] |= ALL_CARDS & ~trumps
            elif suit != led:
                forbidden[seat] |= SUIT_MASK[led]
                if not may_discard:
                    if under_trumping or top < 0:
                        forbidden[seat] |= trumps
                    else:
                        forbidden[seat] |= trumps & ~((1 << (top + 1)) - 1)
            if suit == trump and c > top:
                top = c
    return forbidden
