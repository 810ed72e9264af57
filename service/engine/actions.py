"""Actions and their text form.

An action is an ``int``: 0–51 plays that card (see ``cards``), and four more name the
decisions before play. Ints keep legal-action lists cheap to build and compare; the text
form is what the wire and people use:

====================  ========  =========================================
text                  int       who, when
====================  ========  =========================================
``stand``             52        the beggar accepts the kick's suit (R8)
``beg``               53        the beggar begs (R8)
``give_one``          54        the dealer gives one point (R9)
``run_pack``          55        the dealer runs the pack (R9–R11)
``AS``, ``TD``, …     0–51      the seat in turn plays that card (R13–R15)
====================  ========  =========================================
"""

from __future__ import annotations

from typing import Final

from .cards import CARD_NAMES, parse_card

Action = int

STAND: Final = 52
BEG: Final = 53
GIVE_ONE: Final = 54
RUN_PACK: Final = 55
DECISIONS = {"stand": STAND, "beg": BEG, "give_one": GIVE_ONE, "run_pack": RUN_PACK}
_DECISION_NAMES = {v: k for k, v in DECISIONS.items()}


def action_name(action: Action) -> str:
    if 0 <= action < 52:
        return CARD_NAMES[action]
    return _DECISION_NAMES[action]


def parse_action(text: object) -> Action:
    """The action named by ``text`` (``"beg"``, ``"AS"``); ``ValueError`` when none."""
    if isinstance(text, str) and text.strip().lower() in DECISIONS:
        return DECISIONS[text.strip().lower()]
    try:
        return parse_card(text)
    except ValueError:
        raise ValueError(
            f"not an action: {text!r} "
            "(expected stand, beg, give_one, run_pack or a card such as AS)"
        ) from None


def is_card(action: Action) -> bool:
    return 0 <= action < 52
