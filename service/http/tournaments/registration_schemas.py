"""Tournaments' registration on the wire: entry conditions, how a tournament takes
entries, an entry, the organizer's exclusions and cancellation, the house bots and the
schedule (``service.arena.tournaments.registration``). Beside ``schemas``, which the
tournament's shapes import these from; the same conventions (requests ``Strict``,
responses closed ``Out``)."""

from __future__ import annotations

from marshmallow import fields, validate

from service.http.schemas.common import JsonInt, JsonNumber, Out, Strict, StrictBool, one_of

CONDITIONS_DOC = (
    "who may enter (each refusal its own problem type): validated (a bot that passed a "
    "ladder's validation game: `entry-not-validated`; default true for open tournaments, "
    "and only while this service can validate, i.e. runs house bots), min_rated_games "
    "(leaderboard games: `entry-rated-games`), rating_min / rating_max (leaderboard "
    "ordinal: `entry-rating-band`), one_per_owner (default true: `entry-one-per-owner`)")


class Conditions(Strict):
    validated = StrictBool(metadata={"description": "validated bots only"})
    min_rated_games = JsonInt(validate=validate.Range(0, 100000))
    rating_min = JsonNumber(allow_none=True, validate=validate.Range(-1000, 1000))
    rating_max = JsonNumber(allow_none=True, validate=validate.Range(-1000, 1000))
    one_per_owner = StrictBool(metadata={"description": "at most one bot of an owner "
                                         "(house bots filling up excepted)"})


class ConditionsOut(Out):
    validated = fields.Bool(required=True)
    min_rated_games = fields.Int(required=True)
    rating_min = fields.Float(required=True, allow_none=True)
    rating_max = fields.Float(required=True, allow_none=True)
    one_per_owner = fields.Bool(required=True)


class RegistrationOut(Out):
    mode = one_of(["open", "private"], required=True, metadata={
        "description": "open: any bot may enter; private: with the join code"})
    starts_at = fields.Float(required=True, allow_none=True, metadata={
        "description": "unix seconds; null: its organizer starts it"})
    min_entrants = fields.Int(required=True, metadata={
        "description": "fewer at the start: house bots fill up (house_fill), else it is "
        "cancelled and its entrants told"})
    max_entrants = fields.Int(required=True)
    conditions = fields.Nested(ConditionsOut, required=True,
                               metadata={"description": CONDITIONS_DOC})
    house_fill = fields.Bool(required=True, metadata={
        "description": "house bots fill it up to min_entrants at the start, when a house "
        "plays here and at least one other bot entered"})


class Excluded(Out):
    bot_id = fields.Str(required=True)
    bot_name = fields.Str(required=True)
    reason = fields.Str(required=True, metadata={"description": "the organizer's reason"})
    at = fields.Int(required=True)


class EntryIn(Strict):
    code = fields.Str(validate=validate.Length(1, 64), metadata={
        "description": "a private tournament's join code"})


class ExcludeIn(Strict):
    reason = fields.Str(required=True, validate=validate.Length(1, 200), metadata={
        "description": "shown to all with the entrant"})


class CancelIn(Strict):
    reason = fields.Str(validate=validate.Length(1, 200), metadata={
        "description": "shown to all as the tournament's `reason`"})


class HouseBot(Out):
    bot_id = fields.Str(required=True)
    bot_name = fields.Str(required=True)
    strategy = fields.Str(required=True, metadata={"description": "random, heuristic or "
                                                    "search"})
    role = one_of(["opponent", "partner"], required=True)


class HouseBots(Out):
    playing = fields.Bool(required=True, metadata={
        "description": "a house process is playing here now (else house games answer 503 "
        "and no tournament is filled up)"})
    items = fields.List(fields.Nested(HouseBot), required=True)
    next_cursor = fields.Int(required=True, allow_none=True, metadata={
        "description": "pass as `cursor` for the next page; null: the list is through"})


class ScheduleEntry(Out):
    name = fields.Str(required=True)
    every = fields.Int(required=True, metadata={"description": "seconds between starts"})
    offset = fields.Int(required=True, metadata={
        "description": "seconds after each multiple of `every` (UTC)"})
    next_start = fields.Float(required=True)
    next_tournament = fields.Str(required=True, allow_none=True, metadata={
        "description": "the id of the next one, registering (null: not made yet)"})
    tournament = fields.Dict(required=True, metadata={
        "description": "its settings, as a `POST /tournaments` body"})


class ScheduleList(Out):
    items = fields.List(fields.Nested(ScheduleEntry), required=True)
    next_cursor = fields.Int(required=True, allow_none=True, metadata={
        "description": "pass as `cursor` for the next page; null: the list is through"})
