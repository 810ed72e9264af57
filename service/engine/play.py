"""Playing to a trick: what may be played (R13–R15) and who wins (R16)."""

from __future__ import annotations

from .cards import CARD_NAMES, SUIT_MASK, SUITS, Card, CardMask
from .errors import IllegalAction
from .state import State
from .variants import Variants


def legal_play_mask(hand: CardMask, trick: list[Card], trump: int, v: Variants) -> CardMask:
    """The cards of ``hand`` that may be played to ``trick``.

    R13: any card may be led. R14: to a trump lead, a trump if you have one; to another
    lead, follow suit or trump as you choose, and only a player with neither may play
    anything. R15 variants: ``void_may_discard`` lets a player void in the led suit play
    anything; ``under_trumping=False`` forbids a trump below the trick's highest trump to
    a non-trump lead, unless the hand holds only trumps, and a player left with no card
    may then play any card that is not such an under-trump.
    """
    if not trick:
        return hand
    led = trick[0] // 13
    trump_mask = SUIT_MASK[trump]
    trumps = hand & trump_mask
    if led == trump:
        return trumps or hand
    follow = hand & SUIT_MASK[led]
    if v.void_may_discard and not follow:
        legal = hand
    else:
        legal = (follow | trumps) or hand
    if not v.under_trumping and trumps and hand != trumps:
        top = -1
        for c in trick:
            if c // 13 == trump and c > top:
                top = c
        if top >= 0:
            under = trumps & ((1 << top) - 1)
            if under:
                legal &= ~under
                if not legal:
                    legal = hand & ~under
    return legal


def check_play(state: State, c: Card) -> None:
    """Raise ``IllegalAction`` naming the rule that forbids playing ``c`` now."""
    hand = state.hands[state.turn]
    if not hand >> c & 1:
        raise IllegalAction("R13", f"{CARD_NAMES[c]} is not in your hand")
    legal = legal_play_mask(hand, state.trick, state.trump, state.variants)
    if legal >> c & 1:
        return
    led = state.trick[0] // 13
    trump = state.trump
    if led == trump:
        raise IllegalAction("R14", f"trump ({SUITS[trump]}) was led: you must play a trump")
    if c // 13 == trump:
        raise IllegalAction(
            "R15",
            f"house rule: no under-trumping: {CARD_NAMES[c]} is lower than a trump already "
            "in the trick, and your hand holds other cards",
        )
    raise IllegalAction("R14", f"you must follow suit ({SUITS[led]}) or trump ({SUITS[trump]})")


def winning_index(trick: list[Card], trump: int) -> int:
    """R16: the position in ``trick`` of the highest trump, or else the highest card led."""
    best = trick[0]
    best_i = 0
    best_suit = best // 13
    for i in range(1, len(trick)):
        c = trick[i]
        suit = c // 13
        if suit == best_suit:
            if c > best:
                best, best_i = c, i
        elif suit == trump:
            best, best_i, best_suit = c, i, trump
    return best_i
