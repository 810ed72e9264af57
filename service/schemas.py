"""Wire schemas (marshmallow): what requests may say and what responses look like.

These are not engine types. Request schemas reject unknown fields (marshmallow's RAISE),
so a typo in a bot's request is an error naming the field, not a silently ignored value.
Response schemas shape what leaves the service and are the source of ``openapi.yaml``.
"""

from __future__ import annotations

from marshmallow import EXCLUDE, RAISE, Schema, ValidationError, fields, validate, validates_schema

from .engine import parse_action
from .engine.game import MAX_SEED

ID_PATTERN = r"^[0-9a-f]{12}$"
CARD_RE = r"^[2-9TJQKA][CDHS]$"
ACTION_RE = r"^(stand|beg|give_one|run_pack|[2-9TJQKA][CDHS])$"
EVENT_ID_RE = r"^\d{1,9}(\.\d{1,5})?$"
ACTION_DOC = "stand, beg, give_one, run_pack, or a card to play such as AS, TD, 7H"


class StrictBool(fields.Boolean):
    """JSON true/false only: 1, "yes" or "true" are mistakes worth reporting."""

    def _deserialize(self, value: object, attr: object, data: object, **kw: object) -> bool:
        if not isinstance(value, bool):
            raise self.make_error("invalid")
        return value


class JsonInt(fields.Integer):
    """A JSON integer: 3 or 3.0 (JSON Schema's "integer"), never true, "3" or 3.5."""

    def _deserialize(self, value: object, attr: object, data: object, **kw: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.make_error("invalid")
        if isinstance(value, float) and not value.is_integer():
            raise self.make_error("invalid")
        return super()._deserialize(int(value), attr, data, **kw)


class Strict(Schema):
    class Meta:
        unknown = RAISE
        ordered = True


class Out(Schema):
    class Meta:
        unknown = EXCLUDE
        ordered = True


# --- requests ---------------------------------------------------------------------------


class BotCreate(Strict):
    name = fields.Str(
        required=True,
        validate=[validate.Length(1, 40), validate.Regexp(r"^[A-Za-z0-9 ._-]+$")],
        metadata={"description": "a display name", "example": "random-bot"},
    )


class VariantsIn(Strict):
    target = JsonInt(validate=validate.Range(1, 1000), metadata={"example": 7})
    game_point_value = JsonInt(validate=validate.OneOf([1, 2]))
    game_tie = fields.Str(validate=validate.OneOf(["nobody", "non_dealer"]))
    give_one_at_target_minus_one = StrictBool()
    under_trumping = StrictBool()
    void_may_discard = StrictBool()
    pack_runs_out = fields.Str(validate=validate.OneOf(["one_by_one", "redeal"]))
    tobago_kick = StrictBool()


class GameCreate(Strict):
    players = JsonInt(required=True, validate=validate.OneOf([2, 4]), metadata={"example": 4})
    seed = JsonInt(
        validate=validate.Range(0, MAX_SEED),
        metadata={"description": "fixes the cut and every deal; random when omitted"},
    )
    variants = fields.Nested(VariantsIn, metadata={"description": "house rules (all optional)"})
    seats = fields.List(
        fields.Str(allow_none=True, validate=validate.Regexp(ID_PATTERN)),
        metadata={
            "description": "bot id per seat, null for an open seat; default: the creator "
            "in seat 0 and the rest open. A bot may hold several seats.",
            "example": None,
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
        validate=validate.Regexp(ACTION_RE),
        metadata={"description": ACTION_DOC, "example": "AS"},
    )
    version = JsonInt(
        validate=validate.Range(1, 2**31),
        metadata={"description": "the version this action was decided on (like If-Match)"},
    )
    seat = JsonInt(
        validate=validate.Range(0, 3),
        metadata={"description": "which of your seats acts (only needed if you hold two)"},
    )

    @validates_schema
    def _action_parses(self, data: dict, **_: object) -> None:
        try:
            parse_action(data.get("action", ""))
        except ValueError as exc:
            raise ValidationError(str(exc), "action") from None


class Empty(Strict):
    """A body that must be empty or ``{}``."""


class GameQuery(Strict):
    seat = fields.Int(
        validate=validate.Range(0, 3),
        metadata={"description": "for a bot holding two seats: which seat's view"},
    )


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
    seat = fields.Int(validate=validate.Range(0, 3))


class BotTurnsQuery(Strict):
    timeout = fields.Float(validate=validate.Range(0, 30), load_default=25.0)


class EventsQuery(Strict):
    seat = fields.Int(validate=validate.Range(0, 3))
    last_event_id = fields.Str(
        validate=validate.Regexp(EVENT_ID_RE),
        metadata={
            "description": "same as the Last-Event-ID header (for clients that cannot set headers)"
        },
    )


# --- responses ----------------------------------------------------------------------------


class Bot(Out):
    id = fields.Str(required=True, metadata={"example": "3f9a1c2b7d10"})
    name = fields.Str(required=True)
    created = fields.Int(required=True, metadata={"description": "unix seconds"})


class BotCreated(Bot):
    token = fields.Str(
        required=True,
        metadata={"description": "bearer token; shown once, stored only as a hash"},
    )


class Seat(Out):
    seat = fields.Int(required=True)
    bot_id = fields.Str(required=True, allow_none=True)
    bot_name = fields.Str(required=True, allow_none=True)


class GameSummary(Out):
    id = fields.Str(required=True, metadata={"example": "a1b2c3d4e5f6"})
    version = fields.Int(required=True)
    status = fields.Str(required=True, validate=validate.OneOf(["waiting", "active", "finished"]))
    players = fields.Int(required=True)
    seats = fields.List(fields.Nested(Seat), required=True)
    variants = fields.Dict(required=True)
    created = fields.Int(required=True)
    scores = fields.List(fields.Int(), required=True)
    winner = fields.Int(required=True, allow_none=True)


class GameList(Out):
    items = fields.List(fields.Nested(GameSummary), required=True)
    next_cursor = fields.Int(required=True, allow_none=True)


class Kick(Out):
    card = fields.Str(required=True)
    points = fields.Int(required=True)


class PlayedCard(Out):
    seat = fields.Int(required=True)
    card = fields.Str(required=True)


class Trick(Out):
    leader = fields.Int(required=True)
    cards = fields.List(fields.Nested(PlayedCard), required=True)


class DoneTrick(Trick):
    winner = fields.Int(required=True)


class ScoreItem(Out):
    item = fields.Str(
        required=True,
        metadata={"description": "kick, give_one, high, low, jack, hang_jack or game"},
    )
    team = fields.Int(required=True)
    points = fields.Int(required=True)
    card = fields.Str(metadata={"description": "the card that scored, when there is one"})
    totals = fields.List(fields.Int(), metadata={"description": "game: card points per team"})


class View(Out):
    """What one seat (or a spectator) may know now; the engine's view plus the game's
    identity, version and seats."""

    id = fields.Str(required=True)
    version = fields.Int(required=True, metadata={"description": "changes with every change"})
    status = fields.Str(required=True)
    seats = fields.List(fields.Nested(Seat), required=True)
    players = fields.Int(required=True)
    seat = fields.Int(required=True, allow_none=True, metadata={"description": "the viewer"})
    team = fields.Int(required=True, allow_none=True)
    your_turn = fields.Bool(required=True)
    teams = fields.List(fields.List(fields.Int()), required=True)
    variants = fields.Dict(required=True)
    ply = fields.Int(required=True, metadata={"description": "actions applied so far"})
    phase = fields.Str(
        required=True,
        metadata={"description": "stand_or_beg, give_one_or_run, play or over"},
    )
    turn = fields.Int(required=True, allow_none=True)
    decision = fields.Str(required=True, allow_none=True)
    legal_actions = fields.List(
        fields.Str(), required=True, metadata={"description": "sorted; empty unless your turn"}
    )
    hand_number = fields.Int(required=True)
    dealer = fields.Int(required=True)
    beggar = fields.Int(required=True)
    beg = fields.Str(required=True, allow_none=True)
    hand = fields.List(fields.Str(), required=True, allow_none=True)
    hand_sizes = fields.List(fields.Int(), required=True)
    kicks = fields.List(fields.Nested(Kick), required=True)
    trump = fields.Str(required=True, allow_none=True)
    trick = fields.Nested(Trick, required=True)
    tricks = fields.List(fields.Nested(DoneTrick), required=True)
    scores = fields.List(fields.Int(), required=True)
    target = fields.Int(required=True)
    hand_items = fields.List(fields.Nested(ScoreItem), required=True)
    last_hand_items = fields.List(fields.Nested(ScoreItem), required=True)
    winner = fields.Int(required=True, allow_none=True)
    hands = fields.List(
        fields.List(fields.Str()), metadata={"description": "every hand, once the game is over"}
    )
    seed = fields.Int(metadata={"description": "the seed, once the game is over"})


class TurnAnswer(Out):
    timed_out = fields.Bool(required=True)
    view = fields.Nested(View, required=True)


class BotTurns(Out):
    timed_out = fields.Bool(required=True)
    games = fields.List(fields.Str(), required=True, metadata={"description": "game ids"})


class Record(Out):
    """The engine's record (see the rules engine); while live, only what the asker may see."""

    class Meta:
        unknown = EXCLUDE

    players = fields.Int()
    seed = fields.Int(metadata={"description": "only once the game is over"})
    variants = fields.Dict()
    teams = fields.List(fields.List(fields.Int()))
    cut = fields.List(fields.List(fields.Dict()))
    first_dealer = fields.Int()
    hands = fields.List(fields.Dict(), required=True)
    winner = fields.Int(required=True, allow_none=True)
    scores = fields.List(fields.Int(), required=True)
    actions = fields.List(fields.Str(), required=True)
    complete = fields.Bool(required=True)


class Health(Out):
    status = fields.Str(required=True, metadata={"example": "ok"})


class ProblemSchema(Out):
    type = fields.Str(required=True, metadata={"example": "/problems/illegal-action"})
    title = fields.Str(required=True)
    status = fields.Int(required=True)
    detail = fields.Str()
    instance = fields.Str(allow_none=True)
    errors = fields.Dict(metadata={"description": "validation: messages per field"})
    rule = fields.Str(metadata={"description": "the rule id an action broke, e.g. R14"})
    current_version = fields.Int(metadata={"description": "version conflicts: the version now"})
