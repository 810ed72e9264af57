"""A game's record (``GET /games/{id}/record``) and its server-sent events
(``GET /games/{id}/events``): both show only what the asker may see while the game is live."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from service.http.games.schemas import (
    ENDED_DOC,
    SEED_SALT_DOC,
    DoneTrick,
    Ended,
    Kick,
    PlayedCard,
    ScoreItem,
    TimeoutOut,
)
from service.http.schemas.common import ACTION_RE, SUIT_RE, Out, Pattern, card, const, one_of
from service.http.schemas.variants import VariantsOut

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
    winner = fields.Int(required=True, allow_none=True,
                        metadata={"description": "the winning team, once over (`ended.winner`)"})
    ended = fields.Nested(Ended, required=True, allow_none=True,
                          metadata={"description": ENDED_DOC})
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
    winner = fields.Int(required=True, allow_none=True, metadata={
        "description": "the team credited with the game (`reason`), or null: nobody"})
    scores = fields.List(fields.Int(), required=True,
                         metadata={"description": "as they stood when it ended"})
    reason = one_of(["played", "forfeit", "void", "cancelled"], metadata={
        "description": "why it ended (as the view's `ended.reason`); the last event of "
        "every finished game's stream, however it ended"})
    forfeit_by = fields.List(fields.Str(), metadata={
        "description": "the bots that forfeited it (as `ended.forfeit_by`)"})
    why = fields.Str(allow_none=True, metadata={"description": "as `ended.why`"})


EVENTS: dict[str, type[Schema]] = {
    "game_started": GameStartedEvent, "deal": DealEvent, "kick": KickEvent,
    "stand": StandEvent, "beg": BegEvent, "give_one": GiveOneEvent,
    "run_pack": RunPackEvent, "run_deal": RunDealEvent, "redeal": RedealEvent,
    "trump": TrumpEvent, "card_played": CardPlayedEvent, "trick_won": TrickWonEvent,
    "score": ScoreEvent, "hand_over": HandOverEvent, "game_over": GameOverEvent,
}
