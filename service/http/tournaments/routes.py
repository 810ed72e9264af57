"""HTTP routes of the tournaments (``service.arena.tournaments``): create, list, read,
standings, export, the organizer's controls, an entrant's withdrawal, the leaderboard."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, request

from service.arena.accounts import house
from service.arena.tournaments import stream as tournament_stream
from service.arena.tournaments.export import csv_table
from service.arena.tournaments.registration import Registration
from service.arena.tournaments.service import MAX_GAMES
from service.http import versions
from service.http.api import (
    BOT_ID,
    TOURNAMENT_ID,
    arena,
    link,
    operation,
    respond,
    sch,
    tournaments,
)
from service.http.lists import (
    CONDITIONAL,
    ETAG,
    LINK,
    PageQuery,
    conditional,
    page_of,
    respond_page,
)
from service.http.schemas import common as sc
from service.http.tournaments import schemas as st

bp = Blueprint("tournaments", __name__)


def registration() -> Registration:
    return current_app.extensions["registration"]

# --- tournaments ----------------------------------------------------------------------------


@bp.post("/tournaments")
@operation(
    summary="Organize a tournament (any owner, with a token of one of its bots)",
    description="Round robin or Swiss over registered bots, 2- or 4-player games (in a "
    "4-player game each entrant holds both seats of its team), games per pairing, duplicate "
    "deals (each deal of a round played at every table of the round, by different entrants, "
    "results compared across tables; on by default from 4 entrants; `trusted` replays a "
    "deal with the teams swapped instead), house rules and a move time limit. The service "
    "creates the games itself as earlier ones finish; "
    "entrants find them through `GET /bots/me/turns`. With a bot's token its owner is the "
    "organizer (it controls the tournament; only its own bots may be named as `entrants`, "
    "others enter themselves) within the quotas (tournaments a day and open at once: 429 "
    "`tournament-quota`; games: 422); the admin token organizes for the service and "
    "overrides every organizer check. With `registration`, `starts_at` or no `entrants` "
    "the tournament is `registering`: bots enter it (`POST /tournaments/{id}/entrants`) "
    "until it starts at `starts_at` (or its organizer's start); a private one answers its "
    "join `code` here, once. Format `arena`: a fixed `duration` in which free entrants are "
    f"paired at once (docs/tournaments.md). At most {MAX_GAMES} games in all (pairings x rounds x "
    "games per pairing): more is a 422 naming the field that would bring it within the limit. "
    "A `seed` an earlier tournament used is refused, 409 `seed-reused` (its deals are "
    "public once that tournament is over), unless `trusted` (docs/ratings.md).",
    tags=("tournaments",),
    body=st.TournamentCreate,
    response=st.Tournament,
    status=201,
    auth="organizer",
    errors=(403, 404, 409),
    example={"name": "weekly", "format": "swiss", "registration": "open",
             "starts_at": 1767225600, "min_entrants": 4, "max_entrants": 32, "rounds": 5,
             "players": 2, "games_per_pairing": 2, "variants": {"target": 7},
             "move_limit": 10},
    links={
        "GetTournament": link("getTournament", "the tournament",
                              tournament_id="$response.body#/id"),
        "GetStandings": link("getStandings", "its standings",
                             tournament_id="$response.body#/id"),
    },
)
def create_tournament(caller: str, body: dict[str, Any]) -> Response:
    t = registration().create(body, caller)
    return respond(sch(st.Tournament), t, 201, {"Location": f"/tournaments/{t['id']}"})


@bp.get("/tournaments")
@operation(
    summary="Find tournaments: newest first, or those registering, soonest first",
    description="Filter by `status` (registering: the ones a bot may enter, soonest start "
    "first; running includes paused), `format`, `players` (table size) and start time. "
    "Each shows its `registration` (mode, start, minimum and maximum entrants, entry "
    "conditions) and `entrant_count`.",
    tags=("tournaments",), query=st.TournamentListQuery, response=st.TournamentList,
    response_headers={**LINK, **ETAG}, **CONDITIONAL)
def list_tournaments(query: dict[str, Any]) -> Response:
    return respond_page(sch(st.TournamentList), tournaments().list(
        query["limit"], query.get("cursor"), query.get("status"), query.get("format"),
        query.get("players"), query.get("starts_after"), query.get("starts_before")))


@bp.get("/tournaments/schedule")
@operation(
    summary="The recurring tournaments: when the next of each starts",
    description="The operator's schedule (`ARENA_TOURNAMENT_SCHEDULE`): each entry's "
    "period, its next start and the id of the next tournament, made ahead of time with "
    "registration open.",
    tags=("tournaments",), query=PageQuery, response=st.ScheduleList,
    response_headers={**LINK, **ETAG}, **CONDITIONAL)
def tournament_schedule(query: dict[str, Any]) -> Response:
    items, after = page_of(current_app.extensions["tournament_schedule"].listing(),
                           query["limit"], query.get("cursor"))
    return respond_page(sch(st.ScheduleList), {"items": items, "next_cursor": after})


@bp.get("/house")
@operation(
    summary="The house bots: their ids and strategies",
    description="The service's own bots (the built-in strategies), which play house games "
    "and fill open tournaments up to their minimum. `playing`: a house process plays "
    "here now.", tags=("games",), query=PageQuery, response=st.HouseBots,
    response_headers=LINK)
def house_bots(query: dict[str, Any]) -> Response:
    listing = house.listing(tournaments().store)
    listing["items"], listing["next_cursor"] = page_of(listing["items"], query["limit"],
                                                       query.get("cursor"))
    return respond_page(sch(st.HouseBots), listing)


@bp.post("/tournaments/<tournament_id>/entrants")
@operation(
    summary="Enter a tournament (your bot itself, with its own token)",
    description="Entering is your bot's consent to play the tournament's games. Allowed "
    "while it is registering (an arena: until its clock ends), within its conditions; "
    "each refusal has its own type: `entry-closed`, `entry-code` (a private tournament's "
    "join code, sent as `code`), `entry-not-validated`, `entry-rated-games`, "
    "`entry-rating-band`, `entry-one-per-owner`, `tournament-full`, `entry-quota`. A "
    "repeat answers the tournament as it is. You hear that it starts, finishes or is "
    "cancelled through `GET /bots/me/turns` (`tournaments`) and webhooks.",
    tags=("tournaments",), body=st.EntryIn, body_required=False, response=st.Tournament,
    status=201, auth="required", errors=(403, 404, 409),
    path_params={"tournament_id": TOURNAMENT_ID})
def enter_tournament(tournament_id: str, bot_id: str, body: dict[str, Any]) -> Response:
    return respond(sch(st.Tournament),
                   registration().enter(tournament_id, bot_id, body.get("code")), 201)


@bp.get("/tournaments/<tournament_id>/events")
@operation(
    summary="The tournament's events as server-sent events",
    description="`snapshot` first (the summary), then as they happen: `entrants`, "
    "`status` (started, paused, finished, cancelled, with `reason`), `round` (paired), "
    "`game` (started or finished; an embargoed deal's result stays hidden as in `GET "
    "/tournaments/{id}`), `standings`. Changes arrive within a second; the stream ends "
    "once the tournament is over; a reconnection starts with a fresh `snapshot`.",
    tags=("tournaments",), response=None, content_type="text/event-stream",
    errors=(404,), path_params={"tournament_id": TOURNAMENT_ID})
def events(tournament_id: str) -> Response:
    wakeups = arena().wakeups
    gen = tournament_stream.events(tournaments(), tournament_id,
                                   stop=lambda: wakeups.closing)
    resp = Response(gen, mimetype="text/event-stream")
    resp.headers["Cache-Control"] = "no-store"
    resp.headers["X-Accel-Buffering"] = "no"
    return resp


@bp.get("/tournaments/<tournament_id>")
@operation(
    summary="A tournament: settings, status, rounds with their games and results",
    description="A game's seed (and the tournament's) is shown only once it is over: it "
    "fixes every card. A game of a duplicate deal shows its result and seed only once "
    "every table of the deal has finished.",
    tags=("tournaments",),
    response=st.Tournament,
    errors=(404,),
    path_params={"tournament_id": TOURNAMENT_ID},
    response_headers=ETAG,
    **CONDITIONAL,
)
def get_tournament(tournament_id: str) -> Response:
    return conditional(respond(sch(st.Tournament), tournaments().detail(tournament_id)))


@bp.get("/tournaments/<tournament_id>/standings")
@operation(
    summary="Standings and ratings, with the rating history per round",
    description="Ranked by, in order (each a tiebreak of the ones before, higher first): "
    "1. match score (per pairing and round 1 for winning more of its games, then more "
    "points in them; 0.5 each if still level; 1 per bye); 2. matchpoints (duplicate deals "
    "compared across tables); 3. games won; 4. point difference (points for minus "
    "against); 5. rating ordinal (mu - 3 sigma); 6. bot id, ascending (the only key that "
    "cannot tie). "
    "Ratings are OpenSkill (Plackett-Luce), one per bot (in a 4-player game the two seats "
    "of an entrant are one player), shown as mu, sigma and ordinal = mu - 3 sigma. They "
    "take the games one at a time in slot order (whichever table finished first), each a "
    "win of one entrant over the other, so the same results always give the same "
    "ratings; `GET /tournaments/{id}` shows each game's place in that order (`recorded`) "
    "and both entrants' ratings before and after it (`rating`), enough to recompute "
    "every rating here.",
    tags=("tournaments",),
    query=PageQuery,
    response=st.Standings,
    errors=(404,),
    path_params={"tournament_id": TOURNAMENT_ID},
    response_headers={**LINK, **ETAG},
    **CONDITIONAL,
)
def get_standings(tournament_id: str, query: dict[str, Any]) -> Response:
    table = tournaments().standings(tournament_id)
    table["items"], table["next_cursor"] = page_of(table["items"], query["limit"],
                                                   query.get("cursor"))
    return respond_page(sch(st.Standings), table)


EXPORT_DOC = (
    "One answer with the settings, the standings (as `/standings`), every game in slot order "
    "(as `GET /tournaments/{id}`, with its round and `record`, the path of its record) and "
    "the rating history per round. The duplicate-deal embargo holds as in "
    "`GET /tournaments/{id}`: while any table of a deal is live, its games show no seed and "
    "no result.")
CSV_DOC = (
    "One table of the export (`GET /tournaments/{tournament_id}/export`) as RFC 4180 CSV "
    "with a header row, chosen by `table`: `standings`, `games`, `ratings` or `bracket` "
    "(default `standings`); null is an empty cell, a per-team value two columns "
    "(`scores_0`, `scores_1`). Its own operation so that a generated client reads it as "
    "text. The embargo holds as in the JSON export.")


@bp.get("/tournaments/<tournament_id>/export")
@operation(
    summary="The whole tournament for archives: JSON",
    description=EXPORT_DOC + " CSV tables are `GET /tournaments/{tournament_id}/export.csv`; "
    "`?format=csv` here (kept for older clients) redirects there (307) with the same "
    "`table`, as does an Accept header that admits `application/json` but prefers "
    "`text/csv` (one that admits only `text/csv` is 406 here).",
    tags=("tournaments",),
    query=st.ExportQuery,
    response=st.TournamentExport,
    more={307: {"description": "`format=csv` (or an Accept header preferring text/csv): "
                "the same table at `/tournaments/{tournament_id}/export.csv`",
                "headers": {"Location": {"description": "the CSV export's path and query",
                                         "schema": {"type": "string"}},
                            **versions.DEPRECATION_HEADERS}}},
    errors=(404,),
    path_params={"tournament_id": TOURNAMENT_ID},
)
def export_tournament(tournament_id: str, query: dict[str, Any]) -> Response:
    fmt = query.get("format")
    if fmt is None and request.headers.get("Accept", "").strip():
        best = request.accept_mimetypes.best_match(["application/json", "text/csv"])
        fmt = "csv" if best == "text/csv" else "json"
    if fmt == "csv":
        table = query.get("table", "standings")
        resp = Response(status=307)
        resp.headers["Location"] = f"/tournaments/{tournament_id}/export.csv?table={table}"
        resp.headers.update(versions.deprecation(*versions.CSV_BY_FORMAT))
        return resp
    return respond(None, sch(st.TournamentExport).dump(tournaments().export(tournament_id)))


@bp.get("/tournaments/<tournament_id>/export.csv")
@operation(
    summary="One table of the tournament for spreadsheets: CSV",
    description=CSV_DOC,
    tags=("tournaments",),
    query=st.ExportCsvQuery,
    content_type="text/csv",
    response_headers={"Content-Disposition": {
        "description": "`attachment; filename=\"tournament-<id>-<table>.csv\"`",
        "schema": {"type": "string"}}},
    errors=(404,),
    path_params={"tournament_id": TOURNAMENT_ID},
)
def export_tournament_csv(tournament_id: str, query: dict[str, Any]) -> Response:
    data = sch(st.TournamentExport).dump(tournaments().export(tournament_id))
    table = query.get("table", "standings")
    resp = Response(csv_table(data, table), mimetype="text/csv")
    resp.headers["Content-Disposition"] = \
        f'attachment; filename="tournament-{tournament_id}-{table}.csv"'
    return resp


STOP_DOC = ("A repeat is answered with the tournament as it is (safe to retry); a finished "
            "or cancelled tournament is 409 `tournament-over`. Its organizer's bots (or the "
            "admin token) only: another owner's is 403 `not-organizer`.")


def organizer(summary: str, description: str, **differs: Any) -> dict[str, Any]:
    """The ``@operation`` keywords of a tournament's organizer operations (cancel, pause,
    resume, withdraw): each takes no body, answers the tournament and may be refused as
    403, 404 or 409, so a view states only its text and what ``differs`` (``auth``,
    more ``path_params``)."""
    return {"summary": summary, "description": description, "tags": ("tournaments",),
            "body": sc.Empty, "body_required": False, "response": st.Tournament,
            "auth": "organizer", "errors": (403, 404, 409),
            "path_params": {"tournament_id": TOURNAMENT_ID}, **differs}


@bp.post("/tournaments/<tournament_id>/start")
@operation(**organizer(
    summary="Start a registering tournament now (its organizer)",
    description="Before its `starts_at` (or when it has none): it starts with its entrants "
    "as they are (house bots filling up to the minimum where it asks); fewer than "
    "`min_entrants` is 409 `too-few-entrants`. Its entrants are told (`GET "
    "/bots/me/turns`, webhooks). " + STOP_DOC,
))
def start_tournament(tournament_id: str, caller: str, body: dict[str, Any]) -> Response:
    return respond(sch(st.Tournament), registration().start(tournament_id, caller))


@bp.post("/tournaments/<tournament_id>/cancel")
@operation(**organizer(
    summary="Cancel a tournament (its organizer): live games are voided, nothing more is "
    "scheduled",
    body=st.CancelIn,
    description="Every live game ends at once, voided: the game is `finished` with no "
    "winner (a move on it is refused), its slot `void` with no result, counted nowhere "
    "(standings, matchpoints, ratings, leaderboard). Games not yet started become `void`. "
    "Games that had finished keep their results and ratings. The status becomes "
    "`cancelled` with `reason` (yours, or a default); the seed, and every game of a "
    "duplicate deal, become public like a finished tournament's. A registering tournament "
    "is simply cancelled. Its entrants are told. " + STOP_DOC,
))
def cancel_tournament(tournament_id: str, caller: str, body: dict[str, Any]) -> Response:
    return respond(sch(st.Tournament),
                   registration().cancel(tournament_id, caller, body.get("reason")))


@bp.post("/tournaments/<tournament_id>/pause")
@operation(**organizer(
    summary="Pause a tournament (its organizer): no new game starts until it is resumed",
    description="Games already live play on to their end with their move clocks running; "
    "their results are recorded. No game starts while the status is `paused` (an arena's "
    "clock runs on). A registering tournament is 409 `not-started`. " + STOP_DOC,
))
def pause_tournament(tournament_id: str, caller: str, body: dict[str, Any]) -> Response:
    return respond(sch(st.Tournament), registration().pause(tournament_id, caller))


@bp.post("/tournaments/<tournament_id>/resume")
@operation(**organizer(
    summary="Resume a paused tournament (its organizer): games start again",
    description="Back to `running`: games start again, up to `parallel` at once. " + STOP_DOC,
))
def resume_tournament(tournament_id: str, caller: str, body: dict[str, Any]) -> Response:
    return respond(sch(st.Tournament), registration().resume(tournament_id, caller))


@bp.post("/tournaments/<tournament_id>/entrants/<entrant_id>/exclude")
@operation(**organizer(
    summary="Exclude an entrant (its organizer), with a reason shown to all",
    description="Before the start the bot is taken off the entrants and may not enter "
    "again (`excluded`, with the reason); after, it leaves the tournament as `excluded` "
    "(the reason as its `note`) and forfeits its live and unplayed games, as a "
    "disqualified entrant does. " + STOP_DOC,
    body=st.ExcludeIn, body_required=True,
    path_params={"tournament_id": TOURNAMENT_ID,
                 "entrant_id": {**BOT_ID, "description": "the entrant's bot id"}},
))
def exclude_entrant(tournament_id: str, entrant_id: str, caller: str,
                    body: dict[str, Any]) -> Response:
    return respond(sch(st.Tournament), registration().exclude(
        tournament_id, entrant_id, body["reason"], caller))


@bp.post("/tournaments/<tournament_id>/entrants/<entrant_id>/withdraw")
@operation(**organizer(
    summary="Withdraw your bot from a tournament (the entrant's own token)",
    description="Before the start (registering) the bot is simply no longer entered. "
    "After, the entrant leaves the tournament (`withdrawn`): each of its live games "
    "ends at once and is forfeited, and so is every game of it not yet played. A forfeited "
    "game is won by the opponent (won, lost, played and the match score count it), adds no "
    "points, hands, timeouts or matchpoints to anyone, and is a rated loss for the entrant "
    "that left (tournament and leaderboard; docs/ratings.md). Games it finished before keep "
    "their results. The same happens to an "
    "entrant under the no-show rule (`no_show`) or disqualified after `max_timeouts`. "
    "Only the entrant's own token may withdraw it (403 `forbidden-entrant`); a repeat "
    "answers the tournament as it is; a finished or cancelled tournament is 409 "
    "`tournament-over`.",
    auth="required",
    path_params={"tournament_id": TOURNAMENT_ID,
                 "entrant_id": {**BOT_ID, "description": "the entrant's bot id"}},
))
def withdraw_entrant(tournament_id: str, entrant_id: str, bot_id: str,
                     body: dict[str, Any]) -> Response:
    return respond(sch(st.Tournament),
                   registration().leave(tournament_id, entrant_id, bot_id))


@bp.get("/leaderboard")
@operation(
    summary="Ratings over every tournament game, best ordinal first",
    description="Paginated (`limit`, `cursor`): every rated bot, best first.",
    tags=("tournaments",),
    query=PageQuery,
    response=st.Leaderboard,
    response_headers={**LINK, **ETAG},
    **CONDITIONAL,
)
def leaderboard(query: dict[str, Any]) -> Response:
    board = tournaments().leaderboard()
    board["items"], board["next_cursor"] = page_of(board["items"], query["limit"],
                                                   query.get("cursor"))
    return respond_page(sch(st.Leaderboard), board)


