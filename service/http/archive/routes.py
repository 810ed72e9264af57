"""HTTP routes of a bot's own things: every finished game of a bot (pages, or one NDJSON
stream of full records), and ``GET /owners/me``."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, request

from service.arena.archive.games import BotGames, Filters
from service.arena.archive.owned import OwnedBots
from service.http.api import BOT_ID, arena, operation, respond, sch
from service.http.archive import schemas as sa
from service.http.lists import CONDITIONAL, ETAG, LINK, respond_page
from service.http.schemas.common import Empty

bp = Blueprint("archive", __name__)

NDJSON = "application/x-ndjson"
BOT_GAMES_DOC = (
    "Every finished game the bot played (a game cancelled before it started is none), "
    "newest first by the time it ended, with filters: `since`/`until` (when it ended, "
    "unix seconds), `rated`, `tournament`, `ladder`, `opponent` (a bot on the other team), "
    "`players` (table size). Anyone may read it: a finished game is public.\n\n"
    "As pages (`application/json`, the default): `items` and `next_cursor`, and a `Link` "
    "header to the next page. With `Accept: application/x-ndjson`: every matching game in "
    "one answer, one JSON object a line, each with its full `record` (as `GET "
    "/games/{id}/record`; `records=false` leaves it out), streamed as it is read: the "
    "service holds one batch of games at a time, whatever the count.\n\n"
    "A game of a duplicate deal still being played at another table is listed with "
    "`embargoed: true` and no scores, winner or record, until the embargo lifts.")


def bot_games() -> BotGames:
    found = current_app.extensions.get("bot_games")
    if found is None:
        found = current_app.extensions["bot_games"] = BotGames(arena())
    return found


def _filters(query: dict[str, Any]) -> Filters:
    return Filters(since=query.get("since"), until=query.get("until"),
                   rated=query.get("rated"), tournament=query.get("tournament"),
                   ladder=query.get("ladder"), opponent=query.get("opponent"),
                   players=query.get("players"))


def _chunks(lines: Any, size: int = 64 * 1024) -> Any:
    """Lines gathered into writes of about ``size`` bytes (one per line would be a
    system call per game)."""
    buf: list[bytes] = []
    n = 0
    for line in lines:
        buf.append(line)
        n += len(line)
        if n >= size:
            yield b"".join(buf)
            buf, n = [], 0
    if buf:
        yield b"".join(buf)


@bp.get("/bots/<bot_id>/games")
@operation(
    summary="A bot's finished games, newest first: pages or an NDJSON export",
    description=BOT_GAMES_DOC,
    tags=("bots",),
    query=sa.BotGamesQuery,
    response=sa.BotGameList,
    also={NDJSON: "one `BotGameLine` (a `BotGame` with its `record`) per line"},
    errors=(404,),
    path_params={"bot_id": BOT_ID},
    response_headers={**LINK, **ETAG},
    **CONDITIONAL,
)
def list_bot_games(bot_id: str, query: dict[str, Any]) -> Response:
    filters = _filters(query)
    if request.accept_mimetypes.best_match(["application/json", NDJSON]) == NDJSON and \
            request.accept_mimetypes[NDJSON] > request.accept_mimetypes["application/json"]:
        body = _chunks(bot_games().stream(bot_id, filters, query["records"]))
        resp = Response(body, mimetype=NDJSON)
        resp.headers["X-Accel-Buffering"] = "no"
        return resp
    page = bot_games().page(bot_id, filters, query["limit"], query.get("cursor"))
    return respond_page(sch(sa.BotGameList), page)



# --- an owner's bots -----------------------------------------------------------------------

TARGET = {**BOT_ID, "description": "the bot: yours or another bot of your owner"}
OWNED_DOC = ("Any bot of an owner acts for the owner: its token may do this to any bot of "
             "the same owner, itself included. Another owner's bot is a 404.")


def owned() -> OwnedBots:
    found = current_app.extensions.get("owned_bots")
    if found is None:
        found = current_app.extensions["owned_bots"] = OwnedBots(arena())
    return found


@bp.post("/bots/<target>/token")
@operation(
    summary="Rotate a bot's token: a new one, shown once; the old one refused",
    description=sa.TOKEN_DOC + ". " + OWNED_DOC,
    tags=("bots",), body=Empty, body_required=False, response=sa.TokenRotated,
    auth="required", errors=(403, 404), path_params={"target": TARGET},
)
def rotate_token(target: str, bot_id: str, body: dict[str, Any]) -> Response:
    return respond(sch(sa.TokenRotated), owned().rotate(bot_id, target))


@bp.post("/bots/me/token")
@operation(
    summary="Rotate your own token: a new one, shown once; the old one refused",
    description=sa.TOKEN_DOC + ".",
    tags=("bots",), body=Empty, body_required=False, response=sa.TokenRotated,
    auth="required", errors=(403,),
)
def rotate_my_token(bot_id: str, body: dict[str, Any]) -> Response:
    return respond(sch(sa.TokenRotated), owned().rotate(bot_id, bot_id))


@bp.delete("/bots/me/token")
@operation(
    summary="Revoke your own token: your bot has none until one is rotated in",
    description="The token is refused from now on (within `old_token_grace` seconds on "
    "every process). Give the bot a new one with `POST /bots/{id}/token` from another "
    "bot of its owner.",
    tags=("bots",), response=sa.TokenRotated, auth="required",
)
def revoke_my_token(bot_id: str) -> Response:
    return respond(sch(sa.TokenRotated), owned().revoke(bot_id, bot_id))


@bp.delete("/bots/<target>/token")
@operation(
    summary="Revoke a bot's token: the bot has none until one is rotated in",
    description="The token is refused from now on (within `old_token_grace` seconds on "
    "every process). Give the bot a new one with `POST /bots/{id}/token` from another "
    "bot of its owner. " + OWNED_DOC,
    tags=("bots",), response=sa.TokenRotated, auth="required", errors=(403, 404),
    path_params={"target": TARGET},
)
def revoke_token(target: str, bot_id: str) -> Response:
    return respond(sch(sa.TokenRotated), owned().revoke(bot_id, target))


@bp.post("/bots/<target>/retirement")
@operation(
    summary="Retire a bot: it plays no more; its games, ratings and name are kept",
    description="For good: the bot is refused every game, join, invitation, ladder and "
    "tournament from now on (403 `suspended`, reason `retired by its owner`), and is "
    "withdrawn from its open tournaments and ladders as a suspended bot is. Its finished "
    "games, ratings and name stay. A repeat answers the bot as it is. " + OWNED_DOC,
    tags=("bots",), body=Empty, body_required=False, response=sa.OwnedBot,
    auth="required", errors=(403, 404), path_params={"target": TARGET},
)
def retire_bot(target: str, bot_id: str, body: dict[str, Any]) -> Response:
    return respond(sch(sa.OwnedBot), owned().retire(bot_id, target))


@bp.get("/owners/me")
@operation(
    summary="Your owner: every bot of it, with its ratings and live games",
    description="The owner of the bot behind the token: each bot (retired and suspended "
    "ones too) with its leaderboard and ladder ratings and the waiting and active games "
    "it sits in.",
    tags=("bots",), response=sa.OwnerMe, auth="required",
)
def owner_me(bot_id: str) -> Response:
    return respond(sch(sa.OwnerMe), owned().owner(bot_id))
