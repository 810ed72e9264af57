"""Wire schemas (marshmallow): what requests may say and what responses look like.

These are not engine types. Request schemas reject unknown fields (marshmallow's RAISE),
so a typo in a bot's request is an error naming the field, not a silently ignored value.
Response schemas shape what leaves the service and are the source of ``openapi.yaml``.
"""

from __future__ import annotations

import math
from typing import Any

from marshmallow import RAISE, Schema, ValidationError, fields, validate, validates_schema

from service.engine import Variants, parse_action
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
from service.engine.variants import DEFAULT_VARIANTS
from service.http.problems import KINDS

ID_PATTERN = r"^[0-9a-f]{12}$"
CARD_RE = r"^[2-9TJQKA][CDHS]$"
ACTION_RE = r"^(stand|beg|give_one|run_pack|[2-9TJQKA][CDHS])$"
EVENT_ID_RE = r"^\d{1,9}(\.\d{1,5})?$"
SUIT_RE = r"^[CDHS]$"
EVENT_ID_DOC = (
    "an event id: `ply.index` resumes after event `index` of ply `ply` (ply 0 is the new "
    "game: cut, deal, kick; ply n what the n-th action caused); a bare `ply` resumes after "
    "every event of that ply, so `5` means: from the first event of ply 6 on"
)
SEAT_DOC = (
    "which of your seats; omitted, a bot holding two seats (a 4-player game where it "
    "plays both partners) gets the seat whose turn it is if it holds it, else its lower "
    "seat"
)
ACTION_DOC = "stand, beg, give_one, run_pack, or a card to play such as AS, TD, 7H"
TIMEOUT_DOC = (
    "seconds a seat has for each decision; when it runs out the service plays a default "
    "action for it (stand; give_one if legal, else run_pack; the lowest legal card: lowest "
    "rank, ties clubs, diamonds, hearts, spades) and records a timeout"
)


class Pattern(validate.Regexp):
    """``validate.Regexp`` that must match the whole string. The contract's patterns are
    anchored with ``^…$`` as JSON Schema reads them, but Python's ``$`` also matches
    before a final newline, so ``"abc\n"`` would pass ``^[a-z]+$``; ``fullmatch`` keeps
    the service exactly as strict as the pattern a client validates against."""

    def __call__(self, value: str) -> str:
        if self.regex.fullmatch(value) is None:
            raise ValidationError(self._format_error(value))
        return value


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
    """A response shape. Closed (``additionalProperties: false`` in the contract): every
    member an answer carries is named here, and the tests check every answer against it
    (tests/contract.py). ``unknown`` only shapes the contract: responses are dumped, and a
    dump writes only the declared fields."""

    class Meta:
        unknown = RAISE
        ordered = True


def card(**kw: object) -> fields.Str:
    """A card: rank 2-9, T, J, Q, K, A, then suit C, D, H, S (``AS``, ``TD``)."""
    return fields.Str(validate=Pattern(CARD_RE), **kw)  # type: ignore[arg-type]


def one_of(choices: list[object], **kw: object) -> fields.Str:
    return fields.Str(validate=validate.OneOf(choices), **kw)  # type: ignore[arg-type]


def const(value: str) -> fields.Str:
    return fields.Str(required=True, validate=validate.Equal(value))


# --- requests ---------------------------------------------------------------------------


class BotCreate(Strict):
    name = fields.Str(
        required=True,
        validate=[validate.Length(1, 40), Pattern(r"^[A-Za-z0-9 ._-]+$")],
        metadata={"description": "a display name", "example": "random-bot"},
    )
    person = StrictBool(
        metadata={"description": "(default false) an account for a person at the table "
                  "(the play page sets it): a game that such an account joins gets a move "
                  "limit if it has none "
                  "(`ARENA_PERSON_MOVE_LIMIT`, default 60 s), so an abandoned seat cannot "
                  "hold the game and its other players forever"},
    )
    invitation = fields.Str(
        validate=validate.Length(1, 100),
        metadata={"description": "an owner invitation code from the operator, needed to "
                  "make a new owner where admission is `invite` (`ARENA_OWNER_ADMISSION`); "
                  "ignored when the request has a bot token (the new bot joins that bot's "
                  "owner)"},
    )


_D = DEFAULT_VARIANTS
VARIANT_DOCS = {
    "target": "R22: points that win the game",
    "game_point_value": "R20: what Game scores",
    "game_tie": "R20: who scores a tied Game: nobody, or the non-dealer's team",
    "give_one_at_target_minus_one": "R9: may the dealer give one when it hands the "
    "beggar's team the game (false: must run the pack)",
    "under_trumping": "R15: may a player under-trump (false: only when holding nothing "
    "but trumps)",
    "void_may_discard": "R14/R15: may a player void in the led suit play any card",
    "pack_runs_out": "R11: when a full run is impossible, turn the last cards one by one, "
    "or redeal at once",
    "tobago_kick": "R6: a kicked Two scores 2 instead of the Six",
}


def _variant(name: str, **kw: object) -> dict[str, object]:
    return {"description": VARIANT_DOCS[name], "default": getattr(_D, name), **kw}


class VariantsIn(Strict):
    """House rules (all optional; each omitted one is its default)."""

    target = JsonInt(validate=validate.Range(1, 1000),
                     metadata=_variant("target", example=7))
    game_point_value = JsonInt(validate=validate.OneOf([1, 2]),
                               metadata=_variant("game_point_value"))
    game_tie = fields.Str(validate=validate.OneOf(["nobody", "non_dealer"]),
                          metadata=_variant("game_tie"))
    give_one_at_target_minus_one = StrictBool(
        metadata=_variant("give_one_at_target_minus_one"))
    under_trumping = StrictBool(metadata=_variant("under_trumping"))
    void_may_discard = StrictBool(metadata=_variant("void_may_discard"))
    pack_runs_out = fields.Str(validate=validate.OneOf(["one_by_one", "redeal"]),
                               metadata=_variant("pack_runs_out"))
    tobago_kick = StrictBool(metadata=_variant("tobago_kick"))


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
        fields.Str(allow_none=True, validate=Pattern(ID_PATTERN)),
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


class Empty(Strict):
    """A body that must be empty or ``{}``."""


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
            "your turn again, the game is over, or this long has passed (0: at once). The "
            "answer is your view then, as `GET /games/{game_id}` would give it; a retry "
            "with the same Idempotency-Key answers at once with the view right after the "
            "action",
        },
    )


MAX_PLAYING = 200
PLAYING_RE = rf"^[0-9a-f]{{12}}(,[0-9a-f]{{12}}){{0,{MAX_PLAYING - 1}}}$"


class BotTurnsQuery(Strict):
    timeout = fields.Float(validate=validate.Range(0, 30), load_default=25.0)
    invitations_after = fields.Float(
        validate=validate.Range(0, 1e11),
        metadata={"description": "unix seconds: answer at once if an invitation newer than "
                  "this is pending (send the newest `created` you have seen). Without it, "
                  "pending invitations are listed in every answer but only one that "
                  "arrives during the wait ends it"})
    playing = fields.Str(
        validate=validate.Regexp(PLAYING_RE),
        metadata={"description": f"game ids you are already playing (comma-separated, at "
                  f"most {MAX_PLAYING}): they are left out of the answer, and the poll "
                  "waits while only they are your turn. A runner that plays each game on "
                  "its own requests (`POST …/actions?wait=`, `GET …/turn`) polls with them "
                  "all here and learns of any other game's turn the moment it comes"})


class EventsQuery(Strict):
    seat = fields.Int(validate=validate.Range(0, 3), metadata={"description": SEAT_DOC})
    last_event_id = fields.Str(
        validate=Pattern(EVENT_ID_RE),
        metadata={
            "description": "same as the Last-Event-ID header (for clients that cannot set "
            "headers); the header wins when both are sent. " + EVENT_ID_DOC
        },
    )


# --- responses ----------------------------------------------------------------------------


class Bot(Out):
    id = fields.Str(required=True, metadata={"example": "3f9a1c2b7d10"})
    name = fields.Str(required=True)
    created = fields.Int(required=True, metadata={"description": "unix seconds"})
    owner = fields.Str(metadata={
        "description": "the owner the bot belongs to (the account that registered it: "
        "register with `Authorization: Bearer <token of one of your bots>` to add a bot to "
        "your owner). Bots of one owner seat each other at once, are never matched on a "
        "ladder and their games against each other are never rated"})
    suspended = fields.Str(allow_none=True, metadata={
        "description": "the operator's reason, while the bot (or its owner) is suspended: "
        "it can no longer act, register bots or accept invitations; null otherwise"})


class BotCreated(Bot):
    token = fields.Str(
        required=True,
        metadata={"description": "bearer token; shown once, stored only as a hash"},
    )


class Seat(Out):
    seat = fields.Int(required=True)
    bot_id = fields.Str(required=True, allow_none=True,
                        metadata={"description": "null: the seat is open"})
    bot_name = fields.Str(required=True, allow_none=True)


class VariantsOut(Out):
    """Every house rule in force (the defaults included)."""

    target = fields.Int(required=True, metadata=_variant("target"))
    game_point_value = fields.Int(required=True, validate=validate.OneOf([1, 2]),
                                  metadata=_variant("game_point_value"))
    game_tie = one_of(["nobody", "non_dealer"], required=True, metadata=_variant("game_tie"))
    give_one_at_target_minus_one = fields.Bool(
        required=True, metadata=_variant("give_one_at_target_minus_one"))
    under_trumping = fields.Bool(required=True, metadata=_variant("under_trumping"))
    void_may_discard = fields.Bool(required=True, metadata=_variant("void_may_discard"))
    pack_runs_out = one_of(["one_by_one", "redeal"], required=True,
                           metadata=_variant("pack_runs_out"))
    tobago_kick = fields.Bool(required=True, metadata=_variant("tobago_kick"))


class AllVariants(fields.Nested):
    """Every house rule, from a dict that may name only those that differ from the
    defaults (a tournament keeps only those)."""

    def __init__(self, **kw: object) -> None:
        super().__init__(VariantsOut, **kw)  # type: ignore[arg-type]

    def _serialize(self, value: object, attr: object, obj: object, **kw: object) -> object:
        full = Variants.from_dict(value).to_dict() if isinstance(value, dict) else value
        return super()._serialize(full, attr, obj, **kw)


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
                        metadata={"description": "the winning team, once over"})
    move_limit = fields.Float(required=True, allow_none=True,
                              metadata={"description": "seconds per decision, or null"})
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
        "winner): an invited bot declined, or an invitation expired; else null"})
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
                        metadata={"description": "the winning team, once over"})
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
    # "DeliveryRecord" is service.http.callback_schemas' (which imports this module):
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


class Invitation(Out):
    id = fields.Str(required=True, metadata={"example": "5e4d3c2b1a09"})
    game_id = fields.Str(required=True)
    status = one_of(["pending", "accepted", "declined"], required=True, metadata={
        "description": "pending: waiting for your answer; accepted: you sit in the seats "
        "(the game starts once every seat is filled); declined: the game is cancelled"})
    seats = fields.List(fields.Int(), required=True,
                        metadata={"description": "the seats held for you"})
    players = fields.Int(required=True, validate=validate.OneOf([2, 4]))
    from_bot = fields.Str(required=True, allow_none=True,
                          metadata={"description": "the bot that created the game"})
    from_name = fields.Str(required=True, allow_none=True)
    from_owner = fields.Str(required=True, allow_none=True,
                            metadata={"description": "that bot's owner"})
    variants = AllVariants(required=True)
    move_limit = fields.Float(required=True, allow_none=True)
    created = fields.Float(required=True, metadata={"description": "unix seconds"})
    expires = fields.Float(required=True, metadata={
        "description": "unix seconds; unanswered by then, the game is cancelled "
        "(`ARENA_INVITATION_TTL`, default 120 s)"})


class InvitationList(Out):
    invitations = fields.List(fields.Nested(Invitation), required=True)


class BotTurns(Out):
    timed_out = fields.Bool(required=True)
    games = fields.List(fields.Str(), required=True, metadata={"description": "game ids"})
    invitations = fields.List(fields.Nested(Invitation), metadata={
        "description": "your pending invitations (games other owners' bots asked you to "
        "play), oldest first: accept or decline each (`POST /invitations/{id}/accept`)"})


class TimeoutOut(Out):
    seat = fields.Int(required=True)
    ply = fields.Int(required=True, metadata={"description": "the action's number (1 = first)"})
    action = fields.Str(required=True, validate=Pattern(ACTION_RE),
                        metadata={"description": "the default action played"})


# --- the record -------------------------------------------------------------------------------

HIDDEN_DOC = "per seat; while the game is live, null for a seat whose cards the asker may " \
    "not see"
SIZES_DOC = "only where cards are hidden (while the game is live): how many cards each " \
    "seat got"


class CutCard(Out):
    seat = fields.Int(required=True)
    card = card(required=True)


class RecordKick(Kick):
    team = fields.Int(required=True, metadata={"description": "the dealer's team, which "
                                                "scores it"})


class RecordDeal(Out):
    deal = fields.Int(required=True, metadata={"description": "0, then 1, 2... after each "
                                               "redeal of the hand (R11)"})
    cards = fields.List(fields.List(card(), allow_none=True), required=True,
                        metadata={"description": "the six cards each seat was dealt; "
                                  + HIDDEN_DOC})
    sizes = fields.List(fields.Int(), metadata={"description": SIZES_DOC})
    runs = fields.List(
        fields.List(fields.List(card(), allow_none=True)), required=True,
        metadata={"description": "each run of the pack (R10): three cards per seat; "
                  + HIDDEN_DOC})
    kicks = fields.List(fields.Nested(RecordKick), required=True,
                        metadata={"description": "every card turned up, in order (R6, R10)"})


class BegDecision(Out):
    seat = fields.Int(required=True)
    decision = one_of(["stand", "beg", "give_one", "run_pack"], required=True)


class RecordItem(ScoreItem):
    scores = fields.List(fields.Int(), required=True,
                         metadata={"description": "the score per team after this item"})


class RecordHand(Out):
    hand = fields.Int(required=True, metadata={"description": "1 for the first hand"})
    dealer = fields.Int(required=True)
    beggar = fields.Int(required=True)
    deals = fields.List(fields.Nested(RecordDeal), required=True,
                        metadata={"description": "the deal, and one more per redeal (R11)"})
    beg = fields.List(fields.Nested(BegDecision), required=True,
                      metadata={"description": "the beggar's decision, then the dealer's"})
    trump = fields.Str(required=True, allow_none=True, validate=Pattern(SUIT_RE))
    tricks = fields.List(fields.Nested(DoneTrick), required=True)
    items = fields.List(fields.Nested(RecordItem), required=True,
                        metadata={"description": "what scored, in order (R17-R22)"})
    scores = fields.List(fields.Int(), required=True, allow_none=True,
                         metadata={"description": "the score per team after the hand; null "
                                   "before anything scored"})
    redeals = fields.Int(metadata={"description": "how often the pack ran out (R11); absent: "
                                   "never"})
    current_trick = fields.List(fields.Nested(PlayedCard), metadata={
        "description": "only while the game is live: the trick being played"})


class Record(Out):
    """The engine's record; while live, only what the asker may see."""

    players = fields.Int(required=True, validate=validate.OneOf([2, 4]))
    seed = fields.Int(metadata={"description": "only once the game is over"})
    seed_salt = fields.Str(allow_none=True, metadata={"description": SEED_SALT_DOC})
    variants = fields.Nested(VariantsOut, required=True)
    teams = fields.List(fields.List(fields.Int()), required=True)
    cut = fields.List(fields.List(fields.Nested(CutCard)), required=True, metadata={
        "description": "the cut for dealer (R4): one list per round, each seat still "
        "cutting and its card (a tie for highest cuts again)"})
    first_dealer = fields.Int(required=True)
    hands = fields.List(fields.Nested(RecordHand), required=True)
    winner = fields.Int(required=True, allow_none=True)
    scores = fields.List(fields.Int(), required=True)
    actions = fields.List(fields.Str(validate=Pattern(ACTION_RE)), required=True)
    complete = fields.Bool(required=True)
    timeouts = fields.List(
        fields.Nested(TimeoutOut),
        required=True,
        metadata={"description": "decisions the service made for a seat whose time ran out"},
    )


# --- server-sent events ---------------------------------------------------------------------


class EventBase(Out):
    """Every event has a ``type``; the SSE ``event:`` field says the same."""


class GameStartedEvent(EventBase):
    type = const("game_started")
    players = fields.Int(required=True, validate=validate.OneOf([2, 4]))
    seed = fields.Int(metadata={"description": "only once the game is over"})
    variants = fields.Nested(VariantsOut, required=True)
    teams = fields.List(fields.List(fields.Int()), required=True)
    cut = fields.List(fields.List(fields.Nested(CutCard)), required=True)
    first_dealer = fields.Int(required=True)


class DealEvent(EventBase):
    type = const("deal")
    hand = fields.Int(required=True)
    deal = fields.Int(required=True)
    dealer = fields.Int(required=True)
    cards = fields.List(fields.List(card(), allow_none=True), required=True,
                        metadata={"description": HIDDEN_DOC})
    sizes = fields.List(fields.Int(), metadata={"description": SIZES_DOC})


class KickEvent(EventBase):
    type = const("kick")
    card = card(required=True)
    points = fields.Int(required=True)
    team = fields.Int(required=True)


class StandEvent(EventBase):
    type = const("stand")
    seat = fields.Int(required=True)


class BegEvent(EventBase):
    type = const("beg")
    seat = fields.Int(required=True)


class GiveOneEvent(EventBase):
    type = const("give_one")
    seat = fields.Int(required=True, metadata={"description": "the dealer"})
    team = fields.Int(required=True, metadata={"description": "the beggar's team"})


class RunPackEvent(EventBase):
    type = const("run_pack")
    seat = fields.Int(required=True, metadata={"description": "the dealer"})


class RunDealEvent(EventBase):
    type = const("run_deal")
    cards = fields.List(fields.List(card(), allow_none=True), required=True,
                        metadata={"description": HIDDEN_DOC})
    sizes = fields.List(fields.Int(), metadata={"description": SIZES_DOC})


class RedealEvent(EventBase):
    type = const("redeal")
    hand = fields.Int(required=True)
    deal = fields.Int(required=True)


class TrumpEvent(EventBase):
    type = const("trump")
    suit = fields.Str(required=True, validate=Pattern(SUIT_RE))


class CardPlayedEvent(EventBase):
    type = const("card_played")
    seat = fields.Int(required=True)
    card = card(required=True)


class TrickWonEvent(EventBase):
    type = const("trick_won")
    trick = fields.Int(required=True, metadata={"description": "1 for the hand's first"})
    leader = fields.Int(required=True)
    cards = fields.List(card(), required=True, metadata={"description": "from the leader on"})
    winner = fields.Int(required=True)
    team = fields.Int(required=True)


class ScoreEvent(EventBase):
    type = const("score")
    item = ScoreItem._declared_fields["item"]
    team = ScoreItem._declared_fields["team"]
    points = fields.Int(required=True)
    card = card()
    totals = fields.List(fields.Int())
    scores = fields.List(fields.Int(), required=True)


class HandOverEvent(EventBase):
    type = const("hand_over")
    hand = fields.Int(required=True)
    scores = fields.List(fields.Int(), required=True)


class GameOverEvent(EventBase):
    type = const("game_over")
    winner = fields.Int(required=True, metadata={"description": "the winning team"})
    scores = fields.List(fields.Int(), required=True)


EVENTS: dict[str, type[Schema]] = {
    "game_started": GameStartedEvent, "deal": DealEvent, "kick": KickEvent,
    "stand": StandEvent, "beg": BegEvent, "give_one": GiveOneEvent,
    "run_pack": RunPackEvent, "run_deal": RunDealEvent, "redeal": RedealEvent,
    "trump": TrumpEvent, "card_played": CardPlayedEvent, "trick_won": TrickWonEvent,
    "score": ScoreEvent, "hand_over": HandOverEvent, "game_over": GameOverEvent,
}


class Health(Out):
    status = one_of(["ok"], required=True, metadata={"example": "ok"})


class ProblemSchema(Out):
    type = one_of([f"/problems/{k}" for k in KINDS], required=True,
                  metadata={"example": "/problems/illegal-action"})
    title = fields.Str(required=True)
    status = fields.Int(required=True)
    detail = fields.Str()
    instance = fields.Str(allow_none=True, metadata={"description": "the request's path"})
    errors = fields.Dict(metadata={"description": "validation: messages per field"})
    rule = fields.Str(
        validate=Pattern(r"^R([1-9]|1[0-9]|2[0-3])$"),
        metadata={"description": "illegal-action and not-your-turn: the rule the action "
                  "broke, e.g. R14"})
    rule_doc = fields.Str(metadata={
        "description": "where that rule is explained: docs/rules.md in the project's "
        "repository, at the rule's anchor (its id in lower case)",
        "example": "docs/rules.md#r14"})
    current_version = fields.Int(metadata={
        "description": "version-conflict (409) and precondition-failed (412): the game's "
        "version now"})


# --- tournaments ----------------------------------------------------------------------------

MAX_ENTRANTS = 64
MAX_ROUNDS = 100  # swiss
MAX_GAMES_PER_PAIRING = 100
# A tournament is one JSON document, read and rewritten whole each time one of its games
# finishes and served whole by GET /tournaments/{id}: about 500 bytes a finished game with
# its result and rating change, so 1000 games keep it near 0.5 MB.
MAX_TOURNAMENT_GAMES = 1000
KNOCKOUT_TIEBREAK_GAMES = 4  # service.arena.knockout.TIEBREAK_GAMES: at most, per match
SIZE_DOC = (
    f"Size limits: 2 to {MAX_ENTRANTS} entrants, 1 to {MAX_ROUNDS} Swiss rounds, 1 to "
    f"{MAX_GAMES_PER_PAIRING} games per pairing, and at most {MAX_TOURNAMENT_GAMES} games "
    "in all (round robin: entrants × (entrants − 1) / 2 × games_per_pairing; Swiss: rounds × "
    "floor(entrants / 2) × games_per_pairing; knockout: (entrants − 1) matches × "
    f"(games_per_pairing + {KNOCKOUT_TIEBREAK_GAMES}), counting every tiebreak game a match "
    "may need). A tournament over that total is refused (422) "
    "with the error under the fields sent that can bring it within the limit — rounds, "
    "games_per_pairing — each saying how far, or under entrants when only fewer entrants can"
)


def default_rounds(entrants: int) -> int:
    """A Swiss tournament's rounds when not given: enough to separate the entrants."""
    return max(1, math.ceil(math.log2(entrants)))


def tournament_games(fmt: str, entrants: int, rounds: int | None, games_per_pairing: int
                     ) -> int:
    """How many games a tournament may play (a bye is no game; a knockout's tiebreaks
    counted at their most)."""
    if fmt == "round_robin":
        return entrants * (entrants - 1) // 2 * games_per_pairing
    if fmt == "knockout":
        return (entrants - 1) * (games_per_pairing + KNOCKOUT_TIEBREAK_GAMES)
    return (rounds or default_rounds(entrants)) * (entrants // 2) * games_per_pairing


def size_errors(data: dict[str, Any], sent: Any = None) -> dict[str, list[str]]:
    """The total-size check of a tournament body, as ``errors`` (empty when it fits): see
    ``SIZE_DOC`` for which field an error is filed under (``sent``: the fields the request
    gave, default every one in ``data``)."""
    sent = data if sent is None else sent
    fmt, n = data.get("format"), len(data.get("entrants") or [])
    if fmt not in ("round_robin", "swiss", "knockout") or n < 2:
        return {}
    g, rounds = data.get("games_per_pairing", 2), data.get("rounds")
    total = tournament_games(fmt, n, rounds, g)
    if total <= MAX_TOURNAMENT_GAMES:
        return {}
    shown_rounds = rounds or default_rounds(n)
    how = (f"{n} entrants × {n - 1} / 2 pairings × {g} games per pairing" if fmt == "round_robin"
           else f"{n - 1} matches × ({g} games per pairing + {KNOCKOUT_TIEBREAK_GAMES} "
           f"tiebreak games at most)" if fmt == "knockout"
           else f"{shown_rounds} rounds × {n // 2} tables × {g} games per pairing")
    said = f"{total} games planned ({how}); at most {MAX_TOURNAMENT_GAMES} per tournament"
    errors: dict[str, list[str]] = {}
    tables = n * (n - 1) // 2 if fmt == "round_robin" else n // 2
    if "rounds" in sent and fmt == "swiss" and MAX_TOURNAMENT_GAMES // (tables * g) >= 1:
        errors["rounds"] = [f"{said}: at most {MAX_TOURNAMENT_GAMES // (tables * g)} rounds "
                            f"with {n} entrants and {g} games per pairing"]
    per_round = tables * (shown_rounds if fmt == "swiss" else 1)
    most_g = MAX_TOURNAMENT_GAMES // per_round
    if fmt == "knockout":
        most_g = MAX_TOURNAMENT_GAMES // (n - 1) - KNOCKOUT_TIEBREAK_GAMES
    if "games_per_pairing" in sent and most_g >= 1:
        errors["games_per_pairing"] = [
            f"{said}: at most {most_g} games per pairing with {n} "
            f"entrants" + (f" and {shown_rounds} rounds" if fmt == "swiss" else "")]
    if errors:
        return errors
    most = max((m for m in range(2, n)
                if tournament_games(fmt, m, rounds, g) <= MAX_TOURNAMENT_GAMES), default=None)
    if most is None:  # large rounds and games_per_pairing, both sent: either must shrink
        return {f: [f"{said}: fewer rounds or games per pairing"]
                for f in ("rounds", "games_per_pairing")}
    return {"entrants": [f"{said}: at most {most} entrants with {g} games per pairing"
                         + (f" and {rounds} rounds" if rounds else "")]}



NO_SHOW_DOC = (
    "the no-show rule, seconds: an entrant leaves the tournament (`no_show`) when in one of "
    "its live games it is its turn and nothing has been played for this long, or the game "
    "started this long ago and every one of its moves there (at least one) was played by "
    "the move clock. An entrant that leaves forfeits its live and unplayed games: won by "
    "the opponent, no points, hands or matchpoints for anyone; a rated loss for the "
    "entrant that forfeited (docs/ratings.md).")
MAX_TIMEOUTS_DOC = (
    "disqualification: an entrant leaves the tournament (`disqualified`) once the move "
    "clock has played this many of its moves over the whole tournament; it forfeits its "
    "live and unplayed games (as under no_show).")
ENTRANT_STATUSES = ["in", "withdrawn", "no_show", "disqualified"]
TOURNAMENT_STATUSES = ["running", "paused", "finished", "cancelled"]
TOURNAMENT_STATUS_DOC = (
    "running; paused (no game starts; live games play on, clocks running); finished (every "
    "game played); cancelled (live games voided, nothing more scheduled)")


class TournamentCreate(Strict):
    name = fields.Str(validate=[validate.Length(1, 60), Pattern(r"^[A-Za-z0-9 ._-]+$")],
                      metadata={"example": "weekly"})
    format = fields.Str(
        required=True, validate=validate.OneOf(["round_robin", "swiss", "knockout"]),
        metadata={"description": "round_robin (everyone meets everyone), swiss (rounds "
                  "paired by the standings) or knockout (single elimination seeded by the "
                  "leaderboard's rating ordinal, byes to the top seeds; its rules are under "
                  "`bracket` in the tournament)"})
    entrants = fields.List(
        fields.Str(validate=Pattern(ID_PATTERN)),
        required=True,
        validate=validate.Length(2, MAX_ENTRANTS, error=f"a tournament takes 2 to "
                                 f"{MAX_ENTRANTS} entrants"),
        metadata={"description": "registered bot ids, distinct (2 to "
                  f"{MAX_ENTRANTS}); the order seeds Swiss round 1, and breaks a "
                  "knockout's seeding ties (unrated entrants, equal ordinals). " + SIZE_DOC,
                  "uniqueItems": True},
    )
    players = JsonInt(validate=validate.OneOf([2, 4]), load_default=2,
                      metadata={"description": "4: each entrant holds both seats of its team"})
    games_per_pairing = JsonInt(
        validate=validate.Range(1, MAX_GAMES_PER_PAIRING), load_default=2,
        metadata={"description": "games each pairing plays per round (a knockout's match: "
                  "these, then tiebreak pairs while level), each a different deal "
                  f"(even with trusted duplicate twins); 1 to {MAX_GAMES_PER_PAIRING}, and "
                  f"the tournament at most {MAX_TOURNAMENT_GAMES} games in all"},
    )
    duplicate = StrictBool(
        allow_none=True, load_default=None,
        metadata={"description": "duplicate deals: every deal of a round is played at every "
                  "table (pairing) of the round, each entrant playing it once, and results "
                  "on the same cards are compared across tables (matchpoints). Omitted or "
                  "null: on wherever possible (4 entrants or more; with trusted, always); "
                  "true with fewer than 4 entrants and no trusted: 422; false: every game "
                  "its own deal"},
    )
    trusted = StrictBool(
        load_default=False,
        metadata={"description": "the entrants may see a deal twice: duplicate deals are "
                  "played as twins within a pairing, the same two entrants with the teams "
                  "swapped, so each entrant holds its opponent's cards in the twin. Only for "
                  "bots you trust not to use what one game showed in the other. Also lets "
                  "`seed` repeat an earlier tournament's (otherwise 409 `seed-reused`)"},
    )
    rounds = JsonInt(validate=validate.Range(1, MAX_ROUNDS),
                     metadata={"description": f"swiss only; default ceil(log2(entrants)); 1 to "
                               f"{MAX_ROUNDS}, and the tournament at most "
                               f"{MAX_TOURNAMENT_GAMES} games in all"})
    variants = fields.Nested(VariantsIn, metadata={"description": "house rules"})
    move_limit = JsonNumber(validate=validate.Range(0.5, 3600),
                            metadata={"description": TIMEOUT_DOC})
    parallel = JsonInt(validate=validate.Range(1, 256), load_default=8,
                       metadata={"description": "at most this many of its games at once"})
    seed = JsonInt(validate=validate.Range(0, 2**63 - 1),
                   metadata={"description": "fixes every deal; random when omitted. An "
                             "earlier tournament's seed is refused (409 `seed-reused`: its "
                             "deals are public once it is over) unless `trusted`"})
    no_show = JsonNumber(
        allow_none=True, validate=validate.Range(1, 86400),
        metadata={"description": NO_SHOW_DOC + " Omitted: 600; null: no such rule"})
    max_timeouts = JsonInt(
        allow_none=True, validate=validate.Range(1, 10000),
        metadata={"description": MAX_TIMEOUTS_DOC + " Omitted or null: no such rule"})
    analyse = StrictBool(load_default=False, metadata={
        "description": "analyse every game as it finishes (`GET /games/{id}/analysis`)"})

    @validates_schema(pass_original=True)
    def _consistent(self, data: dict, original: Any = None, **_: object) -> None:
        entrants = data.get("entrants") or []
        if len(set(entrants)) != len(entrants):
            raise ValidationError("must be distinct", "entrants")
        if (data.get("trusted") and data.get("duplicate") is not False
                and data.get("games_per_pairing", 2) % 2):
            raise ValidationError("must be even with trusted duplicate deals (twins)",
                                  "games_per_pairing")
        if data.get("rounds") is not None and data.get("format") != "swiss":
            raise ValidationError("only a swiss tournament has a rounds setting", "rounds")
        too_big = size_errors(data, original if isinstance(original, dict) else None)
        if too_big:
            raise ValidationError(too_big)


class TournamentSettings(Out):
    format = one_of(["round_robin", "swiss", "knockout"], required=True)
    players = fields.Int(required=True, validate=validate.OneOf([2, 4]))
    games_per_pairing = fields.Int(required=True)
    duplicate = fields.Bool(required=True, metadata={
        "description": "as played: deals shared across the tables of each round"})
    trusted = fields.Bool(required=True, metadata={
        "description": "duplicate deals as twins within a pairing (entrants see a deal twice)"})
    rounds = fields.Int(required=True)
    variants = AllVariants(required=True)
    move_limit = fields.Float(required=True, allow_none=True)
    parallel = fields.Int(required=True)
    seed = fields.Int(metadata={"description": "shown once the tournament is over"})
    no_show = fields.Float(required=True, allow_none=True,
                           metadata={"description": NO_SHOW_DOC + " Null: no such rule"})
    max_timeouts = fields.Int(required=True, allow_none=True, metadata={
        "description": MAX_TIMEOUTS_DOC + " Null: no such rule"})
    analyse = fields.Bool(metadata={"description": "every game is analysed as it finishes"})


class Entrant(Out):
    bot_id = fields.Str(required=True)
    bot_name = fields.Str(required=True)
    status = one_of(ENTRANT_STATUSES, required=True, metadata={
        "description": "in; or how it left the tournament: withdrawn (by itself), no_show "
        "(the no-show rule), disqualified (max_timeouts). One that left forfeits its live "
        "and unplayed games"})
    left = fields.Int(required=True, allow_none=True,
                      metadata={"description": "when it left (unix seconds); null: in"})


class Progress(Out):
    games_planned = fields.Int(required=True)
    games_done = fields.Int(required=True)
    games_live = fields.Int(required=True)
    rounds_planned = fields.Int(required=True)
    rounds_done = fields.Int(required=True)


class TournamentSummary(Out):
    id = fields.Str(required=True, metadata={"example": "0c1d2e3f4a5b"})
    name = fields.Str(required=True)
    status = one_of(TOURNAMENT_STATUSES, required=True,
                    metadata={"description": TOURNAMENT_STATUS_DOC})
    created = fields.Int(required=True)
    finished = fields.Int(required=True, allow_none=True)
    settings = fields.Nested(TournamentSettings, required=True)
    entrants = fields.List(fields.Nested(Entrant), required=True)
    warnings = fields.List(fields.Str(), required=True, metadata={
        "description": "what the organizer should know about settings that were accepted "
        "but cannot play as one might expect: a Swiss of more rounds than entrants - 1 "
        "(some entrants must then meet again; each round has as few rematches as possible, "
        "between the pairs that met least often, then longest ago: a pair meets in "
        "back-to-back rounds only when every other pairing is worse by those measures). "
        "Empty otherwise"})
    progress = fields.Nested(Progress, required=True)


class TournamentGame(Out):
    slot = fields.Int(required=True)
    pairing = fields.Int(required=True, metadata={"description": "index within the round"})
    deal = fields.Int(required=True, metadata={
        "description": "the deal's number in its round: games of a round with the same deal "
        "were dealt the same cards (at different tables)"})
    teams = fields.List(fields.Str(), required=True,
                        metadata={"description": "bot id on team 0, on team 1"})
    game_id = fields.Str(required=True, allow_none=True)
    status = one_of(["pending", "live", "done", "void"], required=True, metadata={
        "description": "void: a game of a cancelled tournament that was live (ended with "
        "no result) or never started; counted nowhere"})
    seed = fields.Int(required=True, allow_none=True,
                      metadata={"description": "the game's seed, once it is over (null for "
                                "a game never started)"})
    winner = fields.Str(required=True, allow_none=True, metadata={
        "description": "bot id; null while not done, when both entrants forfeited, or when "
        "the entrant that did not forfeit has itself left the tournament without a move of "
        "its own: a forfeit is won by an entrant that has played or is still in"})
    forfeit = fields.List(fields.Str(), required=True, allow_none=True, metadata={
        "description": "the entrants that forfeited this game (one, or both): they left the "
        "tournament (withdrawn, no_show, disqualified) before it ended or was played, or "
        "every one of their decisions in it was played by the move clock. The other entrant "
        "wins it (if it has made a move of its own in the tournament or is still in it); it "
        "adds no points, hands, timeouts or matchpoints, and is a rated loss for who "
        "forfeited (not rated when both did). "
        "Null: not forfeited"})
    scores = fields.List(fields.Int(), required=True, allow_none=True)
    hands_won = fields.List(fields.Int(), required=True, allow_none=True)
    timeouts = fields.List(fields.Int(), required=True, allow_none=True)
    recorded = fields.Int(required=True, allow_none=True, metadata={
        "description": "its place (1, 2, ...) in the order the ratings took the results: "
        "slot order, whichever table finished first, so the ratings depend on the results "
        "alone. A result is shown once every table of its deal has finished (until then it "
        "is null, like the seed) and enters the ratings once every earlier slot's has; "
        "null until then"})
    rating = fields.List(fields.Nested(lambda: GameRating()), required=True, allow_none=True,
                         metadata={"description": "per team (as in teams), the entrant's "
                                   "tournament rating before and after this game; null "
                                   "until it is rated (see recorded), and for good when it "
                                   "is not rated: a game between bots of one owner, or one "
                                   "both entrants forfeited (docs/ratings.md)"})


class GameRating(Out):
    bot_id = fields.Str(required=True)
    before = fields.Nested(lambda: RatingOut(), required=True)
    after = fields.Nested(lambda: RatingOut(), required=True)


class TournamentRound(Out):
    round = fields.Int(required=True)
    byes = fields.List(fields.Str(), required=True)
    games = fields.List(fields.Nested(TournamentGame), required=True)


BRACKET_DOC = (
    "Knockout only (null otherwise): single elimination. Seeds: entrants on the "
    "leaderboard first, by rating ordinal (mu - 3 sigma) at creation, higher first; then "
    "unrated ones; ties in the order of `entrants`. The bracket has `size` lines (the "
    "smallest power of two holding every entrant), seed 1 v `size`, 2 v `size` - 1, ... "
    "placed so that seeds 1 and 2 can meet only in the final; the missing lines are byes, "
    "which fall to the top seeds. A match is `games_per_pairing` games (duplicate deals "
    "shared by every table of the round and embargoed until all have finished; with "
    "trusted, each deal played from both seats as twins). Who goes through, once every "
    "game of the match is recorded: 1. more games won; 2. more game points in the match; "
    "3. still level: a tiebreak pair (two more games, one more deal each side on team 0) "
    "and 1.-2. again over all the match's games, at most `tiebreak_pairs` pairs; 4. still "
    "level: the higher seed. Standings rank by round reached (see `place`)")


class BracketSeed(Out):
    seed = fields.Int(required=True, metadata={"description": "1 is the top seed"})
    bot_id = fields.Str(required=True)
    ordinal = fields.Float(required=True, allow_none=True, metadata={
        "description": "the leaderboard rating ordinal it was seeded by; null: unrated"})


class BracketGame(Out):
    slot = fields.Int(required=True)
    game_id = fields.Str(required=True, allow_none=True)
    status = one_of(["pending", "live", "done", "void"], required=True,
                    metadata={"description": "as the game's slot in the round"})
    tiebreak = fields.Bool(required=True, metadata={"description": "a tiebreak pair's game"})
    winner = fields.Str(required=True, allow_none=True, metadata={
        "description": "bot id; null until recorded (every table of its deal finished), "
        "when voided, or when both entrants forfeited it"})


class BracketMatch(Out):
    match = fields.Int(required=True, metadata={"description": "its place in the round, "
                                                "top to bottom; its winner takes line `match` "
                                                "of the next round"})
    entrants = fields.List(fields.Str(allow_none=True), required=True, metadata={
        "description": "bot ids on its two lines; null: a bye (round 1) or not yet known"})
    seeds = fields.List(fields.Int(allow_none=True), required=True)
    pairing = fields.Int(required=True, allow_none=True, metadata={
        "description": "the pairing of its games in the round (`rounds[].games[].pairing`)"})
    status = one_of(["waiting", "bye", "pending", "live", "done", "void"], required=True,
                    metadata={
        "description": "waiting: an entrant is not known yet; bye: one entrant goes through "
        "without playing; done: decided; void: undecided when the tournament was cancelled"})
    wins = fields.List(fields.Int(), required=True, allow_none=True, metadata={
        "description": "games won per entrant (as in entrants), recorded games only"})
    points = fields.List(fields.Int(), required=True, allow_none=True, metadata={
        "description": "game points scored per entrant, recorded games only"})
    tiebreak_games = fields.Int(required=True)
    winner = fields.Str(required=True, allow_none=True)
    decided_by = one_of(["bye", "games", "points", "seed", "forfeit"], required=True,
                        allow_none=True, metadata={
                            "description": "forfeit: an entrant forfeited a game of the match "
                            "(it left the tournament); the other goes through (both: the "
                            "higher seed)"})
    games = fields.List(fields.Nested(BracketGame), required=True)


class BracketRound(Out):
    round = fields.Int(required=True)
    name = fields.Str(required=True, metadata={"example": "semifinals"})
    matches = fields.List(fields.Nested(BracketMatch), required=True)


class Bracket(Out):
    size = fields.Int(required=True)
    seeds = fields.List(fields.Nested(BracketSeed), required=True)
    tiebreak_pairs = fields.Int(required=True, metadata={
        "description": "the most tiebreak pairs a match plays before the higher seed goes "
        "through"})
    champion = fields.Str(required=True, allow_none=True)
    rounds = fields.List(fields.Nested(BracketRound), required=True, metadata={
        "description": "every round, those still to come too"})


class Tournament(TournamentSummary):
    rounds = fields.List(fields.Nested(TournamentRound), required=True)
    bracket = fields.Nested(Bracket, required=True, allow_none=True,
                            metadata={"description": BRACKET_DOC})


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
    rank = fields.Int(required=True, metadata={
        "description": "1 is best: by score, then matchpoints, games won, point difference "
        "(points_for - points_against), rating ordinal (all higher first), then bot id "
        "(ascending). Knockout: by the round reached (the champion, the runner-up, then the "
        "losers of each earlier round, later rounds first; those still in before them), "
        "then matchpoints, games won, point difference, rating ordinal, bot id"})
    bot_id = fields.Str(required=True)
    bot_name = fields.Str(required=True)
    score = fields.Float(required=True, metadata={
        "description": "match points: per pairing and round 1 for winning more games (then "
        "more points), 0.5 each if level; 1 per bye"})
    matchpoints = fields.Float(required=True, metadata={
        "description": "duplicate: for every deal played at several tables, 1 for each "
        "other entrant that held the same cards (same team, another table) and ended with "
        "a smaller margin (own final score minus the opponent's), 0.5 for an equal one; "
        "the first tiebreak after score"})
    comparisons = fields.Int(required=True, metadata={
        "description": "how many such comparisons: the most matchpoints it could have"})
    played = fields.Int(required=True, metadata={
        "description": "games decided: played to the end, or forfeited (by either side)"})
    won = fields.Int(required=True, metadata={
        "description": "games won, forfeits included (a forfeit is won only by an entrant "
        "that has made a move of its own in the tournament)"})
    lost = fields.Int(required=True, metadata={"description": "games lost, forfeits included"})
    hands_won = fields.Int(required=True, metadata={
        "description": "hands in which its team scored more points than the other"})
    points_for = fields.Int(required=True)
    points_against = fields.Int(required=True)
    timeouts = fields.Int(required=True)
    forfeits = fields.Int(required=True, metadata={
        "description": "games it forfeited (counted in lost; see TournamentGame.forfeit)"})
    status = one_of(ENTRANT_STATUSES, required=True,
                    metadata={"description": "as the entrant's status in the tournament"})
    byes = fields.Int(required=True, metadata={
        "description": "rounds it sat out, counted (with their point in score) once the "
        "round is complete (in rounds_done), never before"})
    rating = fields.Nested(RatingOut, required=True)
    place = fields.Str(allow_none=True, metadata={
        "description": "knockout only: the place, shared by the losers of one round, e.g. "
        "1, 2, 3-4, 5-8; null while still in", "example": "3-4"})
    eliminated = fields.Int(allow_none=True, metadata={
        "description": "knockout only: the round it was knocked out in; null: still in, or "
        "the champion"})


class RatingPoint(RatingOut):
    bot_id = fields.Str(required=True)


class RatingHistory(Out):
    round = fields.Int(required=True)
    ratings = fields.List(fields.Nested(RatingPoint), required=True)


class Standings(Out):
    tournament_id = fields.Str(required=True)
    status = one_of(TOURNAMENT_STATUSES, required=True,
                    metadata={"description": TOURNAMENT_STATUS_DOC})
    rounds_done = fields.Int(required=True)
    items = fields.List(fields.Nested(StandingRow), required=True)
    history = fields.List(fields.Nested(RatingHistory), required=True,
                          metadata={"description": "everyone's rating after each round"})


PROVISIONAL_DOC = (
    "true until the bot has played `ARENA_PROVISIONAL_GAMES` rated games (default 10) "
    "against `ARENA_PROVISIONAL_OWNERS` distinct owners (default 3): its rating is shown "
    "but not ranked (`rank` null; listed after the ranked bots). See docs/ratings.md")


class LeaderboardRow(RatingOut):
    rank = fields.Int(required=True, allow_none=True, metadata={
        "description": "1 is best, by ordinal (then bot id); null while provisional"})
    bot_id = fields.Str(required=True)
    bot_name = fields.Str(required=True)
    games = fields.Int(required=True, metadata={
        "description": "rated games (forfeits included: a rated loss for who forfeited)"})
    wins = fields.Int(required=True)
    provisional = fields.Bool(required=True, metadata={"description": PROVISIONAL_DOC})


class Leaderboard(Out):
    items = fields.List(fields.Nested(LeaderboardRow), required=True)


EXPORT_TABLES = ["standings", "games", "ratings", "bracket"]


class ExportQuery(Strict):
    format = one_of(["json", "csv"], metadata={
        "description": "json (the default) or csv; without it, an Accept header that "
        "prefers text/csv to application/json gets csv"})
    table = one_of(EXPORT_TABLES, metadata={
        "description": "csv only, ignored with json (one table per answer; default "
        "standings): standings "
        "(one row per entrant), games (one row per game, per-team values as _0/_1 "
        "columns), ratings (one row per entrant per completed round) or bracket (knockout: "
        "one row per match; empty otherwise)"})


class ExportGame(TournamentGame):
    round = fields.Int(required=True)
    record = fields.Str(required=True, allow_none=True, metadata={
        "description": "the path of the game's record (`GET /games/{id}/record`); null "
        "until the game exists. Embargoed (403) while any table of its deal is live"})


class ExportBye(Out):
    round = fields.Int(required=True)
    bot_id = fields.Str(required=True)


class TournamentExport(TournamentSummary):
    standings = fields.List(fields.Nested(StandingRow), required=True,
                            metadata={"description": "as `GET /tournaments/{id}/standings`"})
    games = fields.List(fields.Nested(ExportGame), required=True, metadata={
        "description": "every game in slot order, as in `GET /tournaments/{id}` (seed and "
        "result null while embargoed), with its round and its record's path"})
    byes = fields.List(fields.Nested(ExportBye), required=True)
    history = fields.List(fields.Nested(RatingHistory), required=True,
                          metadata={"description": "everyone's rating after each round"})
    bracket = fields.Nested(Bracket, required=True, allow_none=True,
                            metadata={"description": "as in `GET /tournaments/{id}`"})


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
        validate=[validate.Length(1, 40), Pattern(r"^[A-Za-z0-9 ._-]+$")],
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


# --- the ladder (service/arena/ladder.py) ---------------------------------------------------

LADDER_NAME_RE = r"^[a-z0-9][a-z0-9_-]{0,31}$"
LADDER_STATES = ["waiting", "matched", "playing", "paused", "off"]
LADDER_STATE_DOC = (
    "waiting: queued for a game; matched: an opponent is found and the game is being "
    "created; playing: in game_id; paused: not matched (see reason) until you join again; "
    "off: not on the ladder")
MAX_LADDER_GAMES = 100_000


class LadderJoin(Strict):
    games = JsonInt(
        allow_none=True, validate=validate.Range(1, MAX_LADDER_GAMES),
        metadata={"description": "play this many ladder games, then leave (a game you "
                  "are playing counts); omitted or null: until you leave"})


class LadderPageQuery(Strict):
    limit = fields.Int(validate=validate.Range(1, 100), load_default=20)
    cursor = fields.Int(validate=validate.Range(0, 2**31),
                        metadata={"description": "next_cursor from the previous page"})


class LadderRating(RatingOut):
    games = fields.Int(required=True)
    wins = fields.Int(required=True)
    provisional = fields.Bool(required=True, metadata={"description": PROVISIONAL_DOC})


class LadderEntry(Out):
    ladder = fields.Str(required=True)
    bot_id = fields.Str(required=True)
    bot_name = fields.Str(required=True)
    state = one_of(LADDER_STATES, required=True, metadata={"description": LADDER_STATE_DOC})
    leaving = fields.Bool(required=True, metadata={
        "description": "you left while in a game: it is played out (and rated), then off"})
    games_left = fields.Int(required=True, allow_none=True, metadata={
        "description": "games still to play before leaving, a game in progress counted; "
        "null: no limit"})
    game_id = fields.Str(required=True, allow_none=True, metadata={
        "description": "the ladder game you are in, if any"})
    waiting_since = fields.Float(required=True, allow_none=True, metadata={
        "description": "unix seconds, while waiting"})
    reason = fields.Str(required=True, allow_none=True, metadata={
        "description": "why you are paused (too many timeouts in one game)"})
    rating = fields.Nested(LadderRating, required=True)


class LadderQueued(Out):
    bot_id = fields.Str(required=True)
    bot_name = fields.Str(required=True)
    state = one_of(LADDER_STATES[:-1], required=True)
    waiting_since = fields.Float(required=True, allow_none=True)
    game_id = fields.Str(required=True, allow_none=True)


class LadderSummary(Out):
    name = fields.Str(required=True, metadata={"example": "2p"})
    players = fields.Int(required=True, validate=validate.OneOf([2, 4]), metadata={
        "description": "table size; in a 4-player game each bot holds both seats of its team"})
    variants = AllVariants(required=True)
    move_limit = fields.Float(required=True, metadata={"description": "seconds per decision"})
    waiting = fields.Int(required=True, metadata={"description": "bots waiting for a game"})
    playing = fields.Int(required=True, metadata={"description": "bots in a ladder game"})
    rated = fields.Int(required=True, metadata={"description": "bots with a rating"})
    games = fields.Int(required=True, metadata={"description": "games rated so far"})


class LadderList(Out):
    items = fields.List(fields.Nested(LadderSummary), required=True)


class LadderDetail(LadderSummary):
    queue = fields.List(fields.Nested(LadderQueued), required=True, metadata={
        "description": "every bot on the ladder (not off): waiting first, longest first"})


class LadderStandingRow(RatingOut):
    rank = fields.Int(required=True, allow_none=True, metadata={
        "description": "1 is best: by ordinal (higher first), then bot id; null while "
        "provisional (listed after the ranked bots)"})
    provisional = fields.Bool(required=True, metadata={"description": PROVISIONAL_DOC})
    bot_id = fields.Str(required=True)
    bot_name = fields.Str(required=True)
    games = fields.Int(required=True)
    wins = fields.Int(required=True)
    losses = fields.Int(required=True)
    form = fields.Str(required=True, validate=Pattern(r"^[WL]{0,10}$"), metadata={
        "description": "the last (up to) 10 results, oldest first: W won, L lost"})


class LadderStandings(Out):
    ladder = fields.Str(required=True)
    items = fields.List(fields.Nested(LadderStandingRow), required=True)
    next_cursor = fields.Int(required=True, allow_none=True)


class LadderOpponent(Out):
    bot_id = fields.Str(required=True)
    bot_name = fields.Str(required=True)


class LadderGame(Out):
    game_id = fields.Str(required=True)
    finished = fields.Float(required=True, metadata={"description": "unix seconds, when rated"})
    opponent = fields.Nested(LadderOpponent, required=True)
    won = fields.Bool(required=True)
    team = fields.Int(required=True, validate=validate.OneOf([0, 1]))
    scores = fields.List(fields.Int(), required=True,
                         metadata={"description": "[yours, theirs], final"})
    timeouts = fields.Int(required=True, metadata={"description": "yours in this game"})
    before = fields.Nested(RatingOut, required=True)
    after = fields.Nested(RatingOut, required=True)
    forfeit = fields.Bool(required=True, metadata={
        "description": "you forfeited it: every decision of yours was played by the move "
        "clock (a rated loss, whatever the score; docs/ratings.md)"})
    unrated = fields.Str(required=True, allow_none=True, metadata={
        "description": "why the game moved no rating (`same_owner`, `both_forfeited`), "
        "or null: it was rated"})


class LadderHistory(Out):
    ladder = fields.Str(required=True)
    bot_id = fields.Str(required=True)
    games = fields.Int(required=True, metadata={"description": "ladder games in all"})
    items = fields.List(fields.Nested(LadderGame), required=True,
                        metadata={"description": "newest first"})
    next_cursor = fields.Int(required=True, allow_none=True)
