"""House games: a person against the service's own bots."""

from __future__ import annotations

from marshmallow import fields, validate

from service.http.accounts.schemas import BotCreated
from service.http.games.schemas import GameSummary
from service.http.schemas.common import TIMEOUT_DOC, JsonInt, JsonNumber, Out, Pattern, Strict
from service.http.schemas.variants import VariantsIn

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
