"""HTTP routes of the ladder (``service.arena.ladder``): join, leave, queue state,
standings and history."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app

from service.arena.ladder.ladders import Ladders
from service.http.api import BOT_ID, operation, respond, sch
from service.http.ladder import schemas as sl
from service.http.lists import (
    CONDITIONAL,
    ETAG,
    LINK,
    PageQuery,
    conditional,
    page_of,
    respond_page,
)

bp = Blueprint("ladder", __name__)

LADDER = {"schema": {"type": "string", "pattern": sl.LADDER_NAME_RE},
          "description": "the ladder's name: `2p`, `4p`, or one the operator declared"}
RULE = (
    "Matching: waiting bots are taken longest-waiting first; each is matched with the "
    "waiting bot whose rating ordinal (mu - 3 sigma) is nearest its own, within a window "
    "of 5 ordinal points that widens by 1 point per second the longer-waiting of the two "
    "has waited. Never against itself or a bot of its own owner (`owner`); not against "
    "its last ladder opponent while anyone "
    "else is in reach (a rematch needs both to have waited a few seconds). Team 0 is drawn "
    "at random. In a 4-player ladder each bot holds both seats of its team.")


def ladders() -> Ladders:
    return current_app.extensions["ladders"]


@bp.get("/ladders")
@operation(summary="The ladders: table size, rules, who waits and plays",
           tags=("ladders",), query=PageQuery, response=sl.LadderList,
           response_headers={**LINK, **ETAG}, **CONDITIONAL)
def list_ladders(query: dict[str, Any]) -> Response:
    listing = ladders().list()
    listing["items"], listing["next_cursor"] = page_of(listing["items"], query["limit"],
                                                       query.get("cursor"))
    return respond_page(sch(sl.LadderList), listing)


@bp.get("/ladders/<name>")
@operation(summary="A ladder and its queue", description=RULE, tags=("ladders",),
           response=sl.LadderDetail, errors=(404,), path_params={"name": LADDER},
           response_headers=ETAG, **CONDITIONAL)
def get_ladder(name: str) -> Response:
    return conditional(respond(sch(sl.LadderDetail), ladders().detail(name)))


@bp.post("/ladders/<name>/entry")
@operation(
    summary="Join the ladder: play rated games until you leave (or for `games` games)",
    description="Idempotent: joining again sets the game count anew and resumes a paused "
    "bot. The service seats you in ordinary games with a move limit (find them with "
    "`GET /bots/me/turns`, or `game_id` here); ratings are OpenSkill as in tournaments, "
    "updated once per finished game. Timeouts in one game reaching the ladder's limit "
    "(3 by default) pause you, with the reason in `reason`. A first entry plays a "
    "validation game against the house first, one of the house games your owner may have "
    "an hour (`ARENA_HOUSE_GAMES_PER_CHALLENGER`; past them, 429 and nothing changes). "
    + RULE,
    tags=("ladders",), body=sl.LadderJoin, body_required=False, response=sl.LadderEntry,
    auth="required", errors=(404,), path_params={"name": LADDER},
    example={"games": 10},
)
def join_ladder(name: str, bot_id: str, body: dict[str, Any]) -> Response:
    return respond(sch(sl.LadderEntry), ladders().join(name, bot_id, body.get("games")))


@bp.get("/ladders/<name>/entry")
@operation(summary="Your queue state on the ladder", tags=("ladders",),
           response=sl.LadderEntry, auth="required", errors=(404,),
           path_params={"name": LADDER})
def get_entry(name: str, bot_id: str) -> Response:
    return respond(sch(sl.LadderEntry), ladders().entry(name, bot_id))


@bp.delete("/ladders/<name>/entry")
@operation(summary="Leave the ladder (a game you are in is played out and rated)",
           tags=("ladders",), response=sl.LadderEntry, auth="required", errors=(404,),
           path_params={"name": LADDER})
def leave_ladder(name: str, bot_id: str) -> Response:
    return respond(sch(sl.LadderEntry), ladders().leave(name, bot_id))


@bp.get("/ladders/<name>/standings")
@operation(
    summary="The ladder's ratings, best ordinal first, paginated",
    description="OpenSkill (Plackett-Luce) as in tournaments: mu, sigma, ordinal = mu - 3 "
    "sigma; one update per finished ladder game, a win of one bot over the other.",
    tags=("ladders",), query=sl.LadderPageQuery, response=sl.LadderStandings, errors=(404,),
    path_params={"name": LADDER}, response_headers={**LINK, **ETAG}, **CONDITIONAL,
)
def ladder_standings(name: str, query: dict[str, Any]) -> Response:
    return respond_page(sch(sl.LadderStandings),
                   ladders().standings(name, query["limit"], query.get("cursor")))


@bp.get("/ladders/<name>/bots/<bot_id>/history")
@operation(
    summary="A bot's ladder games, newest first, with its rating before and after each",
    tags=("ladders",), query=sl.LadderPageQuery, response=sl.LadderHistory, errors=(404,),
    path_params={"name": LADDER, "bot_id": BOT_ID},
    response_headers={**LINK, **ETAG}, **CONDITIONAL,
)
def ladder_history(name: str, bot_id: str, query: dict[str, Any]) -> Response:
    return respond_page(sch(sl.LadderHistory),
                   ladders().history(name, bot_id, query["limit"], query.get("cursor")))
