"""Tournaments: their settings and size limits, standings, ratings, the bracket and the export."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields, validate, validates_schema

from service.arena.tournaments.size import (
    MAX_ENTRANTS,
    MAX_GAMES_PER_PAIRING,
    MAX_ROUNDS,
    MAX_TOURNAMENT_GAMES,
    SIZE_DOC,
    size_errors,
)
from service.http.schemas.common import (
    ID_PATTERN,
    TIME_BANK_DOC,
    TIMEOUT_DOC,
    JsonInt,
    JsonNumber,
    Out,
    Pattern,
    Strict,
    StrictBool,
    one_of,
)
from service.http.schemas.variants import AllVariants, VariantsIn
from service.http.tournaments.registration_schemas import (
    CONDITIONS_DOC,
    CancelIn,
    Conditions,
    EntryIn,
    Excluded,
    ExcludeIn,
    HouseBots,
    RegistrationOut,
    ScheduleList,
)

__all__ = ["CancelIn", "EntryIn", "ExcludeIn", "HouseBots", "ScheduleList"]  # the routes'

# --- tournaments ----------------------------------------------------------------------------




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
ENTRANT_STATUSES = ["in", "withdrawn", "no_show", "disqualified", "excluded"]
TOURNAMENT_STATUSES = ["registering", "running", "paused", "finished", "cancelled"]
FORMATS = ["round_robin", "swiss", "knockout", "arena"]
TOURNAMENT_STATUS_DOC = (
    "registering (bots enter it until `registration.starts_at` or the organizer's start); "
    "running; paused (no game starts; live games play on, clocks running); finished (every "
    "game played); cancelled (live games voided, nothing more scheduled; `reason` says why)")
ARENA_DOC = (
    "arena: for `duration` seconds, whoever is free is paired at once with a free entrant "
    "near it in the standings (no immediate rematch), one game a pairing; entrants may "
    "enter late and leave; games under way when the clock ends finish and count. A win "
    "scores 2, and 4 after two wins in a row (a streak, until the next loss); ranked by "
    "score, games won, fewer games played, rating (docs/tournaments.md)")
class TournamentCreate(Strict):
    name = fields.Str(validate=[validate.Length(1, 60), Pattern(r"^[A-Za-z0-9 ._-]+$")],
                      metadata={"example": "weekly"})
    format = fields.Str(
        required=True, validate=validate.OneOf(FORMATS),
        metadata={"description": "round_robin (everyone meets everyone), swiss (rounds "
                  "paired by the standings), knockout (single elimination seeded by the "
                  "leaderboard's rating ordinal, byes to the top seeds; its rules are under "
                  "`bracket` in the tournament) or " + ARENA_DOC})
    entrants = fields.List(
        fields.Str(validate=Pattern(ID_PATTERN)),
        validate=validate.Length(2, MAX_ENTRANTS, error=f"a tournament takes 2 to "
                                 f"{MAX_ENTRANTS} entrants"),
        metadata={"description": "registered bot ids, distinct (2 to "
                  f"{MAX_ENTRANTS}); the order seeds Swiss round 1, and breaks a "
                  "knockout's seeding ties (unrated entrants, equal ordinals). With a bot's "
                  "token only your owner's own bots (others enter themselves). Omitted: "
                  "the tournament is registering and bots enter it. " + SIZE_DOC,
                  "uniqueItems": True},
    )
    registration = fields.Str(validate=validate.OneOf(["open", "private"]), metadata={
        "description": "bots enter it themselves until the start: open (any bot that "
        "meets the conditions) or private (with the join code, answered once as `code`). "
        "Given (or starts_at given, or entrants omitted): the tournament is registering"})
    code = fields.Str(validate=[validate.Length(6, 64), Pattern(r"^[A-Za-z0-9_-]+$")],
                      metadata={"description": "private only: the join code you hand out "
                                "(default: a random one)"})
    starts_at = JsonNumber(validate=validate.Range(0, 1e11), metadata={
        "description": "unix seconds: it starts then, by itself; omitted: its organizer "
        "starts it (`POST /tournaments/{id}/start`)"})
    min_entrants = JsonInt(validate=validate.Range(2, MAX_ENTRANTS), metadata={
        "description": "default 2: fewer at the start and it is cancelled (entrants told), "
        "unless house bots fill it up (house_fill)"})
    max_entrants = JsonInt(validate=validate.Range(2, MAX_ENTRANTS),
                           metadata={"description": f"default {MAX_ENTRANTS}"})
    conditions = fields.Nested(Conditions, metadata={"description": CONDITIONS_DOC})
    house_fill = StrictBool(metadata={
        "description": "house bots fill it up to min_entrants at the start (when a house "
        "plays and at least one other bot entered); default: the service's "
        "ARENA_TOURNAMENT_HOUSE_FILL for open tournaments, false for private ones"})
    duration = JsonNumber(validate=validate.Range(5, 86400), metadata={
        "description": "arena only (required there): seconds from its start to the end "
        "of pairing"})
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
    time_bank = JsonNumber(validate=validate.Range(0, 3600),
                           metadata={"description": TIME_BANK_DOC + "; omitted: none"})
    parallel = JsonInt(validate=validate.Range(1, 256),
                       metadata={"description": "at most this many of its games at once; "
                                 "default 8, or every game of a round (an arena: every "
                                 "free pair) for a registering tournament"})
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
        if (data.get("format") == "arena") != (data.get("duration") is not None):
            raise ValidationError("an arena has a duration (seconds), and only an arena",
                                  "duration")
        if data.get("code") is not None and data.get("registration") != "private":
            raise ValidationError("only a private tournament has a join code", "code")
        too_big = size_errors(data, original if isinstance(original, dict) else None)
        if too_big:
            raise ValidationError(too_big)


class TournamentSettings(Out):
    format = one_of(FORMATS, required=True)
    duration = fields.Float(metadata={"description": "arena only: seconds of pairing"})
    players = fields.Int(required=True, validate=validate.OneOf([2, 4]))
    games_per_pairing = fields.Int(required=True)
    duplicate = fields.Bool(required=True, metadata={
        "description": "as played: deals shared across the tables of each round"})
    trusted = fields.Bool(required=True, metadata={
        "description": "duplicate deals as twins within a pairing (entrants see a deal twice)"})
    rounds = fields.Int(required=True)
    variants = AllVariants(required=True)
    move_limit = fields.Float(required=True, allow_none=True)
    time_bank = fields.Float(allow_none=True, metadata={
        "description": "seconds of time bank per seat, or null (none)"})
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
        "(the no-show rule), disqualified (max_timeouts), excluded (by the organizer, "
        "`note` says why). One that left forfeits its live and unplayed games"})
    left = fields.Int(required=True, allow_none=True,
                      metadata={"description": "when it left (unix seconds); null: in"})
    note = fields.Str(allow_none=True, metadata={
        "description": "excluded: the organizer's reason, shown to all"})
    joined = fields.Int(metadata={"description": "when it entered (unix seconds)"})


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
    organizer = fields.Str(required=True, allow_none=True, metadata={
        "description": "the owner that organizes it (null: the service's operator, or its "
        "schedule); only its bots' tokens (or the admin's) control it"})
    schedule = fields.Str(required=True, allow_none=True, metadata={
        "description": "the recurring tournament it is one of (`GET "
        "/tournaments/schedule`); null: none"})
    registration = fields.Nested(RegistrationOut, required=True, allow_none=True, metadata={
        "description": "how bots enter it; null: its entrants were named by its organizer"})
    entrant_count = fields.Int(required=True, metadata={
        "description": "entrants in it now (those that left not counted)"})
    rated = fields.Bool(required=True, metadata={
        "description": "false when every entrant is one owner's: no game of it is rated"})
    reason = fields.Str(required=True, allow_none=True, metadata={
        "description": "cancelled: why (too few entrants at its start, or its organizer)"})
    started = fields.Int(required=True, allow_none=True, metadata={
        "description": "unix seconds it started (registering tournaments only; null "
        "otherwise)"})
    ends_at = fields.Int(required=True, allow_none=True, metadata={
        "description": "arena: when pairing ends (games under way then finish)"})
    excluded = fields.List(fields.Nested(Excluded), required=True, metadata={
        "description": "entrants its organizer excluded before the start, with the reason"})


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
    code = fields.Str(metadata={"description": "a private tournament's join code: in the "
                                "answer to its creation only (hand it out)"})
    rounds = fields.List(fields.Nested(TournamentRound), required=True)
    bracket = fields.Nested(Bracket, required=True, allow_none=True,
                            metadata={"description": BRACKET_DOC})


class TournamentList(Out):
    items = fields.List(fields.Nested(TournamentSummary), required=True)
    next_cursor = fields.Int(required=True, allow_none=True)


class TournamentListQuery(Strict):
    limit = fields.Int(validate=validate.Range(1, 100), load_default=20)
    cursor = fields.Int(validate=validate.Range(0, 2**62))
    status = fields.Str(validate=validate.OneOf(TOURNAMENT_STATUSES), metadata={
        "description": "only these (running includes paused); registering: soonest "
        "start first"})
    format = fields.Str(validate=validate.OneOf(FORMATS))
    players = fields.Int(validate=validate.OneOf([2, 4]), metadata={
        "description": "table size"})
    starts_after = fields.Float(validate=validate.Range(0, 1e11), metadata={
        "description": "unix seconds: starting (or started) at or after"})
    starts_before = fields.Float(validate=validate.Range(0, 1e11))


class RatingOut(Out):
    mu = fields.Float(required=True, metadata={"description": "the estimate"})
    sigma = fields.Float(required=True, metadata={"description": "its uncertainty"})
    ordinal = fields.Float(required=True, metadata={"description": "mu - 3 sigma"})


class StandingRow(Out):
    streak = fields.Int(metadata={"description": "arena only: wins in a row now (past 2, "
                                  "a win scores 4)"})
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
    next_cursor = fields.Int(required=True, allow_none=True, metadata={
        "description": "pass as `cursor` for the next page of `items`; null: through"})
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
    next_cursor = fields.Int(required=True, allow_none=True, metadata={
        "description": "pass as `cursor` for the next page; null: the list is through"})


EXPORT_TABLES = ["standings", "games", "ratings", "bracket"]


TABLE_DOC = (
    "one table per answer (default standings): standings (one row per entrant), games (one "
    "row per game, per-team values as _0/_1 columns), ratings (one row per entrant per "
    "completed round) or bracket (knockout: one row per match; empty otherwise)")


class ExportCsvQuery(Strict):
    table = one_of(EXPORT_TABLES, metadata={"description": TABLE_DOC})


class ExportQuery(Strict):
    format = one_of(["json", "csv"], metadata={
        "description": "json (the default); csv (deprecated, kept for older clients: its "
        "answer carries `Deprecation` and `Sunset`) redirects (307) "
        "to `/tournaments/{tournament_id}/export.csv` with the same `table`",
        "deprecated": True})
    table = one_of(EXPORT_TABLES, metadata={
        "description": "with `format=csv` only (ignored with json): " + TABLE_DOC})


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
