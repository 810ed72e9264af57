"""Games and actions: creating and listing games, acting, waiting for a turn, and the view one seat
(or a spectator) gets."""

from __future__ import annotations

import re
from typing import Any

from marshmallow import ValidationError, fields, validate, validates_schema

from service.engine import parse_action
from service.engine.game import MAX_SEED
from service.engine.scoring import ITEMS
from service.engine.state import (
    BEGGED,
    GAVE_ONE,
    GIVE_ONE_OR_RUN,
    OVER,
    PLAY,
    RAN_PACK,
    STAND_OR_BEG,
    STOOD,
)
from service.http.schemas.common import (
    ACTION_DOC,
    ACTION_RE,
    BANK_LEFT_DOC,
    EVENT_ID_DOC,
    EVENT_ID_RE,
    ID_PATTERN,
    SEAT_DOC,
    SUIT_RE,
    TIME_BANK_DOC,
    TIMEOUT_DOC,
    JsonInt,
    JsonNumber,
    Out,
    Pattern,
    Strict,
    card,
    one_of,
)
from service.http.schemas.variants import AllVariants, VariantsIn, VariantsOut


class GameCreate(Strict):
    players = JsonInt(required=True, validate=validate.OneOf([2, 4]), metadata={"example": 4})
    seed = JsonInt(
        validate=validate.Range(0, MAX_SEED),
        metadata={"description": "fixes the cut and every deal; random when omitted"},
    )
    variants = fields.Nested(VariantsIn, metadata={"description": "house rules (all optional)"})
    move_limit = JsonNumber(
        validate=validate.Range(0.5, 3600),
        metadata={"description": TIMEOUT_DOC + "; omitted: no limit", "example": 10},
    )
    time_bank = JsonNumber(validate=validate.Range(0, 3600),
                           metadata={"description": TIME_BANK_DOC + "; omitted: none"})
    seats = fields.List(
        fields.Str(allow_none=True, validate=Pattern(ID_PATTERN)),
        metadata={
            "description": "bot id per seat, null for an open seat; default: the creator "
            "in seat 0 and the rest open. A bot may hold several seats.",
            "example": ["a1b2c3d4e5f6", None],
        },
    )

    @validates_schema
    def _seats_match(self, data: dict, **_: object) -> None:
        seats = data.get("seats")
        if seats is not None and len(seats) != data.get("players"):
            raise ValidationError("must list one entry per player", "seats")


class ActionIn(Strict):
    action = fields.Str(
        required=True,
        validate=Pattern(ACTION_RE),
        metadata={"description": ACTION_DOC, "example": "AS"},
    )
    version = JsonInt(
        validate=validate.Range(1, 2**31),
        metadata={"description": "the version this action was decided on (like If-Match)"},
    )
    seat = JsonInt(
        validate=validate.Range(0, 3),
        metadata={"description": "which of your seats acts (only needed if you hold two); "
                  "omitted: the seat whose turn it is, if you hold it"},
    )

    @validates_schema
    def _action_parses(self, data: dict, **_: object) -> None:
        try:
            parse_action(data.get("action", ""))
        except ValueError as exc:
            raise ValidationError(str(exc), "action") from None

    @staticmethod
    def fast_load(data: dict[str, Any]) -> dict[str, Any] | None:
        """The body every move sends, when it is plainly valid, as ``load`` would give it,
        without marshmallow (the most costly step of an action's own work once the
        stack's is paid); None for anything else, which ``load`` then judges and words
        (``service.http.api.operation``). tests/service/http/test_api_loads.py holds it
        to ``load``'s answers."""
        action = data.get("action")
        if type(action) is not str or _ACTION.fullmatch(action) is None:
            return None
        out: dict[str, Any] = {"action": action}
        for name, low, high in _ACTION_INTS:
            if name in data:
                value = data[name]
                if type(value) is not int or not low <= value <= high:
                    return None
                out[name] = value
        if len(out) != len(data):  # a member the schema does not know
            return None
        try:
            parse_action(action)
        except ValueError:
            return None
        return out


_ACTION = re.compile(ACTION_RE)
# ActionIn's integers and their ranges, as its fields declare them
_ACTION_INTS = (("version", 1, 2**31), ("seat", 0, 3))


class GameQuery(Strict):
    seat = fields.Int(validate=validate.Range(0, 3), metadata={"description": SEAT_DOC})


class ListQuery(Strict):
    status = fields.Str(validate=validate.OneOf(["waiting", "active", "finished"]))
    limit = fields.Int(validate=validate.Range(1, 100), load_default=20)
    cursor = fields.Int(
        validate=validate.Range(0, 2**62),
        metadata={"description": "next_cursor from the previous page"},
    )


class TurnQuery(Strict):
    after = fields.Int(
        validate=validate.Range(0, 2**31),
        metadata={"description": "answer as soon as the game's version is greater than this"},
    )
    timeout = fields.Float(
        validate=validate.Range(0, 30),
        load_default=25.0,
        metadata={"description": "seconds to wait at most (0..30)"},
    )
    seat = fields.Int(validate=validate.Range(0, 3), metadata={"description": SEAT_DOC})


class ActQuery(Strict):
    wait = fields.Float(
        validate=validate.Range(0, 30),
        load_default=0.0,
        metadata={
            "description": "seconds (0..30): after applying the action, answer when it is "
            "your turn again (at any seat your bot holds here), the game is over, or this "
            "long has passed (0: at once). The answer is your view then, as `GET "
            "/games/{game_id}` would give it; a retry with the same Idempotency-Key waits "
            "the same way (see the header)",
        },
    )


class EventsQuery(Strict):
    seat = fields.Int(validate=validate.Range(0, 3), metadata={"description": SEAT_DOC})
    last_event_id = fields.Str(
        validate=Pattern(EVENT_ID_RE),
        metadata={
            "description": "same as the Last-Event-ID header (for clients that cannot set "
            "headers); the header wins when both are sent. " + EVENT_ID_DOC
        },
    )


class Seat(Out):
    seat = fields.Int(required=True)
    bot_id = fields.Str(required=True, allow_none=True,
                        metadata={"description": "null: the seat is open"})
    bot_name = fields.Str(required=True, allow_none=True)


GAME_STATUS = ["waiting", "active", "finished"]
STATUS_DOC = "waiting: open seats; active: being played; finished: over"


SEED_CHOSEN_DOC = (
    "true: the game's creator chose its seed (`seed` in `POST /games`), which fixes the "
    "cut and every deal, so the creator may know every hand; such a game is never rated. "
    "Shown from the creation on, before anyone joins (docs/ratings.md)")
SEED_COMMITMENT_DOC = (
    "for a random seed: hex sha256(salt ‖ seed as decimal ASCII), published at the "
    "creation; once the game is over the view and the record show `seed` and `seed_salt` "
    "(hex) so anyone can check the deal was fixed before play. Null for a chosen seed "
    "(and for a game older than the field)")
SEED_SALT_DOC = ("hex, only once the game is over (with `seed`): the secret salt of "
                 "`seed_commitment`; null for a chosen seed")


# service.arena.games.ending.REASONS
END_REASONS = ["played", "forfeit", "void", "cancelled"]


class Ended(Out):
    """Why a finished game ended: the same object in its view, summary, record and the
    stream's `game_over` event."""

    reason = one_of(END_REASONS, required=True, metadata={
        "description": "played: a team reached the target (R22); forfeit: a side forfeited "
        "(`forfeit_by`, `why`); void: ended with no result (its tournament was cancelled); "
        "cancelled: it never started (an invitation declined or expired)"})
    winner = fields.Int(required=True, allow_none=True, metadata={
        "description": "the team credited with the game (a forfeit's: the other side), or "
        "null: nobody"})
    forfeit_by = fields.List(fields.Str(), required=True, metadata={
        "description": "the bots that forfeited it (empty unless `reason` is forfeit)"})
    why = fields.Str(required=True, allow_none=True, metadata={
        "description": "the detail: for a forfeit withdrawn, no_show, disqualified, "
        "suspended, paused (a ladder bot that timed out too often), absent (the clock "
        "played every decision of the side) or validation (a failed validation game); for "
        "a cancel declined or expired; else null"})


ENDED_DOC = "why the game ended, once it is finished; null while it is not"


class GameSummary(Out):
    id = fields.Str(required=True, metadata={"example": "a1b2c3d4e5f6"})
    version = fields.Int(required=True)
    status = one_of(GAME_STATUS, required=True, metadata={"description": STATUS_DOC})
    players = fields.Int(required=True, validate=validate.OneOf([2, 4]))
    seats = fields.List(fields.Nested(Seat), required=True)
    variants = AllVariants(required=True)
    created = fields.Int(required=True)
    scores = fields.List(fields.Int(), required=True, allow_none=True, metadata={
        "description": "per team; null (with winner) while the game's duplicate deal is "
        "embargoed: played at another table of its tournament that has not finished"})
    winner = fields.Int(required=True, allow_none=True,
                        metadata={"description": "the winning team, once over (`ended.winner`)"})
    ended = fields.Nested(Ended, required=True, allow_none=True, metadata={
        "description": ENDED_DOC + " (null with winner while the deal is embargoed)"})
    move_limit = fields.Float(required=True, allow_none=True,
                              metadata={"description": "seconds per decision, or null"})
    time_bank = fields.Float(allow_none=True, metadata={
        "description": "seconds of time bank each seat started with, or null (none)"})
    tournament = fields.Str(required=True, allow_none=True,
                            metadata={"description": "the tournament's id, if any"})
    ladder = fields.Str(required=True, allow_none=True, metadata={
        "description": "the ladder's name, if it is a rated ladder game (`/ladders/{name}`)"})
    updated_at = fields.Float(
        required=True, allow_none=True,
        metadata={"description": "unix seconds (the service's clock) of the last change"},
    )
    invited = fields.List(fields.Str(allow_none=True), metadata={
        "description": "per seat, the bot invited to it (the seat is held for it until it "
        "accepts, declines or the invitation expires), else null. A game that names bots "
        "of other owners starts only once each of them has accepted"})
    invitation_expires = fields.Float(allow_none=True, metadata={
        "description": "while invitations are pending: unix seconds when they expire"})
    cancelled = one_of(["declined", "expired"], allow_none=True, metadata={
        "description": "why a game that never started is over (`status` finished, no "
        "winner; `ended.reason` cancelled, `ended.why` the same): an invited bot declined, "
        "or an invitation expired; else null"})
    seed_chosen = fields.Bool(required=True, metadata={"description": SEED_CHOSEN_DOC})
    seed_commitment = fields.Str(required=True, allow_none=True,
                                 metadata={"description": SEED_COMMITMENT_DOC})


class GameList(Out):
    items = fields.List(fields.Nested(GameSummary), required=True)
    next_cursor = fields.Int(required=True, allow_none=True)


class Kick(Out):
    card = card(required=True)
    points = fields.Int(required=True, metadata={"description": "R6: A 1, 6 (or 2) 2, J 3"})


class PlayedCard(Out):
    seat = fields.Int(required=True)
    card = card(required=True)


class Trick(Out):
    leader = fields.Int(required=True)
    cards = fields.List(fields.Nested(PlayedCard), required=True,
                        metadata={"description": "in the order played"})


class DoneTrick(Trick):
    winner = fields.Int(required=True)


class ScoreItem(Out):
    item = one_of(
        list(ITEMS), required=True,
        metadata={"description": "kick (R6), give_one (R9), high (R17), low (R18), jack or "
                  "hang_jack (R19), game (R20)"},
    )
    team = fields.Int(
        required=True, allow_none=True,
        metadata={"description": "the team that scored; null only for a tied Game that "
                  "nobody scores (R20 with `game_tie: nobody`; its points are 0)"},
    )
    points = fields.Int(required=True)
    card = card(metadata={"description": "the card that scored (kick, high, low, jack, "
                          "hang_jack)"})
    totals = fields.List(fields.Int(), metadata={"description": "game: card points per team"})


PHASES = [STAND_OR_BEG, GIVE_ONE_OR_RUN, PLAY, OVER]
PHASE_DOC = (
    "stand_or_beg: the beggar stands or begs (R8); give_one_or_run: the dealer gives one "
    "or runs the pack (R9); play: the seat in turn plays a card (R12-R16); over: the game "
    "is over (R22)"
)
BEGS = [STOOD, BEGGED, GAVE_ONE, RAN_PACK]


class View(Out):
    """What one seat (or a spectator) may know now; the engine's view plus the game's
    identity, version and seats."""

    id = fields.Str(required=True)
    version = fields.Int(required=True, metadata={"description": "changes with every change"})
    status = one_of(GAME_STATUS, required=True, metadata={"description": STATUS_DOC})
    seats = fields.List(fields.Nested(Seat), required=True)
    players = fields.Int(required=True, validate=validate.OneOf([2, 4]))
    seat = fields.Int(
        required=True, allow_none=True,
        metadata={"description": "the seat this view is for; null: a spectator. A bot "
                  "holding two seats sees the one it asked for (`seat`), else the seat "
                  "whose turn it is if it holds it, else its lower seat"},
    )
    team = fields.Int(required=True, allow_none=True)
    your_turn = fields.Bool(required=True)
    teams = fields.List(fields.List(fields.Int()), required=True,
                        metadata={"description": "the seats of team 0 and of team 1"})
    variants = fields.Nested(VariantsOut, required=True)
    ply = fields.Int(required=True, metadata={"description": "actions applied so far"})
    phase = one_of(PHASES, required=True, metadata={"description": PHASE_DOC})
    turn = fields.Int(required=True, allow_none=True,
                      metadata={"description": "the seat to act; null once over"})
    decision = one_of(
        PHASES[:3], required=True, allow_none=True,
        metadata={"description": "the decision the seat in turn faces (the phase); null "
                  "once over"},
    )
    legal_actions = fields.List(
        fields.Str(validate=Pattern(ACTION_RE)), required=True,
        metadata={"description": "sorted; empty unless your turn"},
    )
    hand_number = fields.Int(required=True, metadata={"description": "1 for the first hand"})
    dealer = fields.Int(required=True)
    beggar = fields.Int(required=True, metadata={"description": "the dealer's right (R8)"})
    beg = one_of(BEGS, required=True, allow_none=True,
                 metadata={"description": "what became of this hand's beg; null: undecided"})
    hand = fields.List(card(), required=True, allow_none=True,
                       metadata={"description": "the viewer's cards; null for a spectator"})
    hand_sizes = fields.List(fields.Int(), required=True,
                             metadata={"description": "cards in each seat's hand"})
    kicks = fields.List(fields.Nested(Kick), required=True,
                        metadata={"description": "cards turned up this hand, in order"})
    trump = fields.Str(required=True, allow_none=True, validate=Pattern(SUIT_RE),
                       metadata={"description": "C, D, H or S once decided"})
    trick = fields.Nested(Trick, required=True, metadata={"description": "the trick in play"})
    tricks = fields.List(fields.Nested(DoneTrick), required=True,
                         metadata={"description": "this hand's finished tricks"})
    scores = fields.List(fields.Int(), required=True, metadata={"description": "per team"})
    target = fields.Int(required=True)
    hand_items = fields.List(fields.Nested(ScoreItem), required=True,
                             metadata={"description": "scored so far this hand"})
    last_hand_items = fields.List(fields.Nested(ScoreItem), required=True,
                                  metadata={"description": "what the previous hand scored"})
    winner = fields.Int(required=True, allow_none=True,
                        metadata={"description": "the winning team, once over (`ended.winner`)"})
    ended = fields.Nested(Ended, required=True, allow_none=True, metadata={
        "description": ENDED_DOC + ". A game ended before its end (forfeit, void, cancel) "
        "reads `phase` over, `turn` and `decision` null"})
    seed_chosen = fields.Bool(required=True, metadata={"description": SEED_CHOSEN_DOC})
    seed_commitment = fields.Str(required=True, allow_none=True,
                                 metadata={"description": SEED_COMMITMENT_DOC})
    hands = fields.List(
        fields.List(card()),
        metadata={"description": "only once the game is over: per seat, the cards it still "
                  "held when the game ended. Points come only before play (a kick, a give "
                  "one) or after the last trick, so these are whole hands when a kick or a "
                  "give one won, and empty lists when the hand's scoring did; what was dealt "
                  "and played is in the record"},
    )
    seed = fields.Int(metadata={"description": "the seed, once the game is over"})
    seed_salt = fields.Str(allow_none=True, metadata={"description": SEED_SALT_DOC})
    move_limit = fields.Float(required=True, allow_none=True,
                              metadata={"description": "seconds per decision, or null"})
    bank_left = fields.Float(required=True, allow_none=True,
                             metadata={"description": BANK_LEFT_DOC})
    deadline = fields.Float(
        required=True, allow_none=True,
        metadata={"description": "unix seconds (the service's clock) when the clock plays "
                  "for the seat in turn (its move limit and what is left of its time bank "
                  "both run out), or null (no limit, or nobody to act)"},
    )
    time_left = fields.Float(required=True, allow_none=True,
                             metadata={"description": "seconds until the deadline, at answer "
                                       "time"})
    updated_at = fields.Float(
        required=True, allow_none=True,
        metadata={"description": "unix seconds (the service's clock) when this version was "
                  "made: the last move, join or timeout; null for a game older than the field"},
    )
    timeouts = fields.List(
        fields.Nested("TimeoutOut"), required=True,
        metadata={"description": "the moves the clock played so far, for a seat whose time "
                  "ran out (as the record's `timeouts`): pages mark them as the clock's, not "
                  "the seat's choice"},
    )
    # "DeliveryRecord" is service.http.webhooks.schemas' (which imports this module):
    # named, so marshmallow's class registry resolves it
    callback_failure = fields.Nested(
        "DeliveryRecord", allow_none=True,
        metadata={"description": "in `GET /games/{id}` for your own seat: the last `turn` "
                  "delivery to your callback URL in this game that applied nothing (an "
                  "error status, no answer in time, a bad or refused action; its `version` "
                  "says which turn), or null if none did or a later one was applied "
                  "(always null for a bot without a callback URL). You may still act by "
                  "pull until the deadline"},
    )


class TurnAnswer(Out):
    timed_out = fields.Bool(required=True)
    view = fields.Nested(View, required=True)


class TimeoutOut(Out):
    seat = fields.Int(required=True)
    ply = fields.Int(required=True, metadata={"description": "the action's number (1 = first)"})
    action = fields.Str(required=True, validate=Pattern(ACTION_RE),
                        metadata={"description": "the default action played"})
