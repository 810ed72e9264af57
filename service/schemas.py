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
TIMEOUT_DOC = (
    "seconds a seat has for each decision; when it runs out the service plays a default "
    "action for it (stand; give_one if legal, else run_pack; the lowest legal card: lowest "
    "rank, ties clubs, diamonds, hearts, spades) and records a timeout"
)


class JsonNumber(fields.Float):
    """A JSON number (never true or a string)."""

    def _deserialize(self, value: object, attr: object, data: object, **kw: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.make_error("invalid")
        return super()._deserialize(value, attr, data, **kw)


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
    move_limit = JsonNumber(
        validate=validate.Range(0.5, 3600),
        metadata={"description": TIMEOUT_DOC + "; omitted: no limit", "example": 10},
    )
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


class ActQuery(Strict):
    wait = fields.Float(
        validate=validate.Range(0, 30),
        load_default=0.0,
        metadata={
            "description": "seconds (0..30): after applying the action, answer when it is "
            "your turn again, the game is over, or this long has passed (0: at once). The "
            "answer is your view then, as `GET /games/{game_id}` would give it; a retry "
            "with the same Idempotency-Key answers at once with the view right after the "
            "action",
        },
    )


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
    move_limit = fields.Float(required=True, allow_none=True,
                              metadata={"description": "seconds per decision, or null"})
    tournament = fields.Str(required=True, allow_none=True,
                            metadata={"description": "the tournament's id, if any"})
    updated_at = fields.Float(
        required=True, allow_none=True,
        metadata={"description": "unix seconds (the service's clock) of the last change"},
    )


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
    move_limit = fields.Float(required=True, allow_none=True,
                              metadata={"description": "seconds per decision, or null"})
    deadline = fields.Float(
        required=True, allow_none=True,
        metadata={"description": "unix seconds (the service's clock) by which the seat in "
                  "turn must act, or null (no limit, or nobody to act)"},
    )
    time_left = fields.Float(required=True, allow_none=True,
                             metadata={"description": "seconds until the deadline, at answer "
                                       "time"})
    updated_at = fields.Float(
        required=True, allow_none=True,
        metadata={"description": "unix seconds (the service's clock) when this version was "
                  "made: the last move, join or timeout; null for a game older than the field"},
    )


class TurnAnswer(Out):
    timed_out = fields.Bool(required=True)
    view = fields.Nested(View, required=True)


class BotTurns(Out):
    timed_out = fields.Bool(required=True)
    games = fields.List(fields.Str(), required=True, metadata={"description": "game ids"})


class TimeoutOut(Out):
    seat = fields.Int(required=True)
    ply = fields.Int(required=True, metadata={"description": "the action's number (1 = first)"})
    action = fields.Str(required=True, metadata={"description": "the default action played"})


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
    timeouts = fields.List(
        fields.Nested(TimeoutOut),
        required=True,
        metadata={"description": "decisions the service made for a seat whose time ran out"},
    )



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
    rule_doc = fields.Str(metadata={
        "description": "where that rule is explained: docs/rules.md in the project's "
        "repository, at the rule's anchor (its id in lower case)",
        "example": "docs/rules.md#r14"})
    current_version = fields.Int(metadata={"description": "version conflicts: the version now"})


# --- tournaments ----------------------------------------------------------------------------


class TournamentCreate(Strict):
    name = fields.Str(validate=[validate.Length(1, 60), validate.Regexp(r"^[A-Za-z0-9 ._-]+$")],
                      metadata={"example": "weekly"})
    format = fields.Str(required=True, validate=validate.OneOf(["round_robin", "swiss"]))
    entrants = fields.List(
        fields.Str(validate=validate.Regexp(ID_PATTERN)),
        required=True,
        validate=validate.Length(2, 64),
        metadata={"description": "registered bot ids, distinct; the order seeds Swiss round 1"},
    )
    players = JsonInt(validate=validate.OneOf([2, 4]), load_default=2,
                      metadata={"description": "4: each entrant holds both seats of its team"})
    games_per_pairing = JsonInt(
        validate=validate.Range(1, 100), load_default=2,
        metadata={"description": "games each pairing plays per round (even with duplicate)"},
    )
    duplicate = StrictBool(
        load_default=True,
        metadata={"description": "play every deal twice, the entrants swapping teams (and so "
                  "cards)"},
    )
    rounds = JsonInt(validate=validate.Range(1, 100),
                     metadata={"description": "swiss only; default ceil(log2(entrants))"})
    variants = fields.Nested(VariantsIn, metadata={"description": "house rules"})
    move_limit = JsonNumber(validate=validate.Range(0.5, 3600),
                            metadata={"description": TIMEOUT_DOC})
    parallel = JsonInt(validate=validate.Range(1, 256), load_default=8,
                       metadata={"description": "at most this many of its games at once"})
    seed = JsonInt(validate=validate.Range(0, 2**63 - 1),
                   metadata={"description": "fixes every deal; random when omitted"})

    @validates_schema
    def _consistent(self, data: dict, **_: object) -> None:
        entrants = data.get("entrants") or []
        if len(set(entrants)) != len(entrants):
            raise ValidationError("must be distinct", "entrants")
        if data.get("duplicate", True) and data.get("games_per_pairing", 2) % 2:
            raise ValidationError("must be even with duplicate deals", "games_per_pairing")
        if data.get("rounds") is not None and data.get("format") != "swiss":
            raise ValidationError("only a swiss tournament has a rounds setting", "rounds")


class TournamentSettings(Out):
    format = fields.Str(required=True)
    players = fields.Int(required=True)
    games_per_pairing = fields.Int(required=True)
    duplicate = fields.Bool(required=True)
    rounds = fields.Int(required=True)
    variants = fields.Dict(required=True)
    move_limit = fields.Float(required=True, allow_none=True)
    parallel = fields.Int(required=True)
    seed = fields.Int(metadata={"description": "shown once the tournament is over"})


class Entrant(Out):
    bot_id = fields.Str(required=True)
    bot_name = fields.Str(required=True)


class Progress(Out):
    games_planned = fields.Int(required=True)
    games_done = fields.Int(required=True)
    games_live = fields.Int(required=True)
    rounds_planned = fields.Int(required=True)
    rounds_done = fields.Int(required=True)


class TournamentSummary(Out):
    id = fields.Str(required=True, metadata={"example": "0c1d2e3f4a5b"})
    name = fields.Str(required=True)
    status = fields.Str(required=True, validate=validate.OneOf(["running", "finished"]))
    created = fields.Int(required=True)
    finished = fields.Int(required=True, allow_none=True)
    settings = fields.Nested(TournamentSettings, required=True)
    entrants = fields.List(fields.Nested(Entrant), required=True)
    progress = fields.Nested(Progress, required=True)


class TournamentGame(Out):
    slot = fields.Int(required=True)
    pairing = fields.Int(required=True, metadata={"description": "index within the round"})
    deal = fields.Int(required=True, metadata={"description": "duplicate twins share it"})
    teams = fields.List(fields.Str(), required=True,
                        metadata={"description": "bot id on team 0, on team 1"})
    game_id = fields.Str(required=True, allow_none=True)
    status = fields.Str(required=True, validate=validate.OneOf(["pending", "live", "done"]))
    seed = fields.Int(required=True, allow_none=True,
                      metadata={"description": "the game's seed, once it is over"})
    winner = fields.Str(required=True, allow_none=True, metadata={"description": "bot id"})
    scores = fields.List(fields.Int(), required=True, allow_none=True)
    hands_won = fields.List(fields.Int(), required=True, allow_none=True)
    timeouts = fields.List(fields.Int(), required=True, allow_none=True)


class TournamentRound(Out):
    round = fields.Int(required=True)
    byes = fields.List(fields.Str(), required=True)
    games = fields.List(fields.Nested(TournamentGame), required=True)


class Tournament(TournamentSummary):
    rounds = fields.List(fields.Nested(TournamentRound), required=True)


class TournamentList(Out):
    items = fields.List(fields.Nested(TournamentSummary), required=True)
    next_cursor = fields.Int(required=True, allow_none=True)


class TournamentListQuery(Strict):
    limit = fields.Int(validate=validate.Range(1, 100), load_default=20)
    cursor = fields.Int(validate=validate.Range(0, 2**62))


class RatingOut(Out):
    mu = fields.Float(required=True, metadata={"description": "the estimate"})
    sigma = fields.Float(required=True, metadata={"description": "its uncertainty"})
    ordinal = fields.Float(required=True, metadata={"description": "mu - 3 sigma"})


class StandingRow(Out):
    rank = fields.Int(required=True)
    bot_id = fields.Str(required=True)
    bot_name = fields.Str(required=True)
    score = fields.Float(required=True, metadata={
        "description": "match points: per pairing and round 1 for winning more games (then "
        "more points), 0.5 each if level; 1 per bye"})
    played = fields.Int(required=True)
    won = fields.Int(required=True)
    lost = fields.Int(required=True)
    hands_won = fields.Int(required=True, metadata={
        "description": "hands in which its team scored more points than the other"})
    points_for = fields.Int(required=True)
    points_against = fields.Int(required=True)
    timeouts = fields.Int(required=True)
    byes = fields.Int(required=True)
    rating = fields.Nested(RatingOut, required=True)


class RatingPoint(RatingOut):
    bot_id = fields.Str(required=True)


class RatingHistory(Out):
    round = fields.Int(required=True)
    ratings = fields.List(fields.Nested(RatingPoint), required=True)


class Standings(Out):
    tournament_id = fields.Str(required=True)
    status = fields.Str(required=True)
    rounds_done = fields.Int(required=True)
    items = fields.List(fields.Nested(StandingRow), required=True)
    history = fields.List(fields.Nested(RatingHistory), required=True,
                          metadata={"description": "everyone's rating after each round"})


class LeaderboardRow(RatingOut):
    rank = fields.Int(required=True)
    bot_id = fields.Str(required=True)
    bot_name = fields.Str(required=True)
    games = fields.Int(required=True)
    wins = fields.Int(required=True)


class Leaderboard(Out):
    items = fields.List(fields.Nested(LeaderboardRow), required=True)


# --- house bots (a person against the service's own bots) ----------------------------------

HOUSE_STRATEGIES = ["random", "heuristic", "search"]


class HouseGameCreate(Strict):
    players = JsonInt(required=True, validate=validate.OneOf([2, 4]), metadata={"example": 2})
    opponent = fields.Str(
        load_default="heuristic",
        validate=validate.OneOf(HOUSE_STRATEGIES),
        metadata={"description": "the house bot in the other team's seats"},
    )
    partner = fields.Str(
        validate=validate.OneOf(HOUSE_STRATEGIES),
        metadata={"description": "4 players: the house bot in seat 2, your partner "
                  "(default: the opponent's strategy); ignored with 2 players"},
    )
    variants = fields.Nested(VariantsIn, metadata={"description": "house rules (all optional)"})
    move_limit = JsonNumber(
        load_default=60,
        validate=validate.Range(5, 3600),
        metadata={"description": TIMEOUT_DOC + "; a seat left alone cannot hold the game "
                  "forever", "example": 60},
    )
    name = fields.Str(
        load_default="guest",
        validate=[validate.Length(1, 40), validate.Regexp(r"^[A-Za-z0-9 ._-]+$")],
        metadata={"description": "your display name, when no token is sent and a new "
                  "account is registered"},
    )


class HouseGame(Out):
    game = fields.Nested(GameSummary, required=True)
    seat = fields.Int(required=True, metadata={"description": "your seat (always 0)"})
    player = fields.Nested(
        BotCreated,
        allow_none=True,
        metadata={"description": "the account registered for you, with its token (shown "
                  "only here), when the request had no token; null otherwise"},
    )
