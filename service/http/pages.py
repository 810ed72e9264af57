"""The web front end: pages for people, served by the same app as the JSON API.

Pages are small HTML shells (``templates/web/``) around plain JavaScript modules and CSS
(``static/``, served by Flask's own ``/static`` route). No build step, no CDN. The
scripts use only the public API, exactly as a bot does: views, the event stream and
records. So a page can never show a card its viewer may not see: the server redacts.

URLs:

* ``/`` — the lobby: live and finished games, tournaments, the leaderboard.
* ``/games/{id}`` — the table, when a browser asks for HTML (``Accept: text/html``);
  every other client (``Accept: application/json``, ``*/*`` or none) gets the JSON view,
  unchanged. ``/tournaments/{id}`` works the same way, and so does ``/bots/{id}`` (its
  ladder ratings over time, ``static/js/bot.js``), ``/ladders`` and ``/ladders/{name}``
  (every ladder; one ladder's queue and standings, ``static/js/ladder.js``).
* ``/games/{id}/replay`` — step through a finished game from its record, and its review
  (the analysis beside the board).
* ``/games/{id}/play`` — play a seat with that seat's bot token.
* ``/docs`` — the API for people to read (``service.http.apidoc``); swagger-ui, to try
  requests, at ``/docs/try/``.
"""

from __future__ import annotations

import os
import re

from flask import Blueprint, Response, current_app, render_template, request

from service.http import apidoc
from service.http.openapi_spec import spec_yaml

bp = Blueprint("web", __name__, template_folder="templates")

_ID = r"[A-Za-z0-9_-]{1,64}"
# Paths where the JSON API and a page share a URL: the page wins only for browsers.
_NEGOTIATED = re.compile(rf"^/(games|tournaments|bots|ladders)/({_ID})/?$|^/(ladders)/?$")


def wants_html() -> bool:
    """True when the client prefers HTML to JSON and names text/html itself.

    Browsers navigating send ``text/html,...,*/*;q=0.8``; API clients send
    ``application/json``, ``*/*`` or nothing, and keep getting JSON.
    """
    accept = request.accept_mimetypes
    if "text/html" not in {value for value, _ in accept}:
        return False
    return accept.best_match(["application/json", "text/html"]) == "text/html"


def page(template: str, **context: str) -> Response:
    return html_response(render_template(template, **context))


def html_response(text: str) -> Response:
    """A page's answer: HTML with the pages' own policy (scripts and styles of this
    service only), never cached without asking."""
    resp = Response(text, mimetype="text/html")
    resp.headers["Cache-Control"] = "no-cache"
    resp.headers["Vary"] = "Accept"
    resp.headers["Content-Security-Policy"] = (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
    resp.headers["X-Content-Type-Options"] = "nosniff"
    return resp


@bp.before_app_request
def _negotiate() -> Response | None:
    """Serve the page for ``GET /games/{id}``, ``/tournaments/{id}``, ``/bots/{id}``,
    ``/ladders`` and ``/ladders/{name}`` to browsers."""
    if request.method not in ("GET", "HEAD"):
        return None
    match = _NEGOTIATED.match(request.path)
    if match is None or not wants_html():
        return None
    kind, ident, every = match.groups()
    if every or kind == "ladders":  # every ladder, or one: its queue and standings
        return page("web/ladder.html", ladder=ident or "", title="Ladders" if every
                    else f"Ladder {ident}")
    if kind == "bots":  # its ladder ratings over time; /bots/me stays the API's
        if ident == "me":
            return None
        return page("web/bot.html", bot_id=ident, title="Bot")
    if kind == "games":
        return page("web/table.html", mode="watch", game_id=ident, title="Table")
    return page("web/tournament.html", tournament_id=ident, title="Tournament")


@bp.after_app_request
def _vary_accept(resp: Response) -> Response:
    """Caches must key the negotiated URLs' answers on Accept as well."""
    if _NEGOTIATED.match(request.path) and "Accept" not in resp.vary:
        resp.vary.add("Accept")
    return resp


def lobby_idle_after() -> int:
    """Seconds without a move after which a live game leaves the lobby's "Live games"
    (``ARENA_LOBBY_IDLE_S``, default 600): an abandoned game with no move limit would
    otherwise sit there for ever. Games with a move limit keep moving by themselves."""
    try:
        return max(1, int(os.environ.get("ARENA_LOBBY_IDLE_S", "600")))
    except ValueError:
        return 600


@bp.get("/")
def lobby() -> Response:
    return page("web/lobby.html", title="Lobby", idle_after=str(lobby_idle_after()))


@bp.get("/games/<game_id>/replay")
def replay(game_id: str) -> Response:
    return page("web/table.html", mode="replay", game_id=game_id, title="Replay")


@bp.get("/games/<game_id>/play")
def play(game_id: str) -> Response:
    return page("web/table.html", mode="play", game_id=game_id, title="Play")


@bp.get("/docs")
@bp.get("/docs/")
def api_page() -> Response:
    """The API to read: every operation, webhook and schema of ``openapi.yaml``, rendered
    once per process (the spec is the code's, so it changes only with a deploy)."""
    cache = current_app.extensions
    if "api_page" not in cache:
        text = cache.get("openapi_yaml") or spec_yaml(current_app)
        cache["openapi_yaml"] = text
        cache["api_page"] = render_template("web/api.html", title="API",
                                            doc=apidoc.document(text))
    return html_response(cache["api_page"])
