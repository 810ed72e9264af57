"""The All Fours rules engine: pure, deterministic, no I/O.

Public API (in the spirit of OpenSpiel's ``State``)::

    state, events = new_game(players=4, seed=7)
    current_seat(state), decision(state), legal_actions(state)
    state, events = apply(state, action, seat=...)
    seat_view(state, seat), spectator_view(state)
    build_record(players, seed, variants, actions)

Rules are cited by id (R1–R23), each explained at its anchor in ``docs/rules.md``.
"""

# The hot modules may be compiled by mypyc at install time (see setup.py). An extension
# module older than its source would silently run old rules: say so loudly.
from . import game as _game
from .actions import BEG, GIVE_ONE, RUN_PACK, STAND, Action, action_name, parse_action
from .cards import CARD_NAMES, Card, card_name, parse_card
from .errors import IllegalAction, InvalidVariants
from .freshness import is_compiled, warn_if_stale
from .game import (
    Event,
    apply,
    current_seat,
    deal_hand,
    decision,
    kick_points,
    legal_actions,
    new_game,
    shuffled_deck,
)
from .record import build_record, replay
from .state import GIVE_ONE_OR_RUN, OVER, PLAY, STAND_OR_BEG, State, partner_of, team_of
from .variants import DEFAULT_VARIANTS, Variants
from .views import redact_event, seat_view, spectator_view

# The hot modules are compiled by mypyc at install time when a C compiler is at hand (see
# setup.py). An extension older than its source would silently run old rules: say so.
COMPILED: bool = is_compiled(_game)
warn_if_stale(
    _game, ("actions", "cards", "game", "play", "scoring", "state", "views"), "the compiled engine"
)

__all__ = [
    "BEG", "CARD_NAMES", "COMPILED", "DEFAULT_VARIANTS", "GIVE_ONE", "GIVE_ONE_OR_RUN", "OVER",
    "PLAY",
    "RUN_PACK", "STAND", "STAND_OR_BEG", "Action", "Card", "Event", "IllegalAction",
    "InvalidVariants", "State", "Variants", "action_name", "apply", "build_record",
    "card_name", "current_seat", "deal_hand", "decision", "kick_points", "legal_actions",
    "new_game", "parse_action", "parse_card", "partner_of", "redact_event", "replay",
    "seat_view", "shuffled_deck", "spectator_view", "team_of",
]  # fmt: skip
