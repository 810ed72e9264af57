"""Request and response shapes of ``service.http.archive``."""

from __future__ import annotations

from marshmallow import fields, validate

from service.arena.archive.games import CURSOR_RE
from service.http.accounts import schemas as sb
from service.http.games import record_schemas as sr
from service.http.games import schemas as sg
from service.http.schemas.common import ID_PATTERN, Out, Strict

# a ladder's name, as ``service.http.ladder.schemas`` (a sibling this layer may not import)
LADDER_NAME_RE = r"^[a-z0-9][a-z0-9_-]{0,31}$"


def QueryBool(**kw: object) -> fields.Boolean:
    """A query string's boolean: `true` or `false` only."""
    return fields.Boolean(truthy={"true"}, falsy={"false"}, **kw)  # type: ignore[arg-type]


class BotGamesQuery(Strict):
    limit = fields.Int(validate=validate.Range(1, 100), load_default=50,
                       metadata={"description": "items per page (pages only)"})
    cursor = fields.Str(validate=validate.Regexp(CURSOR_RE), metadata={
        "description": "`next_cursor` of the previous page (opaque)"})
    since = fields.Float(validate=validate.Range(0, 1e11), metadata={
        "description": "unix seconds: finished at or after"})
    until = fields.Float(validate=validate.Range(0, 1e11), metadata={
        "description": "unix seconds: finished at or before"})
    rated = QueryBool(metadata={
        "description": "true: only rated games (a tournament's or a ladder's); false: only "
        "unrated ones"})
    tournament = fields.Str(validate=validate.Regexp(ID_PATTERN),
                            metadata={"description": "only this tournament's games"})
    ladder = fields.Str(validate=validate.Regexp(LADDER_NAME_RE),
                        metadata={"description": "only this ladder's games"})
    opponent = fields.Str(validate=validate.Regexp(ID_PATTERN), metadata={
        "description": "only games with this bot on the other team"})
    players = fields.Int(validate=validate.OneOf([2, 4]),
                         metadata={"description": "table size"})
    records = QueryBool(load_default=True, metadata={
        "description": "NDJSON only: with each game's full `record` (default true)"})


class BotGame(sg.GameSummary):
    finished_at = fields.Float(required=True, metadata={
        "description": "unix seconds (the service's clock) when the game ended; the order "
        "of the list, newest first"})
    embargoed = fields.Bool(required=True, metadata={
        "description": "a duplicate deal still being played at another table: `scores`, "
        "`winner` (and in NDJSON the `record`) are null until its embargo lifts; ask again "
        "then"})


class BotGameLine(BotGame):
    record = fields.Nested(sr.Record, allow_none=True, metadata={
        "description": "NDJSON lines: the complete record (null while embargoed)"})


class BotGameList(Out):
    items = fields.List(fields.Nested(BotGame), required=True, metadata={
        "description": "newest first; a page may hold fewer than `limit` (even none) when "
        "filters leave games out: go on while `next_cursor` is not null"})
    next_cursor = fields.Str(required=True, allow_none=True, metadata={
        "description": "pass as `cursor` for the next page; null: the list is through"})


TOKEN_DOC = (
    "The token is shown here only, once; the old one is refused from now on (at once by "
    "the process that answered, within `old_token_grace` seconds by every other process "
    "of the service, which may still hold it in a short cache)")


class TokenRotated(Out):
    id = fields.Str(required=True, metadata={"description": "the bot"})
    token = fields.Str(required=True, allow_none=True, metadata={
        "description": "the new bearer token (null after a revocation: the bot has none "
        "until one is rotated in from another bot of its owner). " + TOKEN_DOC})
    old_token_grace = fields.Float(required=True, metadata={
        "description": "seconds within which every process of the service refuses the old "
        "token"})


class OwnedBot(sb.Bot):
    retired = fields.Float(required=True, allow_none=True, metadata={
        "description": "unix seconds when its owner retired it (it plays no more; its "
        "games, ratings and name are kept), else null"})


class Rating(Out):
    mu = fields.Float(required=True)
    sigma = fields.Float(required=True)
    ordinal = fields.Float(required=True, metadata={"description": "mu - 3 sigma"})
    games = fields.Int(required=True)
    wins = fields.Int(required=True)


class BotRatings(Out):
    leaderboard = fields.Nested(Rating, required=True, allow_none=True, metadata={
        "description": "over every tournament game; null: none rated"})
    ladders = fields.Dict(keys=fields.Str(), values=fields.Nested(Rating), required=True,
                          metadata={"description": "ladder name -> its rating there"})


class OwnerBot(OwnedBot):
    ratings = fields.Nested(BotRatings, required=True)
    live_games = fields.List(fields.Nested(sg.GameSummary), required=True, metadata={
        "description": "the waiting and active games it sits in, oldest first"})


class OwnerMe(Out):
    id = fields.Str(required=True, metadata={"description": "the owner"})
    created = fields.Float(required=True, metadata={"description": "unix seconds"})
    suspended = fields.Str(required=True, allow_none=True, metadata={
        "description": "the operator's reason while the owner is suspended, else null"})
    bots = fields.List(fields.Nested(OwnerBot), required=True)
