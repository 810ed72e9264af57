"""``allfours check-bot``: put a bot through the situations real play brings, before it
competes.

Why this shape: a bot author needs to know, on their own machine and in their own CI,
that their bot survives what the service really does — a 429, a 503, an answer lost
after the action was applied, a stale version, a restart, a short move limit, two seats
in one game — and each of those is rare in a friendly test game. So check-bot starts its
own service (the embedded valkey-server and gunicorn with the project's worker, as
``allfours serve`` does), puts a real TCP proxy (:mod:`service.cli.check_proxy`) between
the bot and it, runs the bot's own command with ``ARENA_URL`` (the proxy) and
``ARENA_TOKEN`` in its environment, and plays three games against an opponent of its
own while the proxy injects each situation for real and logs every request. Nothing of
the bot is mocked: it meets real sockets and the service's real answers, and every
verdict is read from the proxy's log and the game's record.

The games (each one a plan of situations, played one after another so a bot that plays
one game at a time is judged fairly):

* ``duel``: 2 players, target 7, a 10 s move limit; a 429 and a 503 with ``Retry-After``,
  an answer dropped after the service applied the action, a quiet 3 s while the opponent
  thinks (requests counted), and a restart of the service mid-game;
* ``clock``: 2 players, target 3, a 3 s move limit, every house rule changed; one action
  held by the proxy until the clock played for the bot (a stale version);
* ``team``: 4 players, target 3, a 3 s move limit; the bot holds seats 0 and 2.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from service.cli.check_proxy import CheckProxy, Exchange, Rule
from service.cli.embedded_service import EmbeddedService
from service.cli.serve import _STOP_WAIT, gunicorn_command
from service.storage.embedded import log_tail, stop_process

DOCS = "docs/bots.md"
BUSY_RATE = 3.0  # requests per second while not in turn above this: a busy loop
MAX_PER_MOVE = 10.0  # requests per move above this: far from the 1.1-1.9 of the project's bots
START_WAIT = 90.0  # seconds for the bot's first request (a `go run` or `tsc` build included)
GAME_CAP = {"duel": 120.0, "clock": 60.0, "team": 90.0}  # a game not over by then failed
GIVE_UP = 3  # the clock played this many of the bot's moves in a game: stop waiting for it
SLACK = 0.05  # seconds of clock jitter allowed when measuring a wait
IDLE_WINDOW = 2.0  # seconds watched with no game at all
THINK = 3.0  # seconds the opponent holds one move in the duel
# the clock game's move limit: short (the clock plays a late move soon, and the stale-version
# hold lasts this long), yet a bot three requests a move from the service keeps it under load
CLOCK_LIMIT = 3

# situation -> (game, docs anchor, title)
SITUATIONS: dict[str, tuple[str, str, str]] = {
    "two_player": ("duel", "the-turn-loop", "a 2-player game played to its end"),
    "four_player_two_seats": ("team", "accounts-games-and-seats",
                              "a 4-player game holding both seats of a team"),
    "decisions": ("*", "the-view", "every decision kind: stand/beg, give one/run, play"),
    "house_rules": ("clock", "", "a game with every house rule changed"),
    "stale_version": ("clock", "versions-and-conflicts",
                      "another write got in first (a stale version)"),
    "rate_limited": ("duel", "rate-limits", "429 with Retry-After"),
    "unavailable": ("duel", "errors", "503 with Retry-After"),
    "lost_answer": ("duel", "idempotency", "an answer lost after the action was applied"),
    "move_limit": ("clock", "deadlines", "a 3 s move limit"),
    "restart": ("duel", "errors", "the service restarted mid-game"),
    "illegal_action": ("*", "errors", "only legal actions, and no loop on a 409"),
    "idempotency_key": ("*", "idempotency", "an Idempotency-Key on every action"),
    "no_busy_loop": ("duel", "the-turn-loop", "no busy loop while waiting"),
    "requests_per_move": ("*", "rate-limits", "requests per move"),
}
HOUSE_RULES = {"target": 3, "game_point_value": 2, "game_tie": "non_dealer",
               "give_one_at_target_minus_one": False, "under_trumping": False,
               "void_may_discard": True, "pack_runs_out": "redeal", "tobago_kick": True}


def docs_link(situation: str) -> str:
    anchor = SITUATIONS[situation][1]
    return "docs/rules.md#house-rules" if not anchor else f"{DOCS}#{anchor}"


@dataclass
class Result:
    situation: str
    passed: bool
    what: str
    fix: str = ""
    docs: str = ""
    title: str = ""


@dataclass
class GameRun:
    """One game as it was played: the service's record plus what check-bot did to it."""

    name: str
    game_id: str = ""
    bot_seats: tuple[int, ...] = ()
    finished: bool = False
    record: dict[str, Any] = field(default_factory=dict)
    started: float = 0.0
    ended: float = 0.0
    opponent_moves: int = 0
    marks: dict[str, Any] = field(default_factory=dict)  # what the plan injected, and when
    rules: dict[str, Rule] = field(default_factory=dict)

    def bot_timeouts(self) -> list[dict[str, Any]]:
        return [t for t in self.record.get("timeouts") or [] if t["seat"] in self.bot_seats]


# --- the service, with a restart ----------------------------------------------------------


class CheckService(EmbeddedService):
    """The tournament command's embedded service (valkey + gunicorn on a free port), which
    check-bot also restarts on the same data and port. gunicorn is started here without a
    ``preexec_fn``, because check-bot's threads (the proxy) run by the time it restarts."""

    _env: dict[str, str]

    def _spawn(self, env: dict[str, str]) -> None:
        # a check plays a few games and asks for no analysis of them: no analysis workers
        # (two processes, each importing the search, for nothing)
        env = {**env, "ARENA_ANALYSIS_WORKERS": "0"}
        self._env = env
        self._stop_gunicorn()
        command = gunicorn_command(self.host, self.port or 0, self.workers)
        with self.log_path.open("ab") as log:
            self.gunicorn = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                                             stdout=log, stderr=log, start_new_session=True)

    def restart(self) -> float:
        """Stop gunicorn (its quick stop: live requests are cut, as in a crash or a deploy)
        and start it again on the same port and Redis; the seconds it was away."""
        began = time.monotonic()
        proc, self.gunicorn = self.gunicorn, None
        stop_process(proc, _STOP_WAIT, sig=signal.SIGINT)
        self._spawn(self._env)
        if not self._wait_ready():
            raise RuntimeError("the service did not come back after the restart:\n"
                               + self.log_tail())
        return time.monotonic() - began


# --- plain calls of check-bot's own ----------------------------------------------------------


def _call(base: str, method: str, path: str, token: str | None = None, body: Any = None,
          timeout: float = 40.0) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        with contextlib.suppress(ValueError):
            return exc.code, json.loads(exc.read() or b"null")
        return exc.code, None


def call(base: str, method: str, path: str, token: str | None = None, body: Any = None,
         timeout: float = 40.0, tries: int = 60) -> Any:
    """check-bot's own request, waiting out a restart or a 429/503; the JSON answer."""
    for _ in range(tries):
        try:
            status, answer = _call(base, method, path, token, body, timeout)
        except OSError:
            time.sleep(0.5)
            continue
        if status in (429, 502, 503):
            time.sleep(0.5)
            continue
        if status >= 400:
            raise CheckError(f"{method} {path}: {status} {answer}")
        return answer
    raise CheckError(f"{method} {path}: no answer")


class CheckError(RuntimeError):
    """check-bot itself could not go on (not a verdict on the bot)."""


def register_bots(base: str, names: list[str]) -> list[dict[str, Any]]:
    """Register the checked bot and its opponents as bots of one owner (the first bot's:
    each later registration names it with that bot's token), so the seating below seats
    them at once: a game that names another owner's bot would wait for its acceptance
    (issue 23), and the check's opponent is no stranger."""
    first = call(base, "POST", "/bots", body={"name": names[0]})
    return [first, *(call(base, "POST", "/bots", token=first["token"], body={"name": n})
                     for n in names[1:])]


def seat_games(base: str, creator_token: str, players: int, seats: list[str],
               settings: dict[str, Any]) -> str:
    """Seat one of the check's games: ``seats`` is a bot id per seat (the checked bot and
    the check's opponent). Every game of the check is seated here, and only here, so this
    is the one place to change when the service's seating rules change."""
    body = {"players": players, "seats": seats, **settings}
    return call(base, "POST", "/games", token=creator_token, body=body)["id"]


# --- the opponent ---------------------------------------------------------------------------


class Opponent:
    """check-bot's side of a game: a thread per seat, playing at once (beg when it may, so
    the bot as dealer has to give one or run; otherwise a random legal action), with
    ``hooks`` run before its n-th move (1 = its first) — where a plan thinks or restarts."""

    def __init__(self, base: str, token: str, game_id: str, seats: list[int],
                 hooks: dict[int, Callable[[], None]], stop: threading.Event) -> None:
        self.base, self.token, self.game_id = base, token, game_id
        self.hooks, self.stop = hooks, stop
        self.moves = 0
        self._lock = threading.Lock()
        self.rng = random.Random(hash(game_id))
        self.threads = [threading.Thread(target=self._play, args=(s,), daemon=True,
                                         name=f"opponent-{s}") for s in seats]

    def start(self) -> Opponent:
        for t in self.threads:
            t.start()
        return self

    def _play(self, seat: int) -> None:
        path = f"/games/{self.game_id}"
        while not self.stop.is_set():
            try:
                view = call(self.base, "GET", f"{path}/turn?timeout=2&seat={seat}",
                            self.token)["view"]
            except CheckError:
                time.sleep(0.2)
                continue
            if view["status"] == "finished":
                return
            if not view["your_turn"]:
                continue
            with self._lock:
                self.moves += 1
                hook = self.hooks.pop(self.moves, None)
            if hook is not None:
                hook()
                continue  # look again: the game may have moved on meanwhile
            legal = view["legal_actions"]
            action = "beg" if "beg" in legal else self.rng.choice(legal)
            with contextlib.suppress(CheckError):
                call(self.base, "POST", f"{path}/actions", self.token,
                     {"action": action, "version": view["version"], "seat": seat})


# --- the check -------------------------------------------------------------------------------


class CheckRun:
    """What both kinds of check-bot run share (``Check`` for a pulling bot,
    ``check_webhook.WebhookCheck`` for a webhook bot): the service, the proxy and the bot's
    process, started and stopped alike, and the verdicts, one per situation wanted. A
    subclass says which situations it knows (``situations``, each ``name: (game, docs
    anchor, title)``), how to link each to the docs (``docs_link``) and judges each in a
    ``judge_<name>`` method."""

    situations: dict[str, tuple[str, str, str]]
    service: EmbeddedService
    proxy: CheckProxy | None
    bot: subprocess.Popen[bytes] | None
    bot_log: Path
    runs: dict[str, Any]
    only: set[str] | None
    quiet: bool
    stop: threading.Event

    @staticmethod
    def docs_link(situation: str) -> str:
        raise NotImplementedError

    def say(self, text: str) -> None:
        if not self.quiet:
            print(f"check-bot: {text}", file=sys.stderr, flush=True)

    @property
    def base(self) -> str:
        return self.service.url

    def wanted(self, game: str) -> bool:
        return self.only is None or any(self.situations[s][0] in (game, "*")
                                        for s in self.only)

    def close(self) -> None:
        self.stop.set()
        if self.bot is not None and self.bot.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(self.bot.pid, signal.SIGTERM)
            try:
                self.bot.wait(5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.killpg(self.bot.pid, signal.SIGKILL)
                self.bot.wait()
        if self.proxy is not None:
            self.proxy.stop()
        self.service.stop()

    def bot_log_tail(self) -> str:
        return log_tail(self.bot_log, 15)

    def verdicts(self) -> list[Result]:
        out: list[Result] = []
        for name, (game, _anchor, title) in self.situations.items():
            if self.only is not None and name not in self.only:
                continue
            if game != "*" and game not in self.runs:
                continue
            passed, what, fix = getattr(self, f"judge_{name}")()
            out.append(Result(name, passed, what, "" if passed else fix,
                              self.docs_link(name), title))
        return out


# gunicorn workers of a check's own service: one serves a single bot's games and the
# injected faults alike (gevent: a worker holds many requests at once), and each worker
# more imports the whole app again at every start and restart.
CHECK_WORKERS = 1


class Check(CheckRun):
    """One run of check-bot: the service, the proxy, the bot's process, the games."""

    situations = SITUATIONS
    docs_link = staticmethod(docs_link)

    def __init__(self, command: list[str] | str, only: set[str] | None = None,
                 quiet: bool = False, workers: int = CHECK_WORKERS) -> None:
        self.command = command
        self.only = only
        self.quiet = quiet
        self.workers = workers
        self.work = Path(tempfile.mkdtemp(prefix="allfours-check-bot-"))
        self.service = CheckService(admin_token=uuid.uuid4().hex,
                                    data_dir=self.work / "data", workers=workers)
        self.proxy: CheckProxy | None = None
        self.bot: subprocess.Popen[bytes] | None = None
        self.bot_log = self.work / "bot.log"
        self.runs: dict[str, GameRun] = {}
        self.idle: tuple[float, float] | None = None
        self.stop = threading.Event()

    def run(self) -> list[Result]:
        try:
            self.say("starting the service (embedded valkey-server + gunicorn)")
            self.service.start()
            host, port = self.service.host, int(self.service.port or 0)
            self.proxy = CheckProxy((host, port)).start()
            me, opponent = register_bots(self.base, ["checked-bot", "check-opponent"])
            self.me, self.opponent = me, opponent
            self.start_bot(me["token"])
            self.say(f"bot started; waiting for its first request at {self.proxy.url}")
            if not self.wait_first_request():
                exited = self.bot.poll() if self.bot else None
                why = (f"the bot's process exited (status {exited}) before any request"
                       if exited is not None else
                       f"the bot sent no request in {START_WAIT:.0f} s")
                return [Result("two_player", False, why,
                               "read ARENA_URL and ARENA_TOKEN from the environment and "
                               "start with GET /bots/me/turns", docs_link("two_player"))]
            began = time.monotonic()
            time.sleep(IDLE_WINDOW)
            self.idle = (began, time.monotonic())
            for name, plan in (("duel", self.plan_duel), ("clock", self.plan_clock),
                               ("team", self.plan_team)):
                if self.wanted(name):
                    self.say(f"game {name}")
                    self.runs[name] = self.play(name, plan)
            return self.verdicts()
        finally:
            self.close()

    def start_bot(self, token: str) -> None:
        env = {**os.environ, "ARENA_URL": self.proxy.url if self.proxy else "",
               "ARENA_TOKEN": token}
        shell = isinstance(self.command, str)
        with self.bot_log.open("ab") as log:
            self.bot = subprocess.Popen(self.command, shell=shell, env=env,
                                        stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                        start_new_session=True)

    def wait_first_request(self) -> bool:
        assert self.proxy is not None and self.bot is not None
        deadline = time.monotonic() + START_WAIT
        while time.monotonic() < deadline:
            if self.proxy.log:
                return True
            if self.bot.poll() is not None:
                return False
            time.sleep(0.1)
        return False

    # --- playing one game ------------------------------------------------------------------

    def play(self, name: str, plan: Callable[[GameRun], tuple[int, list[str], dict[str, Any],
                                                             dict[int, Callable[[], None]],
                                                             list[int]]]) -> GameRun:
        run = GameRun(name)
        players, seats, settings, hooks, opp_seats = plan(run)
        run.started = time.monotonic()
        run.game_id = seat_games(self.base, self.opponent["token"], players, seats, settings)
        self.install_rules(run)
        opp = Opponent(self.base, self.opponent["token"], run.game_id, opp_seats, hooks,
                       self.stop).start()
        deadline = run.started + GAME_CAP[name]
        while time.monotonic() < deadline:
            view = call(self.base, "GET", f"/games/{run.game_id}/turn?timeout=2")["view"]
            if view["status"] == "finished":
                run.finished = True
                break
            if self.bot is not None and self.bot.poll() is not None:
                run.marks["bot_exited"] = self.bot.returncode
                break
            record = call(self.base, "GET", f"/games/{run.game_id}/record")
            late = [t for t in record.get("timeouts") or [] if t["seat"] in run.bot_seats]
            if len(late) >= GIVE_UP + self._stale_allowance(run):
                run.marks["gave_up"] = len(late)  # the verdicts are certain: move on
                break
        run.ended = time.monotonic()
        run.opponent_moves = opp.moves
        run.record = call(self.base, "GET", f"/games/{run.game_id}/record")
        return run

    def bot_actions(self, run: GameRun) -> list[Exchange]:
        assert self.proxy is not None
        return [e for e in self.proxy.log if e.is_action and e.game == run.game_id]

    def install_rules(self, run: GameRun) -> None:
        """The proxy's rules for this game, counted in the bot's action requests to it."""
        assert self.proxy is not None
        proxy = self.proxy

        def nth(n: int) -> Callable[[Exchange], bool]:
            def match(ex: Exchange) -> bool:
                if not (ex.is_action and ex.game == run.game_id):
                    return False
                return sum(1 for e in proxy.log if e.is_action and e.game == run.game_id) > n
            return match

        if run.name == "duel":
            run.rules["rate_limited"] = proxy.add(Rule("rate_limited", nth(1), "answer",
                                                       status=429, retry_after=2))
            run.rules["unavailable"] = proxy.add(Rule("unavailable", nth(3), "answer",
                                                      status=503, retry_after=1))
            run.rules["lost_answer"] = proxy.add(Rule("lost_answer", nth(5), "drop"))
        if run.name == "clock":
            run.rules["stale_version"] = proxy.add(
                Rule("stale_version", nth(2), "hold", hold_until=self.moved_on(run),
                     hold_max=15.0))

    def moved_on(self, run: GameRun) -> Callable[[], bool]:
        """True once the game's version passed the one it had when the hold began: the
        clock (or anything else) wrote first."""
        first: list[int] = []

        def check() -> bool:
            try:
                status, view = _call(self.base, "GET", f"/games/{run.game_id}", timeout=5)
            except OSError:
                return False
            if status != 200:
                return False
            if not first:
                first.append(view["version"])
                return False
            if view["version"] > first[0]:
                run.marks["stale_from"] = first[0]
                run.marks["stale_to"] = view["version"]
                return True
            return False
        return check

    # --- the plans ---------------------------------------------------------------------------

    def plan_duel(self, run: GameRun) -> Any:
        run.bot_seats = (0,)

        def think() -> None:
            run.marks["think"] = [time.monotonic()]
            time.sleep(THINK)
            run.marks["think"].append(time.monotonic())

        def restart() -> None:
            self.say("restarting the service")
            run.marks["restart_at"] = time.monotonic()
            run.marks["restart_took"] = round(self.service.restart(), 2)
            run.marks["restart_done"] = time.monotonic()

        hooks = {3: think, 8: restart} if self.wanted_any(("no_busy_loop", "restart")) else {}
        settings = {"seed": 11, "variants": {"target": 7}, "move_limit": 10}
        return 2, [self.me["id"], self.opponent["id"]], settings, hooks, [1]

    def wanted_any(self, names: tuple[str, ...]) -> bool:
        return self.only is None or bool(self.only.intersection(names))

    def plan_clock(self, run: GameRun) -> Any:
        run.bot_seats = (1,)
        settings = {"seed": 24, "variants": HOUSE_RULES, "move_limit": CLOCK_LIMIT}
        return 2, [self.opponent["id"], self.me["id"]], settings, {}, [0]

    def plan_team(self, run: GameRun) -> Any:
        run.bot_seats = (0, 2)
        settings = {"seed": 5, "variants": {"target": 3}, "move_limit": 3}
        seats = [self.me["id"], self.opponent["id"], self.me["id"], self.opponent["id"]]
        return 4, seats, settings, {}, [1, 3]

    # --- the verdicts ------------------------------------------------------------------------

    def _played(self, run: GameRun) -> str:
        if run.finished:
            return ""
        if "gave_up" in run.marks:
            return (f"the clock played {run.marks['gave_up']} of the bot's moves, and "
                    "check-bot stopped waiting for the game")
        if "bot_exited" in run.marks:
            return f"the bot's process exited (status {run.marks['bot_exited']}) mid-game"
        return f"the game was not over after {GAME_CAP[run.name]:.0f} s"

    def _game_ok(self, run: GameRun, allowed_timeouts: int = 0) -> tuple[bool, str]:
        acted = sum(1 for e in self.bot_actions(run) if _ok(e.service_status))
        timeouts = run.bot_timeouts()
        if len(timeouts) > allowed_timeouts:
            plies = ", ".join(f"seat {t['seat']} ply {t['ply']}" for t in timeouts[:6])
            gave_up = "; check-bot stopped waiting for the game" if "gave_up" in run.marks \
                else ""
            return False, (f"the clock played {len(timeouts)} of the bot's moves ({plies}); "
                           f"its own actions applied: {acted}{gave_up}")
        problem = self._played(run)
        if problem:
            return False, f"{problem}; the bot's actions applied: {acted}"
        if acted == 0:
            return False, "the bot made no move of its own in this game"
        return True, (f"finished, {len(run.record.get('actions') or [])} actions, "
                      f"{acted} of them the bot's, scores {run.record.get('scores')}")

    def judge_two_player(self) -> tuple[bool, str, str]:
        ok, what = self._game_ok(self.runs["duel"])
        return ok, f"2 players, target 7: {what}", (
            "find games with GET /bots/me/turns, act on your turn with the view's "
            "version, and keep going until status is finished")

    def judge_four_player_two_seats(self) -> tuple[bool, str, str]:
        run = self.runs["team"]
        ok, what = self._game_ok(run)
        seats = sorted({t["seat"] for t in run.bot_timeouts()})
        extra = f" (timed out at seat(s) {seats})" if seats else ""
        return ok, f"4 players, the bot in seats 0 and 2: {what}{extra}", (
            "play every seat you hold: after your move, your partner's seat may be in "
            "turn — read `turn` or ask GET /bots/me/turns again; name the seat with "
            '"seat": N in the action')

    def judge_house_rules(self) -> tuple[bool, str, str]:
        run = self.runs["clock"]
        ok, what = self._game_ok(run, self._stale_allowance(run))
        return ok, f"variants {HOUSE_RULES}: {what}", (
            "choose only from legal_actions (the house rules change what is legal)")

    def judge_move_limit(self) -> tuple[bool, str, str]:
        run = self.runs["clock"]
        ok, what = self._game_ok(run, self._stale_allowance(run))
        return ok, f"move_limit {CLOCK_LIMIT} s: {what}", (
            "answer well within time_left: decide fast, and do not sleep between a turn "
            "and its action")

    def _stale_allowance(self, run: GameRun) -> int:
        return 1 if "stale_from" in run.marks else 0

    def judge_decisions(self) -> tuple[bool, str, str]:
        kinds = {"stand_or_beg": 0, "give_one_or_run": 0, "play": 0}
        clock = dict.fromkeys(kinds, 0)
        for run in self.runs.values():
            for e in self.bot_actions(run):
                if _ok(e.service_status) and isinstance(e.body, dict):
                    kinds[_kind(e.body.get("action"))] += 1
            stale = 1 if "stale_from" in run.marks else 0  # the clock's move check-bot caused
            for t in run.bot_timeouts()[stale:]:
                clock[_kind(t["action"])] += 1
        missed = [k for k, n in clock.items() if n]
        unseen = [k for k in kinds if not kinds[k] and not clock[k]]
        what = f"decided by the bot: {kinds}" + (
            f"; played by the clock: {clock}" if missed else "") + (
            f"; never met in these games: {', '.join(unseen)}" if unseen else "")
        return not missed and bool(kinds["play"]), what, (
            f"the clock decided {', '.join(missed) or 'every move'} for the bot: answer every "
            "decision kind (stand/beg, give_one/run_pack, a card) with one of legal_actions")

    def judge_stale_version(self) -> tuple[bool, str, str]:
        run = self.runs["clock"]
        rule = run.rules.get("stale_version")
        held = rule.fired if rule else None
        if held is None:
            return False, "the bot sent too few actions for the proxy to hold one", \
                "play the game"
        if "stale_from" not in run.marks:
            return False, "the held action's game never moved on", "-"
        body = held.body if isinstance(held.body, dict) else {}
        versioned = "version" in body or "if-match" in held.headers
        answer = f"{held.service_status} {held.problem or ''}".strip()
        later = [e for e in self.bot_actions(run) if e.seq > held.seq]
        repeats = sum(1 for e in later if e.body == held.body and e.key == held.key)
        moved = any(_ok(e.service_status) for e in later)
        what = (f"held the bot's action {body.get('action')!r} (version "
                f"{body.get('version', 'none')}) until the game moved on (the clock played: "
                f"v{run.marks['stale_from']}→v{run.marks['stale_to']}); the service answered "
                f"{answer}; re-sent unchanged "
                f"{repeats}x; acted afterwards: {moved}")
        if not versioned:
            return False, what, ('send the view\'s "version" (or If-Match) with every '
                                 "action, so a stale decision is refused, not applied")
        if held.service_status not in (409, 412):
            return False, what, "send the version of the view you decided on"
        if repeats > 1 or not moved:
            return False, what, ("after a 409/412, read the view again and decide again; "
                                 "do not resend the same action")
        return True, what, ""

    def _next_after(self, ex: Exchange, same_path: bool) -> Exchange | None:
        assert self.proxy is not None
        for e in self.proxy.log:
            if e.seq > ex.seq and (not same_path or (e.path == ex.path
                                                     and e.method == ex.method)):
                return e
        return None

    def _waited(self, name: str, same_path: bool) -> tuple[bool, str, str]:
        run = self.runs["duel"]
        rule = run.rules[name]
        ex = rule.fired
        if ex is None or ex.end is None:
            return False, "the bot sent too few actions to be refused", "play the game"
        nxt = self._next_after(ex, same_path)
        if nxt is None:
            return False, f"refused {rule.status}; the bot sent nothing after it", (
                f"after {rule.status}, wait Retry-After seconds and send the same request")
        gap = nxt.start - ex.end
        what = (f"answered {rule.status} with Retry-After: {rule.retry_after} to "
                f"{ex.method} {ex.path}; the bot's next request "
                f"{'to it ' if same_path else ''}came {gap:.2f} s later "
                f"({nxt.method} {nxt.path}, key {_key_word(ex, nxt)})")
        if gap < rule.retry_after - SLACK:
            return False, what, (f"wait at least Retry-After ({rule.retry_after} s) before "
                                 "the next request")
        if nxt.is_action and nxt.body == ex.body and nxt.key != ex.key:
            return False, what, "retry the same action with the same Idempotency-Key"
        return True, what, ""

    def judge_rate_limited(self) -> tuple[bool, str, str]:
        return self._waited("rate_limited", same_path=False)

    def judge_unavailable(self) -> tuple[bool, str, str]:
        return self._waited("unavailable", same_path=True)

    def judge_lost_answer(self) -> tuple[bool, str, str]:
        run = self.runs["duel"]
        ex = run.rules["lost_answer"].fired
        if ex is None:
            return False, "the bot sent too few actions to lose an answer", "play the game"
        applied = ex.service_status
        later = [e for e in self.bot_actions(run) if e.seq > ex.seq]
        # the first retry the service answered (one sent while it restarts finds nobody), and
        # every try before it must be the same request
        answered = next((i for i, e in enumerate(later) if e.service_status is not None),
                        len(later) - 1)
        tries = later[:answered + 1]
        nxt = tries[-1] if tries else None
        odd = next((e for e in tries if e.key != ex.key or e.body != ex.body), None)
        if odd is not None:
            nxt = odd
        body = ex.body.get("action") if isinstance(ex.body, dict) else None
        if nxt is None:
            return False, (f"the service applied {body!r} ({applied}) and the answer was "
                           "lost; the bot never sent an action again in this game"), \
                "retry an unanswered action: the same request with the same key"
        same_key = ex.key is not None and nxt.key == ex.key
        what = (f"the service applied {body!r} ({applied}), the proxy cut the connection; "
                f"the bot's next action: key {_key_word(ex, nxt)}"
                f", body {'same' if nxt.body == ex.body else 'different'}"
                f"{f' (after {len(tries) - 1} unanswered tries)' if len(tries) > 1 else ''}, "
                f"answered {nxt.service_status} {nxt.problem or ''}".rstrip())
        if not same_key or nxt.body != ex.body:
            return False, what, ("when a request goes unanswered, send the same request with "
                                 "the same Idempotency-Key: the service answers it as the "
                                 "first time and applies it once")
        first_v = ex.answer.get("version") if isinstance(ex.answer, dict) else None
        again_v = nxt.answer.get("version") if isinstance(nxt.answer, dict) else None
        if not _ok(nxt.service_status):
            return False, what, "retry with the same key and body"
        return True, what + (f": the view of v{again_v}, applied once (the lost answer "
                             f"had v{first_v})"), ""

    def judge_restart(self) -> tuple[bool, str, str]:
        run = self.runs["duel"]
        at = run.marks.get("restart_done")
        if at is None:
            return False, "the game ended before the restart", "play the game"
        after = [e for e in self.bot_actions(run) if e.start > at and _ok(e.service_status)]
        ok, what = self._game_ok(run)
        what = (f"the service was away {run.marks['restart_took']} s; the bot's actions "
                f"applied after it: {len(after)}; {what}")
        return ok and bool(after), what, (
            "treat a refused or reset connection as transient: wait a little and try again "
            "(the same key for an action); do not exit")

    def judge_illegal_action(self) -> tuple[bool, str, str]:
        bad: list[str] = []
        loops = 0
        for run in self.runs.values():
            acts = self.bot_actions(run)
            for e in acts:
                if e.injected or e.problem not in ("/problems/illegal-action",
                                                   "/problems/not-your-turn"):
                    continue
                action = e.body.get("action") if isinstance(e.body, dict) else None
                bad.append(f"{action!r} in {run.name}: {e.problem}")
                loops = max(loops, sum(1 for o in acts if o.seq > e.seq and o.body == e.body))
        what = (f"{len(bad)} refused as illegal or out of turn" + (f": {bad[:4]}" if bad else "")
                + (f"; the same body re-sent up to {loops}x" if loops else ""))
        return not bad, what, ("send only one of the view's legal_actions, on your turn; after "
                               "a 409 read the view again instead of re-sending")

    def judge_idempotency_key(self) -> tuple[bool, str, str]:
        acts = [e for run in self.runs.values() for e in self.bot_actions(run)]
        missing = [e for e in acts if not e.key or len(e.key) > 100]
        return not missing and bool(acts), (
            f"{len(acts) - len(missing)} of {len(acts)} actions carried an Idempotency-Key"), (
            "send an Idempotency-Key header (1-100 characters, new per decision) with every "
            "action, and the same one on its retries")

    def _rate(self, since: float, until: float) -> tuple[int, float]:
        assert self.proxy is not None
        n = len(self.proxy.exchanges(since, until))
        return n, n / max(0.001, until - since)

    def judge_no_busy_loop(self) -> tuple[bool, str, str]:
        windows = []
        if self.idle:
            windows.append(("no game at all", *self.idle))
        think = self.runs["duel"].marks.get("think")
        if think and len(think) == 2:
            windows.append(("the opponent thinking", think[0] + 0.3, think[1]))
        parts, ok = [], True
        for label, a, b in windows:
            n, rate = self._rate(a, b)
            parts.append(f"{label}: {n} requests in {b - a:.1f} s ({rate:.1f}/s)")
            ok = ok and rate <= BUSY_RATE
        return ok and bool(windows), "; ".join(parts) or "no quiet time was measured", (
            f"while not in turn, long-poll (GET /bots/me/turns?timeout=, GET /games/{{id}}/turn"
            f"?timeout=, or ?wait= on the action) instead of polling: at most {BUSY_RATE:.0f} "
            "requests a second")

    def judge_requests_per_move(self) -> tuple[bool, str, str]:
        assert self.proxy is not None
        moves = sum(1 for run in self.runs.values() for e in self.bot_actions(run)
                    if _ok(e.service_status))
        total = len(self.proxy.log)
        per = total / moves if moves else float("inf")
        return per <= MAX_PER_MOVE, (f"{total} requests for {moves} moves: {per:.1f} per "
                                     f"move (the project's bots: 1.1-1.9)"), (
            f"at most {MAX_PER_MOVE:.0f} requests per move: act with ?wait= or long-poll "
            "for the next turn instead of polling")


def _key_word(first: Exchange, then: Exchange) -> str:
    if then.key and then.key == first.key:
        return "same"
    return "new" if then.key else "none"


def _kind(action: object) -> str:
    if action in ("stand", "beg"):
        return "stand_or_beg"
    return "give_one_or_run" if action in ("give_one", "run_pack") else "play"


def _ok(status: int | None) -> bool:
    return status is not None and 200 <= status < 300


# --- the command -----------------------------------------------------------------------------


def report_text(results: list[Result], seconds: float) -> str:
    failed = [r for r in results if not r.passed]
    lines = [f"allfours check-bot: {len(results)} situations, {len(results) - len(failed)} "
             f"passed, {len(failed)} failed ({seconds:.1f} s)"]
    for r in results:
        lines.append(f"  {'PASS' if r.passed else 'FAIL'}  {r.situation:<22} {r.what}")
        if not r.passed:
            lines.append(f"        fix: {r.fix}")
            lines.append(f"        see: {r.docs}")
    return "\n".join(lines)


def run_pulling(command: list[str] | str, only: set[str] | None, quiet: bool,
                json_path: str | None) -> int:
    """``allfours check-bot -- CMD``: the pulling bot put through every situation (or
    ``only`` these); the exit status (0 passed, 1 a situation failed, 2 no check ran)."""
    if only:
        unknown = only - set(SITUATIONS)
        if unknown:
            print(f"allfours check-bot: unknown situation(s) {sorted(unknown)}; known: "
                  f"{', '.join(SITUATIONS)}", file=sys.stderr)
            return 2
    logging.getLogger("clients").setLevel(logging.ERROR)
    began = time.monotonic()
    check = Check(command, only, quiet=quiet)
    try:
        results = check.run()
    except KeyboardInterrupt:
        shutil.rmtree(check.work, ignore_errors=True)
        print("allfours check-bot: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # check-bot's own failure: say so, not as a verdict
        shutil.rmtree(check.work, ignore_errors=True)
        print(f"allfours check-bot: could not run the check: {exc}", file=sys.stderr)
        return 2
    seconds = time.monotonic() - began
    print(report_text(results, seconds), flush=True)
    failed = [r for r in results if not r.passed]
    if failed:
        print("the bot's last output lines:\n" + check.bot_log_tail(), flush=True)
    if json_path:
        Path(json_path).write_text(json.dumps({
            "passed": not failed, "seconds": round(seconds, 2),
            "situations": [asdict(r) for r in results],
            "bot_log_tail": check.bot_log_tail()}, indent=2) + "\n")
    shutil.rmtree(check.work, ignore_errors=True)
    return 1 if failed else 0
