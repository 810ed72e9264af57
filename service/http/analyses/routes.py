"""HTTP routes of the post-game analysis (``service.arena.analyses``): ``GET
/games/{id}/analysis`` answers it (and queues it for a player), ``POST`` asks for it on
purpose (the pages' "Review this game"), and ``GET /bots/{id}/analysis`` a bot's averages
over its analysed games."""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections import OrderedDict

from flask import Blueprint, Response, current_app, request

from service.addresses import client_of, network_of
from service.arena.analyses.fair import AUTO, PLAYER
from service.arena.analyses.queue import DONE, FAILED, RUNNING, Analyses
from service.arena.core.problems import Problem
from service.arena.core.status import EMBARGOED, FINISHED
from service.http import limits, quotas
from service.http.analyses import schemas as a
from service.http.api import BOT_ID, GAME_ID, arena, operation, respond, sch
from service.storage.store import Game

bp = Blueprint("analyses", __name__)

ANALYSIS_DOC = (
    "The game's post-game analysis: every decision of every seat valued from that seat's "
    "information only, the chosen action's loss against the best, marks (inaccuracy, "
    "mistake, blunder), per-seat averages and each team's expected outcome through the game "
    "(docs/analysis.md). The first request that may queue a finished game queues it; "
    "background workers compute it once (in any instance) and it is stored with the game "
    "for as long as the game is kept. Until it is ready the answer is 202 with the progress "
    "(`done` of `total` decisions), `Retry-After` and `Location` (the `GET` URL): ask again "
    "then; once ready, 200 with the analysis, the same for everyone, with an `ETag` "
    "(`If-None-Match` gets 304). The game must be over (409 `game-not-over` while it is "
    "live, since the analysis shows every hand), and a game of a duplicate deal only once "
    "every table of the deal has finished (403 `embargoed`, as the record's hands are). An "
    "analysis that failed is 503 with `Retry-After` (it is queued again then). Fair to "
    "everyone: at most `ARENA_ANALYSIS_QUEUED_PER_OWNER` (4) of your owner's games and "
    "`ARENA_ANALYSIS_QUEUED_PER_NETWORK` (12) of your network's wait or are computed at "
    "once (then 429 with `Retry-After`); each asker is served in turn, a player's own "
    "request before the others. Sent gzip-compressed to a client that accepts it "
    "(`Accept-Encoding: gzip`; the `ETag` then ends in `-gz`), and one client may "
    "download at most `ARENA_ANALYSIS_DOWNLOAD_BYTES` (8 MiB) of analyses a minute "
    "(then 429 with `Retry-After`; a 304 costs nothing).")
GET_DOC = (
    "Who queues it with `GET`: a bot that played the game, with its token (403 "
    "`not-a-player` for anyone else, so that opening a replay queues nothing: `POST` asks "
    "on purpose), or the operator's setting (every game of a tournament created with "
    "`analyse`, or of a ladder); once asked, anyone who may read the game's complete "
    "record (no token needed) reads its progress and result. ")

# Analyses this process has answered, ready to send (the JSON, and gzipped), by ETag: a
# big analysis costs tens of milliseconds to decode, dump and compress, and is the same
# for every reader, so a process does it once. At most ``CACHE_BYTES`` kept, the least
# recently sent dropped first.
CACHE_BYTES = 32 * 1024 * 1024
GZIP_LEVEL = 6
DOWNLOAD_WINDOW_S = 60
_cache: OrderedDict[str, tuple[bytes, bytes]] = OrderedDict()
_cache_size = [0]
_cache_lock = threading.Lock()


def _cached(etag: str) -> tuple[bytes, bytes] | None:
    with _cache_lock:
        hit = _cache.get(etag)
        if hit is not None:
            _cache.move_to_end(etag)
        return hit


def _keep(etag: str, plain: bytes, packed: bytes) -> None:
    with _cache_lock:
        if etag in _cache:
            return
        _cache[etag] = (plain, packed)
        _cache_size[0] += len(plain) + len(packed)
        while _cache_size[0] > CACHE_BYTES and len(_cache) > 1:
            _, (p, z) = _cache.popitem(last=False)
            _cache_size[0] -= len(p) + len(z)


def _accepts_gzip() -> bool:
    """``Accept-Encoding`` names gzip (or ``*``) with a q above 0."""
    for part in request.headers.get("Accept-Encoding", "").split(","):
        name, _, params = part.strip().partition(";")
        if name.strip().lower() not in ("gzip", "*"):
            continue
        q = params.strip().lower()
        if q.startswith("q="):
            try:
                if float(q[2:]) <= 0:
                    continue
            except ValueError:
                continue
        return True
    return False


def _charge_download(size: int) -> None:
    """Count ``size`` bytes against this client's minute (``ARENA_ANALYSIS_DOWNLOAD_BYTES``,
    a counter per client and window): 429 with Retry-After once it is spent."""
    cap = int(current_app.config["ARENA_ANALYSIS_DOWNLOAD_BYTES"])
    if not cap:
        return
    store = arena().store
    slot = int(time.time()) // DOWNLOAD_WINDOW_S
    key = store.keys.rate("dl:" + limits.client_key(), slot)
    pipe = store.r.pipeline(transaction=False)
    pipe.get(key)
    pipe.pttl(key)
    spent, ttl = pipe.execute()
    if spent is not None and int(spent) >= cap:
        limits.reject(f"more than {cap} bytes of analyses downloaded by this client in "
                      f"{DOWNLOAD_WINDOW_S} s (ARENA_ANALYSIS_DOWNLOAD_BYTES)",
                      limits.reset_ms(int(ttl) if ttl and ttl > 0 else 1000,
                                      DOWNLOAD_WINDOW_S))
    pipe = store.r.pipeline(transaction=False)
    pipe.incrby(key, size)
    pipe.expire(key, DOWNLOAD_WINDOW_S + 1, nx=True)
    pipe.execute()


def _done(game_id: str, found: dict[str, str]) -> Response:
    """The finished analysis: 304 for an ETag the client has, else the body (from this
    process's cache), gzipped for a client that accepts it."""
    store = analyses()
    etag = found.get("etag", "")
    packed = _accepts_gzip()
    tag = f'"{etag}-gz"' if packed else f'"{etag}"'
    asked = [t.strip() for t in request.headers.get("If-None-Match", "").split(",")]
    if f'"{etag}"' in asked or f'"{etag}-gz"' in asked:
        resp = Response(status=304)
    else:
        bodies = _cached(etag)
        if bodies is None:
            raw = store.result(game_id)
            if raw is None:  # gone meanwhile (the game expired): as if never asked
                raise Problem("not-found", "no such game")
            plain = respond(sch(a.Analysis), {"game_id": game_id, **json.loads(raw)}
                            ).get_data()
            bodies = (plain, gzip.compress(plain, GZIP_LEVEL, mtime=0))
            _keep(etag, *bodies)
        data = bodies[1] if packed else bodies[0]
        _charge_download(len(data))
        resp = Response(data, mimetype="application/json")
        if packed:
            resp.headers["Content-Encoding"] = "gzip"
    resp.headers["ETag"] = tag
    resp.headers["Cache-Control"] = "no-cache"
    resp.vary.add("Accept-Encoding")
    return resp


def analyses() -> Analyses:
    return current_app.extensions["analyses"]


@bp.get("/games/<game_id>/analysis")
@operation(
    summary="The game's analysis: 202 with progress while it is computed, then 200",
    description=GET_DOC + ANALYSIS_DOC,
    tags=("games",),
    response=a.Analysis,
    auth="optional",
    errors=(403, 404, 409, 429),
    headers_in=({"name": "If-None-Match", "in": "header", "required": False,
                 "description": "an ETag of this analysis: 304 if it is still the one "
                 "(either encoding's)",
                 "schema": {"type": "string", "maxLength": 200}},
                {"name": "Accept-Encoding", "in": "header", "required": False,
                 "description": "`gzip`: the analysis is sent gzip-compressed "
                 "(`Content-Encoding: gzip`), a tenth of its size",
                 "schema": {"type": "string", "maxLength": 200}}),
    response_headers={"ETag": {"description": "the analysis's digest, quoted (ending in "
                               "`-gz` when gzipped)", "schema": {"type": "string"}},
                      "Content-Encoding": {"description": "`gzip` when the client "
                                           "accepts it", "schema": {"type": "string",
                                                                    "enum": ["gzip"]}}},
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
    game = _analysable(game_id)
    found = analyses().brief(game_id)
    player = bot_id is not None and bot_id in game.seats
    if found is None and not player:
        raise Problem("not-a-player", "nobody has asked for this game's analysis: a bot "
                      "that played it may, with its token, or anyone with POST (or the "
                      "operator has every game of a tournament or ladder analysed); once "
                      "it is asked for, anyone may read it here")
    return _answer(game_id, found, bot_id if player else None)


ASK_DOC = (
    "Ask for the game's analysis (the pages' \"Review this game\" button): the answer is "
    "`GET`'s, 202 with the progress until it is ready, then 200. Who may ask: a bot that "
    "played the game (its token), free; anyone else, with a token or none, for a game "
    "whose complete record is open to all (over, and not embargoed), at most "
    "`ARENA_ANALYSIS_ASKS` new analyses per client address an hour (default 20; 0: no "
    "limit), past which 429 with `Retry-After`: an analysis costs the service seconds of "
    "CPU, so a stranger queues a handful, not every public game. Asking again for a game "
    "queued, being computed or done counts nothing and queues nothing.")


@bp.post("/games/<game_id>/analysis")
@operation(
    summary="Ask for the game's analysis: 202 with progress while it is computed, then 200",
    description=ASK_DOC + " " + ANALYSIS_DOC,
    tags=("games",),
    response=a.Analysis,
    auth="optional",
    errors=(403, 404, 409, 429),
    path_params={"game_id": GAME_ID},
    more={
        202: {"description": "Accepted: queued or being computed; ask again after "
              "`Retry-After` seconds at `Location` (`GET`)",
              "headers": {
                  "Retry-After": {"description": "seconds", "schema": {"type": "integer"}},
                  "Location": {"description": "the analysis's URL",
                               "schema": {"type": "string"}}},
              "content": {"application/json": {"schema": a.AnalysisPending}}},
    },
)
def ask_analysis(game_id: str, bot_id: str | None) -> Response:
    game = _analysable(game_id)
    found = analyses().brief(game_id)
    player = bot_id is not None and bot_id in game.seats
    if found is None and not player:
        # a stranger's ask: counted per client address, and given back if nothing new
        # was queued after all (another request queued it first)
        who = "analyses:a" + client_of(limits.client_address())
        keys = quotas.take("analyses", ("ARENA_ANALYSIS_ASKS", who))  # 429 past the count
        try:
            queued = _queue(game_id, None)
        except BaseException:
            quotas.give_back(keys)
            raise
        if not queued:
            quotas.give_back(keys)
        found = analyses().brief(game_id)
    return _answer(game_id, found, bot_id if player else None)


def _analysable(game_id: str) -> Game:
    """The game, if it can be analysed now: over (409), and not a duplicate deal still
    played at another table (403 ``embargoed``)."""
    game = arena().get(game_id)  # 404
    if game.status != FINISHED:
        raise Problem("game-not-over", "a game is analysed once it is over: its analysis "
                      "values every decision with every hand known")
    if arena().embargoed(game):
        raise Problem("embargoed", EMBARGOED)
    return game


def _queue(game_id: str, player: str | None) -> bool:
    """Queue the game for its requester on the requester's caps (``fair``): a player's
    owner in the players' lane, else the client's network; True if it was queued now."""
    network = network_of(limits.counted_address())
    who = f"o:{arena().owners.owner_of(player)}" if player else f"n:{network}"
    return analyses().ask(game_id, who, network, PLAYER if player else AUTO, capped=True)


def _answer(game_id: str, found: dict[str, str] | None, player: str | None) -> Response:
    """200 with the analysis (304 for its ETag, gzipped when accepted), 202 with the
    progress, or 503 when it failed; queues it (again) when it is not done and its entry
    seems lost."""
    store = analyses()
    if found is None or found.get("status") != DONE:
        _queue(game_id, player)
        found = store.brief(game_id) or {"status": "queued"}
    status = found.get("status")
    href = f"/games/{game_id}/analysis"
    if status == DONE:
        return _done(game_id, found)
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
