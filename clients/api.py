"""A client for the All Fours Arena HTTP API (``openapi.yaml``), on one ``requests.Session``.

    from clients.api import ArenaClient
    arena = ArenaClient("http://127.0.0.1:8000")
    me = arena.register("my-bot")               # BotCreated; the client now uses its token
    game = arena.create_game(players=2, seats=[me.id, other_id])
    answer = arena.wait_turn(game.id)           # long-poll: TurnAnswer(timed_out, view)
    view = arena.act(game.id, answer.view.legal_actions[0], version=answer.view.version)

Every endpoint is one row of ``ENDPOINTS`` (named by the contract's ``operationId``) and
one method here. Answers become dataclasses as soon as their JSON arrives; a ``View``
keeps the service's dict in ``.raw``, which is what strategies take.

Errors: every failure is an ``ArenaError``. An answer from the service carries its
problem+json body (``type``, ``title``, ``status``, ``detail``, ``rule``...); a request
that never got an answer, after all retries, is an ``ArenaError`` of type
``/problems/network`` with status 0 (the ``requests`` exception is its ``__cause__``).

Pacing: the service announces each bot's request budget in the IETF ``RateLimit``
fields (``RateLimit: "default";r=<left>;t=<seconds to reset>``). The client keeps count
from them (one request less for every request it sends, the service's word whenever an
answer carries it) and, when nothing is left, sleeps until the window resets instead of
sending a request that would get a 429 (``budget`` says where it stands).

Retries, and why they are safe:
- 429 and 502/503/504 are retried after ``Retry-After`` (or an exponential backoff with
  jitter), and a 429 also holds back every later call until then (``rate_limited``
  counts the 429s this client got);
- a connection error or timeout is retried only where repeating the request cannot do
  anything twice: reads, joining a seat (joining twice is a no-op), and actions, which
  always carry an ``Idempotency-Key`` that is **the same on every retry of that action**,
  so the service applies it once and answers the retry as a replay. Registering a bot and
  creating a game have no idempotency key, so they are retried only when the connection
  was refused or timed out while connecting (the request never left);
- no other 4xx is ever retried.
"""

from __future__ import annotations

import json as jsonlib
import logging
import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import requests
from requests.adapters import HTTPAdapter

log = logging.getLogger(__name__)

JSON = dict[str, Any]
NETWORK_PROBLEM = "/problems/network"


# --- the endpoint table ---------------------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    """One operation of ``openapi.yaml``. ``safe``: a repeat after a lost answer does no harm
    (GETs, joining, actions with their Idempotency-Key)."""

    method: str
    path: str
    safe: bool = True


ENDPOINTS: dict[str, Endpoint] = {
    "registerBot": Endpoint("POST", "/bots", safe=False),
    "getMe": Endpoint("GET", "/bots/me"),
    "listMyTurns": Endpoint("GET", "/bots/me/turns"),
    "listMyInvitations": Endpoint("GET", "/bots/me/invitations"),
    # answering again is a 404 (the invitation is gone): not repeated blindly
    "acceptInvitation": Endpoint("POST", "/invitations/{invitation_id}/accept",
                                                  safe=False),
    "declineInvitation": Endpoint(
        "POST", "/invitations/{invitation_id}/decline", safe=False),
    "getPolicy": Endpoint("GET", "/bots/me/policy"),
    "setPolicy": Endpoint("PUT", "/bots/me/policy"),
    "createOwnerInvitation": Endpoint("POST", "/owner-invitations", safe=False),
    # suspending or lifting again answers as it is now: safe to repeat
    "suspendBot": Endpoint("POST", "/admin/bots/{bot_id}/suspension"),
    "liftBotSuspension": Endpoint("DELETE", "/admin/bots/{bot_id}/suspension"),
    "suspendOwner": Endpoint("POST",
                                                 "/admin/owners/{owner_id}/suspension"),
    "liftOwnerSuspension": Endpoint("DELETE",
                                                   "/admin/owners/{owner_id}/suspension"),
    "listSuspensions": Endpoint("GET", "/admin/suspensions"),
    "getBot": Endpoint("GET", "/bots/{bot_id}"),
    "getBotAnalysis": Endpoint("GET", "/bots/{bot_id}/analysis"),
    # webhook bots: a retried PUT answers with the newest secret, the one that counts
    "setCallback": Endpoint("PUT", "/bots/me/callback"),
    "getCallback": Endpoint("GET", "/bots/me/callback"),
    "deleteCallback": Endpoint("DELETE", "/bots/me/callback", safe=False),
    "listDeliveries": Endpoint("GET", "/bots/me/callback/deliveries"),
    # asking again is harmless: a verified URL stays as it is, a pending one is sent one more
    "verifyCallback": Endpoint("POST", "/bots/me/callback/verify"),
    "createGame": Endpoint("POST", "/games", safe=False),
    "listGames": Endpoint("GET", "/games"),
    "getGame": Endpoint("GET", "/games/{game_id}"),
    "joinSeat": Endpoint("POST", "/games/{game_id}/seats/{seat}"),
    "act": Endpoint("POST", "/games/{game_id}/actions"),
    "waitForTurn": Endpoint("GET", "/games/{game_id}/turn"),
    "streamGameEvents": Endpoint("GET", "/games/{game_id}/events"),
    "getRecord": Endpoint("GET", "/games/{game_id}/record"),
    # asking again is harmless: an analysis is queued once and computed once
    "getAnalysis": Endpoint("GET", "/games/{game_id}/analysis"),
    # asking twice queues one analysis and counts once against the asker's allowance
    "requestAnalysis": Endpoint("POST", "/games/{game_id}/analysis"),
    "createTournament": Endpoint("POST", "/tournaments", safe=False),
    "listTournaments": Endpoint("GET", "/tournaments"),
    "getTournament": Endpoint("GET", "/tournaments/{tournament_id}"),
    "getStandings": Endpoint(
        "GET", "/tournaments/{tournament_id}/standings"
    ),
    "exportTournament": Endpoint("GET", "/tournaments/{tournament_id}/export"),
    "exportTournamentCsv": Endpoint(
        "GET", "/tournaments/{tournament_id}/export.csv"
    ),
    "cancelTournament": Endpoint("POST", "/tournaments/{tournament_id}/cancel"),
    "pauseTournament": Endpoint("POST", "/tournaments/{tournament_id}/pause"),
    "resumeTournament": Endpoint("POST", "/tournaments/{tournament_id}/resume"),
    "withdrawEntrant": Endpoint(
        "POST", "/tournaments/{tournament_id}/entrants/{entrant_id}/withdraw"
    ),
    # entering again answers the tournament as it is; starting a started one likewise
    "enterTournament": Endpoint(
        "POST", "/tournaments/{tournament_id}/entrants"),
    "startTournament": Endpoint("POST", "/tournaments/{tournament_id}/start"),
    "excludeEntrant": Endpoint(
        "POST", "/tournaments/{tournament_id}/entrants/{entrant_id}/exclude", safe=False),
    "streamTournamentEvents": Endpoint("GET", "/tournaments/{tournament_id}/events"),
    "getTournamentSchedule": Endpoint("GET", "/tournaments/schedule"),
    "listHouseBots": Endpoint("GET", "/house"),
    "getLeaderboard": Endpoint("GET", "/leaderboard"),
    "listBotGames": Endpoint("GET", "/bots/{bot_id}/games"),
    "getMyOwner": Endpoint("GET", "/owners/me"),
    # a repeated rotation would make another token (and lose the one just made)
    "rotateMyToken": Endpoint("POST", "/bots/me/token", safe=False),
    "rotateToken": Endpoint("POST", "/bots/{target}/token", safe=False),
    # revoking or retiring again answers as it is now
    "revokeToken": Endpoint("DELETE", "/bots/{target}/token"),
    "revokeMyToken": Endpoint("DELETE", "/bots/me/token"),
    "retireBot": Endpoint("POST", "/bots/{target}/retirement"),
    "createHouseGame": Endpoint("POST", "/house/games", safe=False),
    "listLadders": Endpoint("GET", "/ladders"),
    "getLadder": Endpoint("GET", "/ladders/{name}"),
    # joining and leaving are idempotent: a repeat after a lost answer changes nothing
    "joinLadder": Endpoint("POST", "/ladders/{name}/entry"),
    "getLadderEntry": Endpoint("GET", "/ladders/{name}/entry"),
    "leaveLadder": Endpoint("DELETE", "/ladders/{name}/entry"),
    "getLadderStandings": Endpoint("GET", "/ladders/{name}/standings"),
    "getLadderHistory": Endpoint("GET", "/ladders/{name}/bots/{bot_id}/history"),
    "healthz": Endpoint("GET", "/healthz"),
    "readyz": Endpoint("GET", "/readyz"),
}


# --- the one exception --------------------------------------------------------------------


class ArenaError(Exception):
    """A failed call: the service's problem+json, or ``/problems/network`` (status 0).

    Switch on ``kind`` (``"not-your-turn"``, ``"version-conflict"``...), never on the text.
    """

    def __init__(self, problem: JSON, headers: dict[str, str] | None = None) -> None:
        self.problem = dict(problem)
        self.type: str = str(problem.get("type", "about:blank"))
        self.title: str = str(problem.get("title", ""))
        self.status: int = int(problem.get("status") or 0)
        self.detail: str | None = problem.get("detail")
        self.rule: str | None = problem.get("rule")
        self.current_version: int | None = problem.get("current_version")
        self.errors: dict[str, Any] | None = problem.get("errors")
        self.instance: str | None = problem.get("instance")
        self.headers = dict(headers or {})
        super().__init__(f"{self.status} {self.type}: {self.detail or self.title}")

    @property
    def kind(self) -> str:
        """The last part of ``type``: ``"/problems/not-your-turn"`` → ``"not-your-turn"``."""
        return self.type.rsplit("/", 1)[-1]

    @property
    def retry_after(self) -> float | None:
        return _retry_after(self.headers.get("Retry-After"))

    @classmethod
    def from_response(cls, resp: requests.Response) -> ArenaError:
        try:
            body = resp.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or "type" not in body:
            body = {"type": "about:blank", "title": resp.reason or "HTTP error",
                    "status": resp.status_code, "detail": resp.text[:200] or None}
        body.setdefault("status", resp.status_code)
        return cls(body, dict(resp.headers))

    @classmethod
    def network(cls, exc: Exception, what: str) -> ArenaError:
        return cls({"type": NETWORK_PROBLEM, "title": "No answer from the service",
                    "status": 0, "detail": f"{what}: {exc}"})


def _retry_after(raw: str | None) -> float | None:
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            return max(0.0, parsedate_to_datetime(raw).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


# --- typed answers ------------------------------------------------------------------------


@dataclass(frozen=True)
class Bot:
    id: str
    name: str
    created: int

    @classmethod
    def of(cls, d: JSON) -> Bot:
        return cls(d["id"], d["name"], d["created"])


@dataclass(frozen=True)
class BotCreated(Bot):
    token: str = field(default="", repr=False)

    @classmethod
    def of(cls, d: JSON) -> BotCreated:
        return cls(d["id"], d["name"], d["created"], d["token"])


@dataclass(frozen=True)
class BotTurns:
    games: list[str]
    timed_out: bool
    # pending invitations (games other owners' bots asked this bot to play), oldest first
    invitations: list[JSON] = field(default_factory=list)

    @classmethod
    def of(cls, d: JSON) -> BotTurns:
        return cls(list(d["games"]), bool(d["timed_out"]),
                   [dict(i) for i in d.get("invitations") or []])


@dataclass(frozen=True)
class Seat:
    seat: int
    bot_id: str | None
    bot_name: str | None

    @classmethod
    def of(cls, d: JSON) -> Seat:
        return cls(d["seat"], d.get("bot_id"), d.get("bot_name"))


@dataclass(frozen=True)
class GameSummary:
    id: str
    version: int
    status: str  # waiting, active or finished
    players: int
    seats: list[Seat]
    variants: JSON
    created: int
    scores: list[int] | None  # None while a tournament's duplicate deal is embargoed
    winner: int | None

    @classmethod
    def of(cls, d: JSON) -> GameSummary:
        scores = d.get("scores")
        return cls(d["id"], d["version"], d["status"], d["players"],
                   [Seat.of(s) for s in d["seats"]], dict(d["variants"]), d["created"],
                   list(scores) if scores is not None else None, d.get("winner"))


@dataclass(frozen=True)
class GameList:
    items: list[GameSummary]
    next_cursor: int | None

    @classmethod
    def of(cls, d: JSON) -> GameList:
        return cls([GameSummary.of(g) for g in d["items"]], d.get("next_cursor"))


@dataclass(frozen=True)
class View:
    """A seat's (or a spectator's) view. The commonly used members are typed; the whole
    answer is ``raw`` (hand, trick, kicks, scores items...), which strategies take."""

    id: str
    version: int
    status: str
    players: int
    seat: int | None
    team: int | None
    your_turn: bool
    legal_actions: list[str]
    phase: str
    turn: int | None
    scores: list[int]
    winner: int | None
    hand: list[str] | None
    raw: JSON = field(repr=False, compare=False)

    @classmethod
    def of(cls, d: JSON) -> View:
        return cls(d["id"], d["version"], d["status"], d["players"], d.get("seat"),
                   d.get("team"), bool(d["your_turn"]), list(d["legal_actions"]), d["phase"],
                   d.get("turn"), list(d["scores"]), d.get("winner"), d.get("hand"), d)

    @property
    def finished(self) -> bool:
        return self.status == "finished"


@dataclass(frozen=True)
class TurnAnswer:
    timed_out: bool
    view: View

    @classmethod
    def of(cls, d: JSON) -> TurnAnswer:
        return cls(bool(d["timed_out"]), View.of(d["view"]))


@dataclass(frozen=True)
class Record:
    actions: list[str]
    complete: bool
    scores: list[int]
    winner: int | None
    hands: list[JSON]
    raw: JSON = field(repr=False, compare=False)

    @classmethod
    def of(cls, d: JSON) -> Record:
        return cls(list(d["actions"]), bool(d["complete"]), list(d["scores"]),
                   d.get("winner"), list(d["hands"]), d)


@dataclass(frozen=True)
class Event:
    """One server-sent event: ``id`` is ``"ply.index"``, ``type`` e.g. ``"card_played"``."""

    id: str | None
    type: str
    data: Any


@dataclass(frozen=True)
class Tournament:
    """A tournament (``GET /tournaments/{id}``; in a list, ``rounds`` is empty)."""

    id: str
    name: str
    status: str  # registering, running, paused, finished or cancelled
    created: int
    finished: int | None
    entrants: list[Seat]
    progress: JSON  # games_planned, games_done, games_live, rounds_planned, rounds_done
    settings: JSON
    rounds: list[JSON]
    raw: JSON = field(repr=False, compare=False)

    @classmethod
    def of(cls, d: JSON) -> Tournament:
        return cls(d["id"], d["name"], d["status"], d["created"], d.get("finished"),
                   [Seat(-1, e["bot_id"], e["bot_name"]) for e in d["entrants"]],
                   dict(d["progress"]), dict(d["settings"]), list(d.get("rounds") or []), d)


@dataclass(frozen=True)
class TournamentList:
    items: list[Tournament]
    next_cursor: int | None

    @classmethod
    def of(cls, d: JSON) -> TournamentList:
        return cls([Tournament.of(t) for t in d["items"]], d.get("next_cursor"))


@dataclass(frozen=True)
class Rating:
    mu: float
    sigma: float
    ordinal: float  # mu - 3 sigma

    @classmethod
    def of(cls, d: JSON) -> Rating:
        return cls(d["mu"], d["sigma"], d["ordinal"])


@dataclass(frozen=True)
class StandingRow:
    rank: int
    bot_id: str
    bot_name: str
    score: float
    played: int
    won: int
    lost: int
    hands_won: int
    points_for: int
    points_against: int
    timeouts: int
    byes: int
    rating: Rating
    matchpoints: float = 0.0  # duplicate deals compared across tables
    comparisons: int = 0  # the most matchpoints it could have
    place: str | None = None  # knockout: e.g. "3-4"; None while still in
    eliminated: int | None = None  # knockout: the round it was knocked out in
    forfeits: int = 0  # games it forfeited (counted in lost)
    status: str = "in"  # in, withdrawn, no_show or disqualified

    @classmethod
    def of(cls, d: JSON) -> StandingRow:
        return cls(d["rank"], d["bot_id"], d["bot_name"], d["score"], d["played"], d["won"],
                   d["lost"], d["hands_won"], d["points_for"], d["points_against"],
                   d["timeouts"], d["byes"], Rating.of(d["rating"]),
                   d.get("matchpoints", 0.0), d.get("comparisons", 0), d.get("place"),
                   d.get("eliminated"), d.get("forfeits", 0), d.get("status", "in"))


@dataclass(frozen=True)
class Standings:
    tournament_id: str
    status: str
    rounds_done: int
    items: list[StandingRow]
    history: list[JSON]

    @classmethod
    def of(cls, d: JSON) -> Standings:
        return cls(d["tournament_id"], d["status"], d["rounds_done"],
                   [StandingRow.of(r) for r in d["items"]], list(d["history"]))


@dataclass(frozen=True)
class LeaderboardRow:
    rank: int | None  # None: provisional, not ranked yet (docs/ratings.md)
    bot_id: str
    bot_name: str
    games: int
    wins: int
    rating: Rating
    provisional: bool = False

    @classmethod
    def of(cls, d: JSON) -> LeaderboardRow:
        return cls(d["rank"], d["bot_id"], d["bot_name"], d["games"], d["wins"], Rating.of(d),
                   bool(d.get("provisional")))


@dataclass(frozen=True)
class Health:
    status: str

    @classmethod
    def of(cls, d: JSON) -> Health:
        return cls(d["status"])


# --- retry policy --------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry. ``delay(n)`` is the wait before retry ``n`` (1..)
    when the service named no ``Retry-After``: exponential, capped, with jitter."""

    attempts: int = 6  # tries in all, the first included
    backoff: float = 0.2
    max_backoff: float = 10.0
    max_retry_after: float = 60.0  # never sleep longer than this on the service's word
    statuses: frozenset[int] = frozenset({429, 502, 503, 504})

    def delay(self, n: int) -> float:
        base = min(self.max_backoff, self.backoff * 2 ** (n - 1))
        return base * (0.5 + random.random() / 2)


def _never_sent(exc: requests.RequestException) -> bool:
    """True when the request surely did not reach the service (refused, or the connect
    itself timed out), so even a non-idempotent request may be sent again."""
    if isinstance(exc, requests.ConnectTimeout):
        return True
    seen: set[int] = set()
    todo: list[Any] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if type(e).__name__ in ("NewConnectionError", "ConnectionRefusedError"):
            return True
        todo.extend([getattr(e, "reason", None), e.__cause__, e.__context__,
                     *[a for a in getattr(e, "args", ()) if isinstance(a, BaseException)]])
    return False


# --- the client ----------------------------------------------------------------------------


class ArenaClient:
    """The whole API. Thread-safe enough to share between a runner's worker threads
    (one ``requests.Session`` with a connection pool of ``pool_size``).

    ``timeout`` bounds every call (connect and read); long-polls add their own wait to it.
    Constructing a client does no I/O.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        pool_size: int = 16,
        user_agent: str = "allfours-arena-client/0.1",
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self.session = requests.Session()
        adapter = HTTPAdapter(pool_connections=4, pool_maxsize=pool_size)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.session.headers["User-Agent"] = user_agent
        self.session.headers["Accept"] = "application/json, application/problem+json"
        self._not_before: dict[str, float] = {}  # endpoint -> monotonic time (after a 429)
        self._lock = threading.Lock()
        # the request budget as last announced (RateLimit), less what was sent since:
        # requests left (None: unknown) and when the window resets (monotonic)
        self._left: int | None = None
        self._reset_at = 0.0
        self._sent = 0  # requests sent so far (answers name theirs, see ``_note_budget``)
        self.rate_limited = 0  # 429 answers received

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> ArenaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ArenaClient({self.base_url!r}, token={'***' if self.token else None})"

    # --- bots --------------------------------------------------------------------------

    def register(self, name: str, use_token: bool = True, owner: str | None = None,
                 invitation: str | None = None) -> BotCreated:
        """``POST /bots``. The token is shown only here; by default the client adopts it.
        ``owner``: the token of one of your bots: the new bot joins that bot's owner (your
        bots seat each other at once; they are never matched or rated against each
        other). Without it the bot is a new owner's (``invitation``: the operator's code,
        where new owners need one)."""
        body: JSON = {"name": name}
        if invitation is not None:
            body["invitation"] = invitation
        bot = BotCreated.of(self._call("registerBot", json=body,
                                       headers={"Authorization": f"Bearer {owner}"
                                                if owner else ""}))
        if use_token:
            self.token = bot.token
        return bot

    def invitations(self) -> list[JSON]:
        """``GET /bots/me/invitations``: games other owners' bots invited this bot to,
        oldest first (``id``, ``game_id``, ``from_bot``, ``from_owner``, ``seats``,
        ``expires``...)."""
        return self._every("listMyInvitations")

    def accept(self, invitation_id: str) -> JSON:
        """``POST /invitations/{id}/accept``: sit in the seats held for this bot."""
        return dict(self._call("acceptInvitation",
                               invitation_id=invitation_id))

    def decline(self, invitation_id: str) -> JSON:
        """``POST /invitations/{id}/decline``: the invitation's game is cancelled."""
        return dict(self._call("declineInvitation",
                               invitation_id=invitation_id))

    def set_policy(self, accept: str, from_: Iterable[str] = ()) -> JSON:
        """``PUT /bots/me/policy``: ``anyone``, ``nobody`` or ``list`` (with ``from_``: bot
        and owner ids) may invite this bot."""
        body: JSON = {"accept": accept}
        if accept == "list":
            body["from"] = sorted(from_)
        return dict(self._call("setPolicy", json=body))

    def me(self) -> Bot:
        """``GET /bots/me``: the bot behind the token."""
        return Bot.of(self._call("getMe"))

    def bot(self, bot_id: str) -> Bot:
        """``GET /bots/{bot_id}``."""
        return Bot.of(self._call("getBot", bot_id=bot_id))

    def set_callback(self, url: str) -> JSON:
        """``PUT /bots/me/callback``: the service calls ``url`` on this bot's turns once the
        URL has answered its verification (``verified``); returns ``url``, ``created``,
        ``verified``, ``verification`` and the signing ``secret`` (shown only here)."""
        return dict(self._call("setCallback", json={"url": url}))

    def callback(self) -> JSON:
        """``GET /bots/me/callback``: the registered URL (``ArenaError`` not-found if none)."""
        return dict(self._call("getCallback"))

    def verify_callback(self) -> JSON:
        """``POST /bots/me/callback/verify``: send the URL's verification again now (after
        the bot's server came up late); returns the callback with ``verified``."""
        return dict(self._call("verifyCallback", json={}))

    def remove_callback(self) -> None:
        """``DELETE /bots/me/callback``: back to playing by pull."""
        self._send("deleteCallback", {})

    def deliveries(self, limit: int = 50, game_id: str | None = None) -> list[JSON]:
        """``GET /bots/me/callback/deliveries``: what became of the service's calls, newest
        first (``outcome``, ``status``, ``detail``...)."""
        params: JSON = {"limit": limit}
        if game_id is not None:
            params["game_id"] = game_id
        return list(self._call("listDeliveries", params=params)["items"])

    def my_turns(self, timeout: float = 25.0, playing: Iterable[str] = (),
                 invitations_after: float | None = None) -> BotTurns:
        """``GET /bots/me/turns``: games where it is this bot's turn; waits up to ``timeout``
        seconds (0..30) for one. ``playing``: games already being played (at most 200),
        left out of the answer and not waited for. The answer lists pending
        ``invitations`` too; one newer than ``invitations_after`` (unix seconds) answers
        at once."""
        params: JSON = {"timeout": timeout}
        if invitations_after is not None:
            params["invitations_after"] = invitations_after
        ids = ",".join(sorted(playing))
        if ids:
            params["playing"] = ids
        return BotTurns.of(self._call("listMyTurns", params=params, wait=timeout))

    # --- games -------------------------------------------------------------------------

    def create_game(
        self,
        players: int,
        seats: list[str | None] | None = None,
        seed: int | None = None,
        variants: JSON | None = None,
    ) -> GameSummary:
        """``POST /games``. ``seats``: a bot id (or None: open) per seat; by default this bot
        takes seat 0 and the rest are open."""
        body: JSON = {"players": players}
        if seats is not None:
            body["seats"] = seats
        if seed is not None:
            body["seed"] = seed
        if variants:
            body["variants"] = variants
        return GameSummary.of(self._call("createGame", json=body))

    def house_game(self, players: int, opponent: str = "heuristic",
                   partner: str | None = None, variants: JSON | None = None,
                   move_limit: float | None = None) -> GameSummary:
        """``POST /house/games``: a game against the service's house bots (the built-in
        strategies), this bot in seat 0, started at once; 503 when none run."""
        body: JSON = {"players": players, "opponent": opponent}
        if partner is not None:
            body["partner"] = partner
        if variants:
            body["variants"] = variants
        if move_limit is not None:
            body["move_limit"] = move_limit
        return GameSummary.of(self._call("createHouseGame", json=body)["game"])

    def games(self, status: str | None = None, limit: int = 20,
              cursor: int | None = None) -> GameList:
        """``GET /games``: one page, newest first (``next_cursor`` for the next)."""
        params: JSON = {"limit": limit}
        if status:
            params["status"] = status
        if cursor is not None:
            params["cursor"] = cursor
        return GameList.of(self._call("listGames", params=params))

    def iter_games(self, status: str | None = None, page_size: int = 50
                   ) -> Iterator[GameSummary]:
        """Every game, following ``next_cursor``."""
        cursor = None
        while True:
            page = self.games(status, page_size, cursor)
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def owner(self) -> JSON:
        """``GET /owners/me``: this bot's owner, every bot of it with its ratings and live
        games."""
        return dict(self._call("getMyOwner"))

    def rotate_token(self, bot_id: str | None = None) -> str:
        """``POST /bots/me/token`` (or ``/bots/{id}/token``, a bot of the same owner): a
        new token, returned once; the old one is refused from now on. Rotating this
        client's own bot, the client uses the new token from here on."""
        if bot_id is None:
            token = self._call("rotateMyToken")["token"]
            self.token = token
        else:
            token = self._call("rotateToken", target=bot_id)["token"]
        return str(token)

    def revoke_token(self, bot_id: str | None = None) -> None:
        """``DELETE /bots/{id}/token`` (without ``bot_id``: ``/bots/me/token``, this
        client's own): the bot has no token until one is rotated in."""
        if bot_id is None:
            self._call("revokeMyToken")
        else:
            self._call("revokeToken", target=bot_id)

    def retire(self, bot_id: str) -> JSON:
        """``POST /bots/{id}/retirement``: the bot plays no more (for good); its games,
        ratings and name are kept."""
        return dict(self._call("retireBot", target=bot_id))

    @staticmethod
    def _game_filters(filters: JSON) -> JSON:
        """``bot_games``' filters as query parameters (booleans as ``true``/``false``)."""
        return {k: ("true" if v else "false") if isinstance(v, bool) else v
                for k, v in filters.items() if v is not None}

    def bot_games(self, bot_id: str, limit: int = 50, cursor: str | None = None,
                  **filters: Any) -> JSON:
        """``GET /bots/{id}/games``: one page of the bot's finished games, newest first
        (``items``, ``next_cursor``). ``filters``: ``since``, ``until`` (unix seconds),
        ``rated``, ``tournament``, ``ladder``, ``opponent``, ``players``."""
        params = {"limit": limit, **self._game_filters(filters)}
        if cursor is not None:
            params["cursor"] = cursor
        return dict(self._call("listBotGames", params=params, bot_id=bot_id))

    def export_games(self, bot_id: str, records: bool = True, **filters: Any
                     ) -> Iterator[JSON]:
        """``GET /bots/{id}/games`` as NDJSON: every finished game of the bot (with its
        full ``record`` unless ``records=False``), newest first, read line by line as the
        service streams them: nothing is held but the current line."""
        params = {**self._game_filters(filters), "records": "true" if records else "false"}
        resp = self._send("listBotGames", {"bot_id": bot_id}, params=params,
                          headers={"Accept": "application/x-ndjson"}, stream=True)
        with resp:
            for line in resp.iter_lines():
                if line:
                    yield jsonlib.loads(line)

    def game(self, game_id: str, seat: int | None = None) -> View:
        """``GET /games/{id}``: this bot's view (its seat's hand and legal actions), or the
        spectator view without a token. ``seat`` picks one of two held seats."""
        return View.of(self._call("getGame", game_id=game_id, params=_seat(seat)))

    def join(self, game_id: str, seat: int) -> View:
        """``POST /games/{id}/seats/{seat}``: take an open seat (again: a no-op)."""
        return View.of(self._call("joinSeat", game_id=game_id, seat=seat))

    def act(
        self,
        game_id: str,
        action: str,
        version: int | None = None,
        seat: int | None = None,
        idempotency_key: str | None = None,
        if_match: int | None = None,
        wait: float | None = None,
    ) -> View:
        """``POST /games/{id}/actions``: the new view. ``version`` (the view's) refuses the
        action if the game moved on (``version-conflict``). A fresh ``Idempotency-Key`` is
        made unless one is given, and every retry of this call sends the same one.

        ``wait`` (seconds, up to 30): also wait for this bot's next turn — the answer is
        its view once it is its turn again, the game is over, or ``wait`` passed (check
        ``your_turn``). One request per move instead of an action and a ``wait_turn``.
        "Its turn" is at any seat the bot holds (the answer's ``seat`` says which). A
        retry after a lost answer applies nothing and waits the same way (docs/bots.md,
        Idempotency)."""
        body: JSON = {"action": action}
        if version is not None:
            body["version"] = version
        if seat is not None:
            body["seat"] = seat
        headers = {"Idempotency-Key": idempotency_key or uuid.uuid4().hex}
        if if_match is not None:
            headers["If-Match"] = f'"{if_match}"'
        params = {"wait": wait} if wait else None
        return View.of(self._call("act", game_id=game_id, json=body,
                                  headers=headers, params=params, wait=wait or 0.0))

    def wait_turn(
        self,
        game_id: str,
        timeout: float = 25.0,
        after: int | None = None,
        seat: int | None = None,
    ) -> TurnAnswer:
        """``GET /games/{id}/turn``: answers when it is this bot's turn, the game is over, or
        its version passed ``after``; else after ``timeout`` seconds (``timed_out``)."""
        params: JSON = {"timeout": timeout, **_seat(seat)}
        if after is not None:
            params["after"] = after
        return TurnAnswer.of(self._call("waitForTurn", game_id=game_id, params=params,
                                        wait=timeout))

    def record(self, game_id: str, seat: int | None = None) -> Record:
        """``GET /games/{id}/record``: complete once the game is over."""
        return Record.of(self._call("getRecord", game_id=game_id,
                                    params=_seat(seat)))

    def events(
        self,
        game_id: str,
        seat: int | None = None,
        last_event_id: str | None = None,
        read_timeout: float = 30.0,
        reconnect: bool = True,
    ) -> Iterator[Event]:
        """``GET /games/{id}/events``: the game's server-sent events, in order, until
        ``game_over``. A broken stream is resumed with ``Last-Event-ID`` (nothing lost,
        nothing repeated); the service's keep-alives (every 5 s) keep ``read_timeout`` from
        firing on a quiet game."""
        last = last_event_id
        failures = 0
        while True:
            headers = {"Accept": "text/event-stream"}
            if last:
                headers["Last-Event-ID"] = last
            try:
                resp = self._send("streamGameEvents", {"game_id": game_id},
                                  params=_seat(seat), headers=headers, stream=True,
                                  read_timeout=read_timeout)
                with resp:
                    for event in _parse_sse(resp.iter_lines(decode_unicode=True)):
                        failures = 0
                        if event.id:
                            last = event.id
                        yield event
                        if event.type == "game_over":
                            return
                # the service closes the stream only after game_over; anything else is a cut
                raise requests.ConnectionError("event stream ended early")
            except requests.RequestException as exc:
                failures += 1
                if not reconnect or failures >= self.retry.attempts:
                    raise ArenaError.network(exc, f"GET /games/{game_id}/events") from exc
                log.info("event stream cut (%s); resuming after %s", exc, last)
                self._sleep(self.retry.delay(failures))

    # --- tournaments ---------------------------------------------------------------------

    def create_tournament(self, entrants: list[str], format: str = "round_robin",
                          admin_token: str | None = None, **settings: Any) -> Tournament:
        """``POST /tournaments`` (admin): ``settings`` as in the contract's TournamentCreate
        (name, players, games_per_pairing, duplicate, rounds, variants, move_limit...)."""
        body: JSON = {"entrants": entrants, "format": format, **settings}
        headers = {"Authorization": f"Bearer {admin_token}"} if admin_token else None
        return Tournament.of(self._call("createTournament", json=body, headers=headers))

    def tournaments(self, limit: int = 20, cursor: int | None = None,
                    **filters: Any) -> TournamentList:
        """``GET /tournaments``: one page, newest first; ``filters`` as the contract's
        (status, format, players, starts_after, starts_before). ``status="registering"``:
        the ones a bot may enter, soonest start first."""
        params: JSON = {"limit": limit, **{k: v for k, v in filters.items() if v is not None}}
        if cursor is not None:
            params["cursor"] = cursor
        return TournamentList.of(self._call("listTournaments", params=params))

    def organize(self, format: str = "swiss", **settings: Any) -> Tournament:
        """``POST /tournaments`` with this client's token: its bot's owner organizes a
        tournament (``registration``, ``starts_at``... as the contract's TournamentCreate;
        without ``entrants`` bots enter it themselves). A private one's ``code`` is in
        ``raw``."""
        return Tournament.of(self._call("createTournament", json={"format": format,
                                                                 **settings}))

    def enter(self, tournament_id: str, code: str | None = None) -> Tournament:
        """``POST /tournaments/{id}/entrants``: this client's bot enters (a private
        tournament's join ``code``). Each refused condition is an ``ArenaError`` of its own
        kind (``entry-not-validated``, ``entry-one-per-owner``...)."""
        body = {"code": code} if code else {}
        return Tournament.of(self._call("enterTournament", json=body,
                                        tournament_id=tournament_id))

    def enter_next(self, **filters: Any) -> Tournament | None:
        """Enter the registering tournament that starts soonest and admits this bot
        (``filters`` as ``tournaments``); None when none does."""
        for t in self.tournaments(limit=50, status="registering", **filters).items:
            if (t.raw.get("registration") or {}).get("mode") != "open":
                continue
            try:
                return self.enter(t.id)
            except ArenaError as exc:
                if exc.status in (401, 429) or exc.status >= 500:
                    raise
        return None

    def start_tournament(self, tournament_id: str) -> Tournament:
        """``POST /tournaments/{id}/start`` (its organizer): it starts now."""
        return Tournament.of(self._call("startTournament",
                                        tournament_id=tournament_id))

    def house(self) -> JSON:
        """``GET /house``: the house bots (ids, strategies) and whether they play here."""
        return dict(self._call("listHouseBots"))

    def tournament(self, tournament_id: str) -> Tournament:
        """``GET /tournaments/{id}``: settings, progress, rounds with games and results."""
        return Tournament.of(self._call("getTournament",
                                        tournament_id=tournament_id))

    def standings(self, tournament_id: str) -> Standings:
        """``GET /tournaments/{id}/standings``: ranked rows with ratings, and their history."""
        return Standings.of(self._call("getStandings",
                                       tournament_id=tournament_id))

    def export(self, tournament_id: str, table: str | None = None) -> JSON | str:
        """``GET /tournaments/{id}/export``: the whole tournament as its JSON document, or
        with ``table`` (standings, games, ratings, bracket) that table as CSV text
        (``GET /tournaments/{id}/export.csv``)."""
        if table is None:
            return self._call("exportTournament", tournament_id=tournament_id)
        resp = self._send("exportTournamentCsv",
                          {"tournament_id": tournament_id}, params={"table": table})
        return resp.text

    def cancel_tournament(self, tournament_id: str, admin_token: str | None = None
                          ) -> Tournament:
        """``POST /tournaments/{id}/cancel`` (admin): live games voided, nothing scheduled.
        Safe to repeat (a cancelled tournament answers as it is)."""
        return self._control("cancelTournament", tournament_id, admin_token)

    def pause_tournament(self, tournament_id: str, admin_token: str | None = None
                         ) -> Tournament:
        """``POST /tournaments/{id}/pause`` (admin): no new game starts until resumed."""
        return self._control("pauseTournament", tournament_id, admin_token)

    def resume_tournament(self, tournament_id: str, admin_token: str | None = None
                          ) -> Tournament:
        """``POST /tournaments/{id}/resume`` (admin): games start again."""
        return self._control("resumeTournament", tournament_id, admin_token)

    def withdraw(self, tournament_id: str, entrant_id: str | None = None) -> Tournament:
        """``POST /tournaments/{id}/entrants/{bot}/withdraw`` with this client's token (its
        own bot by default): the entrant forfeits its live and unplayed games."""
        entrant = entrant_id or self.me().id
        return Tournament.of(self._call("withdrawEntrant",
                                        tournament_id=tournament_id, entrant_id=entrant))

    def _control(self, name: str, tournament_id: str, admin_token: str | None) -> Tournament:
        headers = {"Authorization": f"Bearer {admin_token}"} if admin_token else None
        return Tournament.of(self._call(name, tournament_id=tournament_id, headers=headers))

    # --- the operator: owners and suspensions (admin) ---------------------------------

    def _admin(self, name: str, admin_token: str | None, json: Any = None,
               **path: Any) -> JSON:
        headers = {"Authorization": f"Bearer {admin_token}"} if admin_token else None
        return dict(self._call(name, json=json, headers=headers, **path))

    def create_owner_invitation(self, admin_token: str | None = None) -> JSON:
        """``POST /owner-invitations`` (admin): a single-use code that admits a new owner
        where admission is ``invite`` (``code``, ``expires``)."""
        return self._admin("createOwnerInvitation", admin_token)

    def suspend_bot(self, bot_id: str, reason: str, admin_token: str | None = None) -> JSON:
        """``POST /admin/bots/{id}/suspension`` (admin): withdrawn from tournaments and
        ladders, can no longer act, register or accept invitations."""
        return self._admin("suspendBot", admin_token, {"reason": reason},
                           bot_id=bot_id)

    def lift_bot_suspension(self, bot_id: str, admin_token: str | None = None) -> JSON:
        """``DELETE /admin/bots/{id}/suspension`` (admin): access back, not the games."""
        return self._admin("liftBotSuspension", admin_token, bot_id=bot_id)

    def suspend_owner(self, owner_id: str, reason: str, admin_token: str | None = None
                      ) -> JSON:
        """``POST /admin/owners/{id}/suspension`` (admin): every bot of the owner."""
        return self._admin("suspendOwner", admin_token,
                           {"reason": reason}, owner_id=owner_id)

    def lift_owner_suspension(self, owner_id: str, admin_token: str | None = None) -> JSON:
        """``DELETE /admin/owners/{id}/suspension`` (admin)."""
        return self._admin("liftOwnerSuspension", admin_token,
                           owner_id=owner_id)

    def suspensions(self, admin_token: str | None = None) -> list[JSON]:
        """``GET /admin/suspensions`` (admin): every act, newest first."""
        return list(self._admin("listSuspensions", admin_token)["items"])

    def leaderboard(self) -> list[LeaderboardRow]:
        """``GET /leaderboard``: ratings over every tournament game, best first."""
        return [LeaderboardRow.of(r) for r in self._every("getLeaderboard")]

    # --- the ladder (answers as the contract's JSON objects) ------------------------------

    def _ladder(self, op: str, ladder: str, params: JSON | None = None, json: Any = None,
                **path: Any) -> Any:
        """``_call`` for the ladder's operations, whose path parameter is ``name`` (which
        ``_call`` takes for the operation)."""
        resp = self._send(op, {"name": ladder, **path}, params=params, json=json)
        return resp.json()

    def ladders(self) -> list[JSON]:
        """``GET /ladders``: every ladder with its table size, rules and counts."""
        return list(self._call("listLadders")["items"])

    def ladder(self, name: str) -> JSON:
        """``GET /ladders/{name}``: the ladder and who is on it (its queue)."""
        return dict(self._ladder("getLadder", name))

    def join_ladder(self, name: str, games: int | None = None) -> JSON:
        """``POST /ladders/{name}/entry``: queue for rated games (``games`` of them, or until
        ``leave_ladder``); answers the entry (``state``, ``game_id``, ``reason``...)."""
        body: JSON = {} if games is None else {"games": games}
        return dict(self._ladder("joinLadder", name, json=body))

    def ladder_entry(self, name: str) -> JSON:
        """``GET /ladders/{name}/entry``: your queue state."""
        return dict(self._ladder("getLadderEntry", name))

    def leave_ladder(self, name: str) -> JSON:
        """``DELETE /ladders/{name}/entry``: stop being matched (a game in play is finished)."""
        return dict(self._ladder("leaveLadder", name))

    def ladder_standings(self, name: str, limit: int = 20, cursor: int | None = None) -> JSON:
        """``GET /ladders/{name}/standings``: one page, best ordinal first."""
        params: JSON = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        return dict(self._ladder("getLadderStandings", name, params=params))

    def ladder_history(self, name: str, bot_id: str, limit: int = 20,
                       cursor: int | None = None) -> JSON:
        """``GET /ladders/{name}/bots/{bot_id}/history``: one page of its games, newest
        first, with its rating before and after each."""
        params: JSON = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        return dict(self._ladder("getLadderHistory", name, params=params,
                                 bot_id=bot_id))

    # --- health ------------------------------------------------------------------------

    def healthz(self) -> Health:
        return Health.of(self._call("healthz"))

    def readyz(self) -> Health:
        return Health.of(self._call("readyz"))

    # --- plumbing ----------------------------------------------------------------------

    def _every(self, name: str, params: JSON | None = None, **path: Any) -> list[JSON]:
        """Every item of a list operation, following ``next_cursor`` page by page (every
        list answers ``items`` and ``next_cursor``)."""
        out: list[JSON] = []
        query = dict(params or {})
        while True:
            page = self._call(name, params=query, **path)
            out += page["items"]
            if page.get("next_cursor") is None:
                return out
            query["cursor"] = page["next_cursor"]

    def _call(
        self,
        name: str,
        *,
        params: JSON | None = None,
        json: Any = None,
        headers: dict[str, str] | None = None,
        wait: float = 0.0,
        **path: Any,
    ) -> Any:
        resp = self._send(name, path, params=params, json=json, headers=headers,
                          read_timeout=self.timeout + wait)
        try:
            return resp.json()
        except ValueError as exc:
            raise ArenaError({"type": "about:blank", "title": "Not JSON",
                              "status": resp.status_code,
                              "detail": f"{name}: the answer is not JSON"}) from exc

    def _send(
        self,
        name: str,
        path: dict[str, Any],
        *,
        params: JSON | None = None,
        json: Any = None,
        headers: dict[str, str] | None = None,
        stream: bool = False,
        read_timeout: float | None = None,
    ) -> requests.Response:
        """Send one call of ``ENDPOINTS[name]`` with the retry policy; a 2xx answer or
        ``ArenaError``. The same ``headers`` (Idempotency-Key included) go with every try."""
        ep = ENDPOINTS[name]
        url = self.base_url + ep.path.format(**path)
        what = f"{ep.method} {ep.path.format(**path)}"
        all_headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        all_headers.update(headers or {})
        all_headers = {k: v for k, v in all_headers.items() if v}  # "": not sent
        policy = self.retry
        for attempt in range(1, policy.attempts + 1):
            self._hold(name)
            sent, seq = self._pace()
            try:
                resp = self.session.request(
                    ep.method, url, params=params, json=json, headers=all_headers,
                    timeout=(self.timeout, read_timeout or self.timeout), stream=stream,
                )
            except requests.RequestException as exc:
                if attempt == policy.attempts or not (ep.safe or _never_sent(exc)):
                    raise ArenaError.network(exc, what) from exc
                pause = policy.delay(attempt)
                log.warning("%s: %s; retry %d in %.2f s", what, type(exc).__name__, attempt,
                            pause)
                self._sleep(pause)
                continue
            self._note_budget(resp, sent, seq)
            if resp.status_code < 400:
                return resp
            error = ArenaError.from_response(resp)
            resp.close()
            if resp.status_code not in policy.statuses or attempt == policy.attempts:
                raise error
            pause = error.retry_after
            if pause is None:
                pause = policy.delay(attempt)
            pause = min(pause, policy.max_retry_after)
            if resp.status_code == 429:
                with self._lock:
                    self.rate_limited += 1
                    self._not_before[name] = time.monotonic() + pause
                    self._left, self._reset_at = 0, time.monotonic() + pause
            log.warning("%s: %s; retry %d in %.2f s", what, resp.status_code, attempt, pause)
            self._sleep(pause)
        raise AssertionError("unreachable")  # pragma: no cover

    @property
    def budget(self) -> tuple[int | None, float]:
        """(requests left in the service's window as this client counts them, or None if
        unknown; seconds until the window resets)."""
        with self._lock:
            return self._left, max(0.0, self._reset_at - time.monotonic())

    def _pace(self) -> tuple[float, int]:
        """Before a request: if the budget is spent, sleep until its window resets; then
        count the request. Returns when it was sent (monotonic) and its number."""
        while True:
            with self._lock:
                now = time.monotonic()
                if self._left is not None and now >= self._reset_at:
                    self._left = None  # a new window: the service will say
                if self._left is None or self._left > 0:
                    if self._left is not None:
                        self._left -= 1
                    self._sent += 1
                    return now, self._sent
                waited_for, pause = self._reset_at, self._reset_at - now
            log.info("request budget spent: waiting %.2f s for the window to reset", pause)
            self._sleep(pause)
            with self._lock:
                if self._reset_at <= waited_for:  # that window is over: the next will say
                    self._left = None

    def _note_budget(self, resp: requests.Response, sent: float, seq: int) -> None:
        """Take the service's word on the budget (``RateLimit``), as of when the request
        was sent (a long-poll answers late, but said ``t`` when it arrived), less every
        request sent after it, which its ``r`` may not count yet."""
        left_reset = _ratelimit(resp.headers.get("RateLimit"))
        if left_reset is None:
            return
        left, reset = left_reset
        reset_at = sent + reset
        with self._lock:
            left = max(0, left - (self._sent - seq))
            if self._left is None or reset_at > self._reset_at + 1.0:  # a newer window
                self._left, self._reset_at = left, reset_at
            else:  # the same window: answers to requests sent later may have come first
                self._left = min(self._left, left)

    def _hold(self, name: str) -> None:
        """After a 429 on an endpoint, every caller waits out its Retry-After."""
        with self._lock:
            until = self._not_before.get(name, 0.0)
        left = until - time.monotonic()
        if left > 0:
            self._sleep(left)


_ITEM = re.compile(r'^\s*"?([A-Za-z0-9_.*-]+)"?\s*((?:;[^;,]*)*)$')


def _ratelimit(raw: str | None) -> tuple[int, float] | None:
    """``(r, t)`` of the ``"default"`` item (else the first) of a ``RateLimit`` field
    (draft-ietf-httpapi-ratelimit-headers: ``"default";r=50;t=30``); None if absent."""
    if not raw:
        return None
    found: tuple[int, float] | None = None
    for item in raw.split(","):
        m = _ITEM.match(item)
        if not m:
            continue
        params = dict(p.strip().partition("=")[::2] for p in m[2].split(";") if p.strip())
        try:
            value = (int(params["r"]), float(params["t"]))
        except (KeyError, ValueError):
            continue
        if m[1] == "default":
            return value
        found = found or value
    return found


def _seat(seat: int | None) -> JSON:
    return {} if seat is None else {"seat": seat}


def _parse_sse(lines: Iterator[str]) -> Iterator[Event]:
    """Server-sent events from a stream of lines (comments and ``retry:`` skipped)."""
    event_id: str | None = None
    event_type = "message"
    data: list[str] = []
    for line in lines:
        if line is None:
            continue
        if line == "":
            if data:
                text = "\n".join(data)
                try:
                    payload: Any = jsonlib.loads(text)
                except ValueError:
                    payload = text
                yield Event(event_id, event_type, payload)
            event_type, data = "message", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "id":
            event_id = value
        elif name == "event":
            event_type = value
        elif name == "data":
            data.append(value)


__all__ = [
    "ENDPOINTS",
    "ArenaClient",
    "ArenaError",
    "Bot",
    "BotCreated",
    "BotTurns",
    "Endpoint",
    "Event",
    "GameList",
    "GameSummary",
    "Health",
    "LeaderboardRow",
    "Rating",
    "Record",
    "RetryPolicy",
    "Seat",
    "StandingRow",
    "Standings",
    "Tournament",
    "TournamentList",
    "TurnAnswer",
    "View",
]
