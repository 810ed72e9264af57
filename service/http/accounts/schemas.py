"""Bots and their tokens: registering a bot, the bot as answered, the turn poll (``/bots/me/turns``)
and the invitations it lists."""

from __future__ import annotations

from marshmallow import fields, validate

from service.http.schemas.callback import Callback
from service.http.schemas.common import BANK_LEFT_DOC, Out, Pattern, Strict, StrictBool, one_of
from service.http.schemas.variants import AllVariants


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
    notices_after = fields.Float(
        validate=validate.Range(0, 1e11),
        metadata={"description": "unix seconds: answer at once if a tournament notice "
                  "newer than this is listed (send the newest `at` you have seen). Without "
                  "it, recent notices are listed in every answer but only one made during "
                  "the wait ends it"})
    playing = fields.Str(
        validate=validate.Regexp(PLAYING_RE),
        metadata={"description": f"game ids you are already playing (comma-separated, at "
                  f"most {MAX_PLAYING}): they are left out of the answer, and the poll "
                  "waits while only they are your turn. A runner that plays each game on "
                  "its own requests (`POST …/actions?wait=`, `GET …/turn`) polls with them "
                  "all here and learns of any other game's turn the moment it comes"})


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
    person = fields.Bool(metadata={
        "description": "true for a person's account (registered with `person`, as the "
        "pages' *Play against a bot* does), false for a program"})


class BotCreated(Bot):
    token = fields.Str(
        required=True,
        metadata={"description": "bearer token; shown once, stored only as a hash"},
    )


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
    items = fields.List(fields.Nested(Invitation), required=True,
                        metadata={"description": "oldest first"})
    next_cursor = fields.Int(required=True, allow_none=True, metadata={
        "description": "pass as `cursor` for the next page; null: the list is through"})
    invitations = fields.List(fields.Nested(Invitation), required=True, metadata={
        "deprecated": True, "description": "every pending invitation, unpaged, under the "
        "list's old name: read `items`; this key goes in the next API version"})


class TurnClock(Out):
    game_id = fields.Str(required=True)
    seat = fields.Int(required=True, metadata={"description": "your seat in turn there"})
    move_limit = fields.Float(required=True, allow_none=True,
                              metadata={"description": "seconds per decision, or null"})
    bank_left = fields.Float(required=True, allow_none=True,
                             metadata={"description": BANK_LEFT_DOC})
    deadline = fields.Float(required=True, allow_none=True, metadata={
        "description": "unix seconds when the clock plays for you there, or null"})


NOTICE_EVENTS = ["starting", "finished", "cancelled"]


class TournamentNotice(Out):
    event = fields.Str(required=True, validate=validate.OneOf(NOTICE_EVENTS), metadata={
        "description": "starting: a tournament you entered has started (your games come "
        "as turns); finished: it is over (its standings are final); cancelled: it was "
        "cancelled (`reason` says why: too few entrants at its start, or its organizer)"})
    tournament_id = fields.Str(required=True)
    name = fields.Str(required=True)
    at = fields.Float(required=True, metadata={"description": "unix seconds, when it "
                                                "happened"})
    reason = fields.Str(allow_none=True, metadata={"description": "with cancelled: why"})


class BotTurns(Out):
    timed_out = fields.Bool(required=True)
    games = fields.List(fields.Str(), required=True, metadata={"description": "game ids"})
    clocks = fields.List(fields.Nested(TurnClock), metadata={
        "description": "per game of `games` that has a move limit, in their order: your "
        "seat's clock there (docs/bots.md, \"The clock\"); absent when no game listed "
        "has one"})
    invitations = fields.List(fields.Nested(Invitation), metadata={
        "description": "your newest pending invitations (games other owners' bots asked "
        "you to play; at most `ARENA_TURNS_INVITATIONS`, 5 by default), oldest first: "
        "accept or decline each (`POST /invitations/{id}/accept`); `GET "
        "/bots/me/invitations` lists every one"})
    invitations_pending = fields.Int(metadata={
        "description": "how many invitations are pending in all (more than `invitations` "
        "holds when it is at its cap); absent when none is"})
    tournaments = fields.List(fields.Nested(TournamentNotice), metadata={
        "description": "notices of the tournaments you entered from the last day (the "
        "latest 20), oldest first: one started, finished or was cancelled; absent when "
        "there is none"})


class BotMe(Bot):
    callback = fields.Nested(Callback, required=True, allow_none=True, metadata={
        "description": "your callback URL and its verification (null: none, you play by "
        "pull); as `GET /bots/me/callback`"})
