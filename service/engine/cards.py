"""Cards and their text form.

A card is an ``int`` from 0 to 51: ``suit * 13 + rank``, where rank 0 is the Two and
rank 12 the Ace (R2: A K Q J 10 9 8 7 6 5 4 3 2). Integers keep the hot paths of the
engine (legal actions, trick winners) to a few bit operations; the text form is what
people and the wire see.

Text form: rank then suit, two characters, upper case: ``2C`` … ``9C``, ``TC`` (ten),
``JC``, ``QC``, ``KC``, ``AC``; suits ``C`` clubs, ``D`` diamonds, ``H`` hearts,
``S`` spades. ``parse_card`` also accepts ``10C`` and lower case, and always gives back
the canonical form through ``card_name``.

A set of cards (a hand, the cards a seat was dealt) is a 52-bit mask: bit ``c`` is set
when card ``c`` is in the set.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

Card = int
Suit = int
CardMask = int

SUITS: Final = "CDHS"
RANKS: Final = "23456789TJQKA"
SUIT_NAMES: Final = ("clubs", "diamonds", "hearts", "spades")

CLUBS: Final = 0
DIAMONDS: Final = 1
HEARTS: Final = 2
SPADES: Final = 3
TWO: Final = 0
SIX: Final = 4
TEN: Final = 8
JACK: Final = 9
QUEEN: Final = 10
KING: Final = 11
ACE: Final = 12

DECK: Final[tuple[Card, ...]] = tuple(range(52))
CARD_NAMES: Final[tuple[str, ...]] = tuple(r + s for s in SUITS for r in RANKS)
_BY_NAME = {name: card for card, name in enumerate(CARD_NAMES)}

SUIT_MASK: Final[tuple[CardMask, ...]] = tuple(0x1FFF << (13 * s) for s in range(4))
ALL_CARDS: Final[CardMask] = (1 << 52) - 1

# R20: the card points that decide Game. Every suit counts, trump or not.
GAME_POINTS: Final[tuple[int, ...]] = tuple(
    {ACE: 4, KING: 3, QUEEN: 2, JACK: 1, TEN: 10}.get(c % 13, 0) for c in DECK
)


def card(rank: int, suit: Suit) -> Card:
    return suit * 13 + rank


def suit_of(c: Card) -> Suit:
    return c // 13


def rank_of(c: Card) -> int:
    return c % 13


def card_name(c: Card) -> str:
    return CARD_NAMES[c]


def parse_card(text: object) -> Card:
    """The card named by ``text``; ``ValueError`` when it names none (or is no string)."""
    if not isinstance(text, str):
        raise ValueError(f"not a card: {text!r}")
    key = text.strip().upper()
    if key.startswith("10"):
        key = "T" + key[2:]
    try:
        return _BY_NAME[key]
    except KeyError:
        raise ValueError(f"not a card: {text!r} (expected e.g. AS, TD, 2C)") from None


def jack_of(suit: Suit) -> Card:
    return suit * 13 + JACK


def mask_of(cards: Iterable[Card]) -> CardMask:
    m = 0
    for c in cards:
        m |= 1 << c
    return m


# For each suit, a table from the 13-bit slice of a mask to the cards it holds, so that
# turning a mask into a sorted list of cards costs four lookups.
_SLICE_CARDS: Final[tuple[tuple[tuple[Card, ...], ...], ...]] = tuple(
    tuple(tuple(s * 13 + r for r in range(13) if bits >> r & 1) for bits in range(1 << 13))
    for s in range(4)
)


def cards_of(mask: CardMask) -> list[Card]:
    """The cards in ``mask``, in ascending order (clubs first, Two first)."""
    t = _SLICE_CARDS
    return [
        *t[0][mask & 0x1FFF],
        *t[1][mask >> 13 & 0x1FFF],
        *t[2][mask >> 26 & 0x1FFF],
        *t[3][mask >> 39 & 0x1FFF],
    ]


def names_of(mask: CardMask) -> list[str]:
    return [CARD_NAMES[c] for c in cards_of(mask)]


def highest(mask: CardMask) -> Card:
    """The highest card of a mask that holds cards of one suit only."""
    return mask.bit_length() - 1


def lowest(mask: CardMask) -> Card:
    return (mask & -mask).bit_length() - 1
