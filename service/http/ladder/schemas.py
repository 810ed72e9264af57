"""The ladder (``service/arena/ladder/ladders.py``): joining, entries, standings and history."""

from __future__ import annotations

from marshmallow import fields, validate

from service.http.schemas.common import JsonInt, Out, Pattern, Strict, one_of
from service.http.schemas.variants import AllVariants
from service.http.tournaments.schemas import PROVISIONAL_DOC, RatingOut

# --- the ladder (service/arena/ladder/ladders.py) -------------------------------------------------

LADDER_NAME_RE = r"^[a-z0-9][a-z0-9_-]{0,31}$"
LADDER_STATES = ["waiting", "matched", "playing", "paused", "validating", "not_admitted",
                 "off"]
LADDER_STATE_DOC = (
    "waiting: queued for a game; matched: an opponent is found and the game is being "
    "created; playing: in game_id; paused: not matched (see reason) until you join again; "
    "validating: your bot's first entry, playing its unrated validation game against a "
    "house bot (validation_game) before it is queued; not_admitted: it timed out or "
    "stalled in that game (see reason), join again to retry; off: not on the ladder")
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
        "description": "why you are paused (too many timeouts in one game) or not admitted "
        "(what happened in your validation game, and what to change)"})
    validation_game = fields.Str(allow_none=True, metadata={
        "description": "your bot's validation game (unrated, against a house bot), while "
        "validating and once not admitted; null otherwise"})
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
    time_bank = fields.Float(metadata={
        "description": "seconds of time bank per seat in its games (0: none; "
        "`ARENA_LADDER_TIME_BANK` unless the ladder sets one)"})
    waiting = fields.Int(required=True, metadata={"description": "bots waiting for a game"})
    playing = fields.Int(required=True, metadata={"description": "bots in a ladder game"})
    rated = fields.Int(required=True, metadata={"description": "bots with a rating"})
    games = fields.Int(required=True, metadata={"description": "games rated so far"})


class LadderList(Out):
    items = fields.List(fields.Nested(LadderSummary), required=True)
    next_cursor = fields.Int(required=True, allow_none=True, metadata={
        "description": "pass as `cursor` for the next page; null: the list is through"})


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
