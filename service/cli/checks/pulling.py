"""``allfours check-bot -- CMD``: put a pulling bot through the situations real play brings,
before it competes.

Why this shape: a bot author needs to know, on their own machine and in their own CI,
that their bot survives what the service really does — a 429, a 503, an answer lost
after the action was applied, a stale version, a restart, a short move limit, two seats
in one game, an invitation, several games at once, a time bank — and each of those is
rare in a friendly test game. So check-bot starts its own service (the embedded
valkey-server and gunicorn with the project's worker, as ``allfours serve`` does), puts a
real TCP proxy (:mod:`service.cli.checks.proxy`) between the bot and it, runs the bot's
own command with ``ARENA_URL`` (the proxy) and ``ARENA_TOKEN`` in its environment, and
plays games against an opponent of its own while the proxy injects each situation for real
and logs every request. Nothing of the bot is mocked: it meets real sockets and the
service's real answers, and every verdict is read from the proxy's log, the games'
timelines and their records. The games and their phases: :mod:`.situations`; the
verdicts: :mod:`.judges`.
"""

from __future__ import annotations

import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from service.cli.checks.games import GameRun, Opponent, plain, sharp
from service.cli.checks.judges import PullJudges
from service.cli.checks.proxy import CheckProxy, Exchange, Rule
from service.cli.checks.report import Result
from service.cli.checks.runner import CheckRun, check_unknown, run_command
from service.cli.checks.service import (
    CHECK_WORKERS,
    CheckError,
    CheckService,
    call,
    raw_call,
    register_bots,
    register_stranger,
    seat_game,
)
from service.cli.checks.situations import (
    BANK_HOLD,
    GAME_CAP,
    GAMES,
    GIVE_UP,
    IDLE_WINDOW,
    INVITE_WAIT,
    MULTI_THINK,
    SITUATIONS,
    START_WAIT,
    THINK,
    docs_link,
)


class Check(PullJudges, CheckRun):
    """One run of check-bot: the service, the proxy, the bot's process, the games."""

    situations = SITUATIONS
    docs_link = staticmethod(docs_link)

    def __init__(self, command: list[str] | str, only: set[str] | None = None,
                 quiet: bool = False, workers: int = CHECK_WORKERS) -> None:
        self.command = command
        self.only = only
        self.quiet = quiet
        self.work = Path(tempfile.mkdtemp(prefix="allfours-check-bot-"))
        self.service = CheckService(admin_token=uuid.uuid4().hex,
                                    data_dir=self.work / "data", workers=workers)
        self.proxy: CheckProxy | None = None
        self.bot = None
        self.bot_log = self.work / "bot.log"
        self.runs: dict[str, GameRun] = {}
        self.idle: tuple[float, float] | None = None
        self.quiet_window: tuple[float, float] | None = None
        self.stop = threading.Event()
        self.restarts: list[tuple[float, float]] = []
        self.exited_at: float | None = None
        self.invite: dict[str, Any] = {}
        self.notes: dict[str, dict[str, Any]] = {}
        self.failures: list[Exception] = []

    @property
    def log(self) -> list[Exchange]:
        assert self.proxy is not None
        return list(self.proxy.log)

    def run(self) -> list[Result]:
        try:
            self.say("starting the service (embedded valkey-server + gunicorn)")
            self.service.start()
            host, port = self.service.host, int(self.service.port or 0)
            self.proxy = CheckProxy((host, port)).start()
            self.me, self.opponent = register_bots(self.base, ["checked-bot", "check-opponent"])
            self.stranger = register_stranger(self.base, "check-stranger")
            self.start_bot({"ARENA_URL": self.proxy.url, "ARENA_TOKEN": self.me["token"]})
            threading.Thread(target=self.await_exit, daemon=True, name="bot-exit").start()
            self.say(f"bot started; waiting for its first request at {self.proxy.url}")
            if not self.wait_first_request():
                exited = self.bot.poll() if self.bot else None
                why = (f"the bot's process exited (status {exited}) before any request"
                       if exited is not None else
                       f"the bot sent no request in {START_WAIT:.0f} s")
                return [Result("two_player", False, why,
                               "read ARENA_URL and ARENA_TOKEN from the environment and "
                               "start with GET /bots/me/turns", docs_link("two_player"),
                               SITUATIONS["two_player"][2],
                               cause="exited" if exited is not None else "other",
                               real_play="it plays no game: every one is played by the clock")]
            began = time.monotonic()
            time.sleep(IDLE_WINDOW)
            self.idle = (began, time.monotonic())
            for phase in (1, 2):
                names = [g for g, spec in GAMES.items()
                         if spec[3] == phase and self.wanted(g.split("-")[0])]
                if names:
                    self.say(f"games {', '.join(names)}")
                    self.play_phase(names)
            return self.verdicts()
        finally:
            self.close()

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

    def await_exit(self) -> None:
        """Note the moment the bot's process exits (what it last heard is read then)."""
        if self.bot is not None:
            self.bot.wait()
            if self.exited_at is None and not self.stop.is_set():
                self.exited_at = time.monotonic()

    def bot_gone(self) -> bool:
        """True once the bot's process has exited (noting when it was first seen gone)."""
        if self.bot is None or self.bot.poll() is None:
            return False
        if self.exited_at is None:
            self.exited_at = time.monotonic()
        return True

    # --- one phase: its games side by side -------------------------------------------------

    def play_phase(self, names: list[str]) -> None:
        """The phase's games side by side, each followed by a watcher to its end."""
        runs = [self.seat(name) for name in names]
        watchers = [self.watcher(run) for run in runs]
        if any(self.restarting(run) for run in runs):
            threading.Thread(target=self.restart, daemon=True, name="restart").start()
        for w in watchers:
            if w.is_alive():
                w.join()
        if self.failures:  # check-bot's own fault: no verdict on the bot from it
            raise CheckError(f"watching a game failed: {self.failures[0]!r}")

    def watcher(self, run: GameRun) -> threading.Thread:
        def watch() -> None:
            try:
                self.watch(run)
            except Exception as exc:
                self.failures.append(exc)
        thread = threading.Thread(target=watch, daemon=True, name=f"watch-{run.name}")
        if run.game_id:
            thread.start()
        return thread

    def seat(self, name: str) -> GameRun:
        players, bot_seats, settings, _phase = GAMES[name]
        run = GameRun(name, players, bot_seats, dict(settings))
        self.runs[name] = run
        hooks = self.hooks(run)
        run.started = time.monotonic()
        if name == "invited":
            if not self.invite_bot(run):
                run.ended = time.monotonic()
                return run
            creator = self.stranger
        else:
            seats = [self.me["id"] if s in bot_seats else self.opponent["id"]
                     for s in range(players)]
            run.game_id = seat_game(self.base, self.opponent["token"], players, seats,
                                    run.settings)
            creator = self.opponent
        self.install_rules(run)
        strategy = sharp if name == "house4" else plain
        opp = Opponent(self.base, creator["token"], run.game_id,
                       [s for s in range(players) if s not in bot_seats], hooks, self.stop,
                       strategy, delay=MULTI_THINK if name.startswith("multi-") else 0.0).start()
        run.marks["opponent"] = opp
        return run

    def invite_bot(self, run: GameRun) -> bool:
        """The stranger creates a game naming the checked bot: an invitation, or a 403 when
        the bot's policy refuses strangers."""
        body = {"players": 2, "seats": [self.stranger["id"], self.me["id"]], **run.settings}
        status, answer = raw_call(self.base, "POST", "/games", self.stranger["token"], body)
        if status == 403 and isinstance(answer, dict) and \
                str(answer.get("type", "")).endswith("invitation-refused"):
            self.invite["refused"] = answer.get("detail") or "invitation-refused"
            return False
        if status >= 400:
            raise CheckError(f"POST /games (the stranger's invitation): {status} {answer}")
        run.game_id = answer["id"]
        self.invite["created"] = time.monotonic()
        return True

    def watch(self, run: GameRun) -> None:
        """Follow the game to its end (or until its verdicts are certain), noting every
        ply's window; then read its record."""
        cap = GAME_CAP[run.name.split("-")[0]]
        version, checked, seen_late = 0, 0.0, 0
        path = f"/games/{run.game_id}"
        while not self.stop.is_set() and time.monotonic() < run.started + cap:
            try:
                view = call(self.base, "GET", f"{path}/turn?after={version}&timeout=3")["view"]
            except CheckError:
                time.sleep(0.2)
                continue
            run.note(view)
            version = view["version"]
            if view["status"] == "finished":
                run.finished = True
                if view.get("cancelled"):
                    run.marks["cancelled"] = view["cancelled"]
                break
            if self.bot_gone():
                run.marks["bot_exited"] = self.bot.returncode if self.bot else None
                break
            if view["status"] == "waiting" and time.monotonic() - run.started > INVITE_WAIT:
                run.marks["unanswered"] = True
                break
            # the record (a replay of the game: not cheap) only once a seat of the bot's may
            # have been played by the clock: its turn outlived its deadline
            late = self.late_turns(run)
            if late > seen_late and time.monotonic() - checked > 1.0:
                checked, seen_late = time.monotonic(), late
                run.record = call(self.base, "GET", f"{path}/record")
                counted = [t for t in self.timeouts(run) if t.counted] \
                    if run.bot_timeouts() else []
                if len(counted) >= GIVE_UP:
                    run.marks["gave_up"] = len(counted)  # the verdicts are certain
                    break
        run.ended = time.monotonic()
        opp = run.marks.get("opponent")
        run.opponent_moves = opp.moves if opp else 0
        run.record = call(self.base, "GET", f"{path}/record")
        if run.settings.get("time_bank"):
            mine = call(self.base, "GET", f"{path}?seat={run.bot_seats[0]}", self.me["token"])
            run.marks["bank_left"] = mine.get("bank_left")

    @staticmethod
    def late_turns(run: GameRun) -> int:
        """How many of the bot's turns were seen still open past their deadline."""
        entries = sorted(run.timeline.values(), key=lambda e: e.ply)
        now = time.time()
        late = 0
        for e, after in zip(entries, [*entries[1:], None][:len(entries)], strict=True):
            if e.turn in run.bot_seats and e.deadline is not None and \
                    (after.wall if after else now) >= e.deadline:
                late += 1
        return late

    def restarting(self, run: GameRun) -> bool:
        return run.name in ("duel", "team") and self.wanted_any(
            ("restart", "four_player_reconnect"))

    # --- the plans: hooks in the opponent's moves, rules in the proxy ----------------------

    def hooks(self, run: GameRun) -> dict[int, Callable[[], None]]:
        hooks: dict[int, Callable[[], None]] = {}
        if run.name == "duel" and self.wanted_any(("no_busy_loop",)):
            hooks[3] = self.think
        return hooks

    def think(self) -> None:
        """The duel's opponent holds its move: what the bot asks about that game meanwhile
        (and its turn polls that find nothing) is measured; a bot that waits well sends
        almost nothing."""
        began = time.monotonic() + 0.3
        time.sleep(THINK + 0.3)
        self.quiet_window = (began, time.monotonic())

    def restart(self) -> None:
        """Once the faults before it are over in each game of the phase (the duel's lost
        answer, the team game's stale version: both games are then mid-way), the service is
        stopped and started again: a reconnect for every game in play."""
        # the team game's stale version when it is played (the duel, longer, is mid-way
        # then too), else the duel's lost answer
        waits = [(self.runs[g], rule) for g, rule in (("team", "stale_version"),
                                                       ("duel", "lost_answer"))
                 if g in self.runs and rule in self.runs[g].rules][:1]
        until = time.monotonic() + 25.0
        # the team game's held action may stay held through the restart: its clock plays
        # once the service is back, and the hold ends then
        while time.monotonic() < until and not self.stop.is_set() and any(
                not r.ended and r.rules[rule].fired is None for r, rule in waits):
            time.sleep(0.1)
        if self.stop.is_set() or all(r.ended for r, _ in waits):
            return
        self.say("restarting the service")
        down = time.monotonic()
        took = round(self.service.restart(), 2)
        up = time.monotonic()
        self.restarts.append((down, up))
        for r in self.runs.values():
            if r.game_id and not r.ended and self.restarting(r):
                r.marks.update(restart_at=down, restart_done=up, restart_took=took)

    def bot_actions(self, run: GameRun) -> list[Exchange]:
        return [e for e in self.log if e.is_action and e.game == run.game_id]

    def install_rules(self, run: GameRun) -> None:
        """The proxy's rules for this game, counted in the bot's actions in it (per seat in
        the team game, where each fault lands on a seat of its own)."""
        assert self.proxy is not None
        proxy = self.proxy

        def nth(n: int, seat: int | None = None,
                when: Callable[[], bool] | None = None) -> Callable[[Exchange], bool]:
            def match(ex: Exchange) -> bool:
                if not (ex.is_action and ex.game == run.game_id):
                    return False
                if seat is not None and run.seat_of(ex) != seat:
                    return False
                if when is not None and not when():
                    return False
                return sum(1 for e in proxy.log if e.is_action and e.game == run.game_id
                           and e.seq < ex.seq
                           and (seat is None or run.seat_of(e) == seat)) >= n
            return match

        def add(rule: Rule) -> None:
            run.rules[rule.name] = proxy.add(rule)

        if run.name == "duel":
            add(Rule("rate_limited", nth(1), "answer", status=429, retry_after=2))
            add(Rule("unavailable", nth(3), "answer", status=503, retry_after=1))
            add(Rule("lost_answer", nth(5), "drop"))
        elif run.name == "team":
            add(Rule("rate_limited", nth(0, seat=2), "answer", status=429, retry_after=2))
            add(Rule("unavailable", nth(1, seat=0), "answer", status=503, retry_after=1))
            add(Rule("stale_version", nth(2, seat=2), "hold", hold_until=self.moved_on(run),
                     hold_max=15.0))
            after_restart = (lambda: "restart_done" in run.marks) if self.restarting(run) \
                else None
            add(Rule("lost_answer", nth(3, seat=2, when=after_restart), "drop"))
        elif run.name == "clock":
            add(Rule("stale_version", nth(2), "hold", hold_until=self.moved_on(run),
                     hold_max=15.0))
        elif run.name == "bank":
            add(Rule("bank_delay", nth(2), "hold", hold_max=BANK_HOLD))

    def moved_on(self, run: GameRun) -> Callable[[], bool]:
        """True once the game's version passed the one it had when the hold began: the
        clock (or anything else) wrote first."""
        first: list[int] = []

        def check() -> bool:
            try:
                status, view = raw_call(self.base, "GET", f"/games/{run.game_id}", timeout=5)
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


def run_pulling(command: list[str] | str, only: set[str] | None, quiet: bool,
                json_path: str | None) -> int:
    """``allfours check-bot -- CMD``: the pulling bot put through every situation (or
    ``only`` these); the exit status (0 passed, 1 a situation failed, 2 no check ran)."""
    if check_unknown(only, SITUATIONS):
        return 2
    return run_command(lambda: Check(command, only, quiet=quiet), json_path)
