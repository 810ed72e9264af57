"""HTTP routes of the post-game analysis (``service.arena.analyses``, issue 25):
``GET /games/{id}/analysis`` asks for it (once) and answers it when it is there, and
``GET /bots/{id}/analysis`` a bot's averages over its analysed games. Declared with
``routes.operation`` like every other view; a blueprint of their own to keep
``routes.py`` small."""

from __future__ import annotations

import json

from flask import Blueprint, Response, current_app, request

from service.arena.analyses import DONE, FAILED, RUNNING, Analyses
from service.arena.problems import Problem
from service.arena.status import EMBARGOED, FINISHED
from service.http import analysis_schemas as a
from service.http.routes import BOT_ID, GAME_ID, arena, operation, respond, sch

bp = Blueprint("analysis", __name__)

ANALYSIS_DOC = (
    "The game's post-game analysis: every decision of every seat valued from that seat's "
    "information only, the chosen action's loss against the best, marks (inaccuracy, "
    "mistake, blunder), per-seat averages and each team's expected outcome through the game "
    "(docs/analysis.md). The first request for a finished game queues it; background "
    "workers compute it once (in any instance) and it is stored with the game for as long "
    "as the game is kept. Until it is ready the answer is 202 with the progress (`done` of "
    "`total` decisions), `Retry-After` and `Location` (this URL): ask again then; once "
    "ready, 200 with the analysis, the same for everyone, with an `ETag` "
    "(`If-None-Match` gets 304). Who may ask: the first request, the one that queues it, "
    "needs the token of a bot that played the game (403 `not-a-player` for anyone else: "
    "an analysis costs the service seconds of CPU, so strangers cannot queue every "
    "public game), unless the operator has every game of a tournament (`analyse`) or "
    "ladder analysed; once asked, anyone who may read the game's complete record (no "
    "token needed) reads its progress and result. The game must be over (409 "
    "`game-not-over` while it is live, since the analysis shows every hand), and a game "
    "of a duplicate deal only once every table of the deal has finished (403 "
    "`embargoed`, as the record's hands are). An analysis that failed is 503 with "
    "`Retry-After` (it is queued again then).")


def analyses() -> Analyses:
    return current_app.extensions["analyses"]


@bp.get("/games/<game_id>/analysis")
@operation(
    summary="The game's analysis: 202 with progress while it is computed, then 200",
    description=ANALYSIS_DOC,
    tags=("games",),
    response=a.Analysis,
    auth="optional",
    errors=(403, 404, 409),
    headers_in=({"name": "If-None-Match", "in": "header", "required": False,
                 "description": "an ETag of this analysis: 304 if it is still the one",
                 "schema": {"type": "string", "maxLength": 200}},),
    response_headers={"ETag": {"description": "the analysis's digest, quoted",
                               "schema": {"type": "string"}}},
    path_params={"game_id": GAME_ID},
    more={
        202: {"description": "Accepted: queued or being computed; ask again after "
              "`Retry-After` seconds at `Location`",
              "headers": {
                  "Retry-After": {"description": "seconds", "schema": {"type": "integer"}},
                  "Location": {"description": "this URL", "schema": {"type": "string"}}},
              "content": {"application/json": {"schema": a.AnalysisPending}}},
        304: {"description": "Not Modified: the analysis is the one your `If-None-Match` "
              "names"},
    },
)
def get_analysis(game_id: str, bot_id: str | None) -> Response:
    game = arena().get(game_id)  # 404
    if game.status != FINISHED:
        raise Problem("game-not-over", "a game is analysed once it is over: its analysis "
                      "values every decision with every hand known")
    if arena().embargoed(game):
        raise Problem("embargoed", EMBARGOED)
    store = analyses()
    found = store.state(game_id)
    if found is None and (bot_id is None or bot_id not in game.seats):
        raise Problem("not-a-player", "nobody has asked for this game's analysis: a bot "
                      "that played it may, with its token (or the operator has every game "
                      "of a tournament or ladder analysed); once it is asked for, anyone "
                      "may read it here")
    if found is None or found.get("status") != DONE:
        store.ask(game_id)
        found = store.state(game_id) or {"status": "queued"}
    status = found.get("status")
    href = f"/games/{game_id}/analysis"
    if status == DONE:
        etag = f'"{found.get("etag", "")}"'
        if etag in [t.strip() for t in request.headers.get("If-None-Match", "").split(",")]:
            resp = Response(status=304)
        else:
            body = {"game_id": game_id, **json.loads(found["result"])}
            resp = respond(sch(a.Analysis), body)
        resp.headers["ETag"] = etag
        resp.headers["Cache-Control"] = "no-cache"
        return resp
    if status == FAILED:
        wait = int(4 * store.lease_s)
        raise Problem("service-unavailable", f"the analysis failed ({found.get('error', '')}); "
                      f"it is queued again in {wait} s", headers={"Retry-After": str(wait)})
    wait = 2 if status == RUNNING else 5
    body = {"game_id": game_id, "status": RUNNING if status == RUNNING else "queued",
            "done": int(found.get("done") or 0), "total": int(found.get("total") or 0),
            "retry_after": wait, "href": href}
    resp = respond(sch(a.AnalysisPending), body, 202,
                   {"Retry-After": str(wait), "Location": href})
    resp.headers["Cache-Control"] = "no-store"
    return resp


@bp.get("/bots/<bot_id>/analysis")
@operation(
    summary="A bot's average loss per decision over its analysed games, by decision kind",
    description="Kept per bot as its games' analyses finish (each game counted once; a bot "
    "holding two seats counts both). Games are analysed when someone asks for them "
    "(`GET /games/{id}/analysis`) or, where the operator turned it on, every tournament "
    "(`analyse`) or ladder game.",
    tags=("bots",),
    response=a.BotAnalysis,
    errors=(404,),
    path_params={"bot_id": BOT_ID},
)
def get_bot_analysis(bot_id: str) -> Response:
    arena().bot(bot_id)  # 404
    return respond(sch(a.BotAnalysis), {"bot_id": bot_id, **analyses().bot_averages(bot_id)})
