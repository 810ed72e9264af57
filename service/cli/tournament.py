"""``allfours tournament``: run a whole tournament from one command.

    allfours tournament --bots random,heuristic,search --format round-robin --games 20

What it does, in order:

1. **The service.** With ``--server`` it uses that service (creating a tournament needs its
   admin token: ``--admin-token`` or ``$ARENA_ADMIN_TOKEN``). Without it, it starts one of
   its own exactly as ``allfours serve`` does — an embedded ``valkey-server`` (in a
   temporary directory, or ``--data-dir``) and gunicorn with the same command line and
   config — on a free port, with a freshly generated admin token, the default rate limits
   (sized so that the bundled runners never meet them), and gunicorn's log in a file so
   it cannot tear the progress display. It waits for ``/readyz``.
2. **The entrants.** First the settings are checked against the service's own request
   schema (``service.http.schemas.tournaments.TournamentCreate``: ranges and size limits)
   and, with ``--server``, by that service (a ``POST /tournaments`` without entrants, which
   can never create one, answers 403 for a wrong admin token and 422 naming each refused field): a
   refusal names each option and why, and nothing is registered. Then one bot account per
   entrant (``--bots a,b,c``; a strategy named twice
   becomes ``heuristic`` and ``heuristic-2``), each with its own token and its own client.
3. **The tournament**, created through ``POST /tournaments`` with the admin token; the
   service pairs and schedules every game itself. Duplicate deals (``--duplicate``, the
   default wherever possible) are the service's bridge way: each deal of a round is played
   at every table of the round by different entrants, so they need 4 entrants or more;
   with fewer, ``--trusted`` replays each deal with the teams swapped (twins) — fine for
   comparing your own strategies, which this command runs in-process, never for bots you
   do not control. ``--duplicate`` with fewer than 4 entrants and no ``--trusted`` is
   refused before anything is registered.
4. **The bots play as real HTTP clients**: one ``BotRunner`` per entrant in a thread of
   this process, finding its turns through the turn long-poll like any other bot. In a
   4-player game an entrant holds both seats of its team and its runner plays both.
5. **Progress** comes from polling ``GET /tournaments/{id}`` (and one ``GET /games`` page
   for the live scores): a bar of games finished out of the total, a line per live game
   and a line per entrant (``rich``); ``--quiet`` prints a plain line per finished round
   instead.
6. **The end**: for a knockout, the bracket (``bracket_tables``: every round, match, score
   and who went through, and why); the standings table (ratings as mu ± sigma and the
   conservative ordinal mu − 3 sigma; a knockout's place; the ranking order is in
   ``RANKING_HELP``, shown by ``--help``) and a JSON
   file with the settings, every game with its result, its place in the rating order
   (``recorded``) and both entrants' ratings before and after it (``rating``), the
   standings and the rating history.

Whatever happens — success, an error, Ctrl-C, SIGTERM — the runners are stopped and then,
when the service is our own, gunicorn and then valkey (the order ``allfours serve``
uses), each with a bounded wait and SIGKILL as the last resort. Both children are also
started with ``PR_SET_PDEATHSIG`` (``die_with_parent``), so even a SIGKILL of this
process leaves nothing running.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import FrameType
from typing import Any

from service.cli.serve import _STOP_WAIT, gunicorn_command
from service.storage.embedded import (
    EmbeddedRedis,
    EmbeddedRedisError,
    free_port,
    log_tail,
    spawn_child,
    stop_process,
    wait_started,
)

READY_TIMEOUT = 60.0
POLL_EVERY = 0.5  # seconds between looks at the tournament
RUNNER_POLL = 1.0  # a runner's turn long-poll: also how soon it notices a stop
FORMATS = {"round-robin": "round_robin", "round_robin": "round_robin", "swiss": "swiss",
           "knockout": "knockout"}
_NAME_OK = re.compile(r"[^A-Za-z0-9 ._-]+")


class TournamentCliError(RuntimeError):
    """A failure worth one line on stderr and exit status 1."""


def _say(message: str) -> None:
    print(f"allfours tournament: {message}", file=sys.stderr, flush=True)


# --- entrants -------------------------------------------------------------------------------


def parse_bots(spec: str) -> list[tuple[str, str]]:
    """``"random,heuristic,heuristic,pkg.mod:MyBot"`` → ``[(entrant name, strategy)]``.

    Names are the strategy (the class name for ``module:Class``), made distinct by a
    ``-2``, ``-3``... suffix, and fit the service's bot-name pattern.
    """
    strategies = [s.strip() for s in spec.split(",") if s.strip()]
    if len(strategies) < 2:
        raise TournamentCliError("--bots needs at least two entrants, e.g. random,heuristic")
    seen: dict[str, int] = {}
    out = []
    for strategy in strategies:
        base = strategy.rsplit(":", 1)[-1].rsplit(".", 1)[-1] if ":" in strategy else strategy
        base = _NAME_OK.sub("-", base).strip(" -")[:30] or "bot"
        seen[base] = seen.get(base, 0) + 1
        out.append((base if seen[base] == 1 else f"{base}-{seen[base]}", strategy))
    return out


def check_duplicate(args: argparse.Namespace, entrants: int) -> None:
    """Refuse, before anything is registered, what the service would refuse about
    duplicate deals (see ``service.arena.tournaments``)."""
    if args.duplicate and not args.trusted and entrants < 4:
        raise TournamentCliError(
            f"--duplicate needs at least 4 entrants (two tables a round, so each deal is "
            f"replayed only by other entrants); with {entrants}, add --trusted to replay "
            f"each deal with the teams swapped (your own bots only), or --no-duplicate")
    if args.trusted and args.duplicate is not False and args.games % 2:
        raise TournamentCliError(f"--games {args.games} is odd: trusted duplicate deals "
                                 "come in twins (each deal twice, the teams swapped)")


# each field of the service's TournamentCreate, as this command's option
OPTION_OF = {"entrants": "--bots", "games_per_pairing": "--games", "rounds": "--rounds",
             "players": "--players", "parallel": "--parallel", "move_limit": "--move-limit",
             "variants": "--variant", "name": "--name", "seed": "--seed",
             "duplicate": "--duplicate", "trusted": "--trusted", "format": "--format",
             "no_show": "--no-show", "max_timeouts": "--max-timeouts"}


def tournament_settings(args: argparse.Namespace, variants: dict[str, Any]) -> dict[str, Any]:
    """The body of ``POST /tournaments`` but for its entrants and format."""
    settings: dict[str, Any] = {
        "name": args.name, "players": args.players, "games_per_pairing": args.games,
        "parallel": args.parallel,
    }
    if args.duplicate is not None:  # omitted: the service's default, where possible
        settings["duplicate"] = args.duplicate
    if args.trusted:
        settings["trusted"] = True
    if variants:
        settings["variants"] = variants
    if args.move_limit is not None:
        settings["move_limit"] = args.move_limit
    if args.rounds is not None:
        settings["rounds"] = args.rounds
    if args.seed is not None:
        settings["seed"] = args.seed
    if args.no_show is not None:  # 0: no such rule (omitted: the service's default)
        settings["no_show"] = args.no_show or None
    if args.max_timeouts is not None:
        settings["max_timeouts"] = args.max_timeouts
    return settings


def _reasons(errors: dict[str, Any], body: dict[str, Any], prefix: str = "") -> list[str]:
    """``errors`` of a 422 (field → messages, nested for variants) as lines naming this
    command's options and what was given."""
    lines = []
    for field, said in errors.items():
        if isinstance(said, dict):
            lines += _reasons(said, body.get(field) or {}, f"{prefix}{field}.")
            continue
        name = prefix + str(field)
        option = OPTION_OF.get(name, f"--variant {name.split('.', 1)[-1]}" if prefix else name)
        value = body.get(field)
        given = (f" ({len(value)} entrants)" if name == "entrants" and value is not None
                 else f" {value}" if isinstance(value, (int, float, str)) else "")
        for message in said if isinstance(said, list) else [said]:
            lines.append(f"  {option}{given}: {message}")
    return lines


def refusal(errors: dict[str, Any], body: dict[str, Any], before: bool = True
            ) -> TournamentCliError:
    head = ("the service would refuse this tournament; nothing was started or registered:"
            if before else "the service refused the tournament:")
    return TournamentCliError("\n".join([head, *_reasons(errors, body)]))


def check_settings(fmt: str, entrants: int, settings: dict[str, Any]) -> None:
    """Refuse, before anything is started or registered, what the service would refuse:
    the body is checked by the service's own request schema (``TournamentCreate``: every
    field's range and the size limits — entrants, rounds, games per pairing, total games)
    with stand-in entrant ids."""
    from marshmallow import ValidationError

    from service.http.schemas.tournaments import TournamentCreate

    body = {**settings, "format": fmt, "entrants": [f"{i:012x}" for i in range(entrants)]}
    try:
        TournamentCreate().load(body)
    except ValidationError as exc:
        raise refusal(exc.normalized_messages(), body) from None


def check_with_service(viewer: Any, admin_token: str, fmt: str,
                       settings: dict[str, Any]) -> None:
    """Before registering anyone, ask the service itself: ``POST /tournaments`` with no
    entrants can never create a tournament, and answers 403 for a wrong admin token or 422
    naming every field it refuses — ``entrants`` (none given) and any other, by the
    limits of that service, which may be another version than this command."""
    from clients.api import ArenaError

    try:
        viewer.create_tournament([], fmt, admin_token=admin_token, **settings)
    except ArenaError as exc:
        if exc.status == 422 and exc.errors is not None:
            others = {k: v for k, v in exc.errors.items() if k != "entrants"}
            if others:
                raise refusal(others, settings) from None
            return
        raise TournamentCliError(f"{viewer.base_url}: {exc}; nothing was registered") from None
    raise TournamentCliError("the service created a tournament without entrants")


def build_strategy(spec: str, move_time: float) -> Any:
    """The strategy object for one entrant; the search bot gets its per-move budget."""
    from clients.strategies import get_strategy

    try:
        return get_strategy(spec, move_time=move_time) if spec == "search" else get_strategy(spec)
    except (ValueError, TypeError) as exc:
        raise TournamentCliError(str(exc)) from exc


@dataclasses.dataclass
class Entrant:
    name: str
    strategy: str
    bot_id: str = ""
    client: Any = None
    runner: Any = None
    thread: threading.Thread | None = None
    crashed: str | None = None  # the runner thread died with this exception

    def stats(self) -> dict[str, Any]:
        if self.runner is None:
            return {}
        s = self.runner.stats
        return {"actions": s.actions, "games_finished": s.games_finished, "wins": s.wins,
                "conflicts": s.conflicts, "errors": s.errors,
                "strategy_errors": s.strategy_errors,
                "rate_limited": self.client.rate_limited if self.client else 0}


# --- our own service --------------------------------------------------------------------------


class EmbeddedService:
    """``allfours serve`` without blocking: embedded valkey + gunicorn on a free port.

    ``start`` returns the base URL once ``/readyz`` answers 200; ``stop`` (idempotent)
    stops gunicorn, then valkey, then removes a temporary data directory.
    """

    def __init__(
        self,
        admin_token: str,
        data_dir: str | os.PathLike[str] | None = None,
        port: int | None = None,
        workers: int = 2,
        host: str = "127.0.0.1",
    ) -> None:
        self.admin_token = admin_token
        self.host = host
        self.port = port
        self.workers = workers
        self._temp = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="allfours-tournament-"))
        self.redis: EmbeddedRedis | None = None
        self.gunicorn: subprocess.Popen[bytes] | None = None
        self.log_path = self.data_dir / "gunicorn.log"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> str:
        try:
            self.redis = EmbeddedRedis(self.data_dir / "redis" if self._temp else self.data_dir)
            env = os.environ.copy()
            env.update({
                "REDIS_URL": self.redis.start(),
                "ARENA_ADMIN_TOKEN": self.admin_token,
                "ARENA_LOG_LEVEL": env.get("ARENA_LOG_LEVEL", "warning"),
                # each entrant is an owner of its own (they are rated against each other,
                # issue 23), all registered from this machine: no per-network cap on them
                "ARENA_OWNERS_PER_NETWORK": env.get("ARENA_OWNERS_PER_NETWORK", "0"),
            })
            fixed = self.port
            for _attempt in range(3):
                self.port = fixed or free_port(self.host)
                self._spawn(env)
                if self._wait_ready():
                    return self.url
                if fixed:
                    break  # the port was asked for: do not quietly pick another
            raise TournamentCliError(
                f"the service did not start on {self.url}; last lines of {self.log_path}:\n"
                + self.log_tail()
            )
        except BaseException:
            self.stop()
            raise

    def _spawn(self, env: dict[str, str]) -> None:
        self._stop_gunicorn()
        command = gunicorn_command(self.host, self.port or 0, self.workers)
        with self.log_path.open("ab") as log:
            # started before any thread of ours (spawn_child)
            self.gunicorn = spawn_child(command, env=env, stdin=subprocess.DEVNULL,
                                        stdout=log, stderr=log)

    def _wait_ready(self) -> bool:
        """True once ``/readyz`` answers 200; False if gunicorn exits first or
        ``READY_TIMEOUT`` passes."""
        assert self.gunicorn is not None
        return wait_started(self.gunicorn, self._ready, READY_TIMEOUT, interval=0.1)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/readyz", timeout=2) as resp:
                return resp.status == 200
        except (OSError, urllib.error.HTTPError):
            return False

    def alive(self) -> bool:
        return self.gunicorn is not None and self.gunicorn.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        return log_tail(self.log_path, lines)

    def _stop_gunicorn(self) -> None:
        proc, self.gunicorn = self.gunicorn, None
        stop_process(proc, _STOP_WAIT)  # SIGTERM, graceful: workers finish their requests

    def stop(self) -> None:
        try:
            self._stop_gunicorn()  # first, so no worker sees Redis vanish mid-request
        finally:
            if self.redis is not None:
                self.redis.stop()
                self.redis = None
            if self._temp:
                shutil.rmtree(self.data_dir, ignore_errors=True)


# --- the display ----------------------------------------------------------------------------


class Display:
    """Progress while the games run: rich bars and tables, or (quiet) a line per round."""

    def __init__(self, quiet: bool, console: Any) -> None:
        self.quiet = quiet
        self.console = console
        self.live: Any = None
        self.progress: Any = None
        self.task: Any = None
        self._rounds_done = -1

    def __enter__(self) -> Display:
        if not self.quiet:
            from rich.live import Live
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("games"),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=self.console,
            )
            self.task = self.progress.add_task("games", total=None)
            self.live = Live(self.progress, console=self.console, refresh_per_second=4,
                             transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)
            self.live = None

    def update(self, tour: Any, scores: dict[str, list[int]], entrants: list[Entrant]) -> None:
        prog = tour.progress
        if self.quiet:
            if prog["rounds_done"] != self._rounds_done:
                self._rounds_done = prog["rounds_done"]
                _say(f"round {prog['rounds_done']}/{prog['rounds_planned']} done, "
                     f"{prog['games_done']}/{prog['games_planned']} games finished")
            return
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        self.progress.update(
            self.task, total=prog["games_planned"], completed=prog["games_done"],
            description=f"round {min(prog['rounds_done'] + 1, prog['rounds_planned'])}"
                        f"/{prog['rounds_planned']}",
        )
        names = {e.bot_id: e.name for e in entrants}
        games = Table(box=None, show_header=False, padding=(0, 1), pad_edge=False)
        for rnd in tour.rounds:
            for g in rnd["games"]:
                if g["status"] != "live":
                    continue
                a, b = (names.get(t, t) for t in g["teams"])
                sc = scores.get(g["game_id"] or "")
                games.add_row(
                    Text("▶", style="green"), f"round {rnd['round']}", f"game {g['slot'] + 1}",
                    Text(a, style="bold"), Text(f"{sc[0]:>2} – {sc[1]:<2}" if sc else "  –  "),
                    Text(b, style="bold"), Text(g["game_id"] or "", style="dim"),
                )
        # per entrant: results from the tournament (authoritative), moves from its runner
        tally = {e.bot_id: {"played": 0, "won": 0, "live": 0} for e in entrants}
        for rnd in tour.rounds:
            for g in rnd["games"]:
                for bot in g["teams"]:
                    t = tally.setdefault(bot, {"played": 0, "won": 0, "live": 0})
                    if g["status"] == "done":
                        t["played"] += 1
                        t["won"] += g["winner"] == bot
                    elif g["status"] == "live":
                        t["live"] += 1
        over = tour.status != "running"
        bots = Table(box=None, show_header=False, padding=(0, 1), pad_edge=False)
        for e in entrants:
            st, t = e.stats(), tally[e.bot_id]
            if e.crashed:
                state = Text("runner crashed", style="red")
            elif over:
                state = Text("done", style="green")
            else:
                state = Text(f"in {t['live']} games" if t["live"] else "waiting", style="dim")
            bots.add_row(
                Text(e.name, style="cyan"), Text(e.strategy, style="dim"),
                f"{t['played']} played", f"{t['won']} won", f"{st.get('actions', 0)} moves",
                f"{st.get('errors', 0)} errors", state,
            )
        self.live.update(Group(self.progress, games, bots))


def standings_table(standings: Any, entrants: list[Entrant], width: int = 120) -> Any:
    """The final table; on a narrow terminal (80 columns) with one space between columns."""
    from rich import box
    from rich.table import Table

    strategies = {e.bot_id: e.strategy for e in entrants}
    knockout = any(row.place is not None or row.eliminated is not None
                   for row in standings.items)
    table = Table(
        title="Standings", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
        padding=(0, 0) if width < 90 else (0, 1), collapse_padding=True,
        caption=("score: matches won (a bye counts 1) · place: by the round reached · "
                 if knockout else
                 "score: match points (1 a pairing won, ½ drawn, 1 a bye) · ") + "mp: matchpoints, "
        "duplicate deals compared across tables, of the most possible · hands: hands won · "
        "for/agst: game points for and against · t/o: timeouts · rating: OpenSkill μ ± σ · "
        "ordinal: μ − 3σ, the conservative estimate",
    )
    for header, justify in [
        ("#", "right"), ("entrant", "left"), ("score", "right"), ("mp", "right"),
        ("games", "right"),
        ("won", "right"), ("win%", "right"), ("hands", "right"), ("for", "right"),
        ("agst", "right"), ("t/o", "right"), ("rating", "right"),
        ("ordinal", "right"),
    ]:
        # only the names may wrap, so a tight fit never cuts a number short
        table.add_column(header, justify=justify,  # type: ignore[arg-type]
                         no_wrap=header != "entrant")
    if knockout:
        table.add_column("place", justify="right", no_wrap=True)
    for row in standings.items:
        name = row.bot_name
        if strategies.get(row.bot_id, name) != name:
            name = f"{name} ({strategies[row.bot_id]})"
        pct = f"{100 * row.won / row.played:.0f}" if row.played else "–"
        table.add_row(
            str(row.rank), name, f"{row.score:g}",
            f"{row.matchpoints:g}/{row.comparisons}" if row.comparisons else "–",
            str(row.played), str(row.won), pct,
            str(row.hands_won), str(row.points_for), str(row.points_against),
            str(row.timeouts), f"{row.rating.mu:.1f} ± {row.rating.sigma:.1f}",
            f"{row.rating.ordinal:.1f}", *([row.place or "in"] if knockout else []),
        )
    return table


def bracket_tables(bracket: dict[str, Any], entrants: list[Entrant]) -> Any:
    """A knockout's bracket for the terminal: per round, each match with the seeds, the
    games won (then the points), the tiebreak games and who went through, and why."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    names = {e.bot_id: e.name for e in entrants}

    def side(bot: str | None, seed: int | None) -> str:
        return f"({seed}) {names.get(bot, bot)}" if bot else "–"

    parts: list[Any] = [Text("Bracket", style="bold italic", justify="center")]
    for rnd in bracket["rounds"]:
        table = Table(title=f"round {rnd['round']}: {rnd['name']}", box=None,
                      show_header=False, padding=(0, 1), title_justify="left")
        for m in rnd["matches"]:
            a, b = m["entrants"]
            if m["status"] == "bye":
                score, result = "bye", f"→ {names.get(m['winner'], m['winner'])}"
            else:
                score = (f"{m['wins'][0]}–{m['wins'][1]} ({m['points'][0]}–{m['points'][1]} "
                         f"pts)" if m["wins"] is not None else "–")
                if m["tiebreak_games"]:
                    score += f", {m['tiebreak_games']} tiebreak games"
                result = (f"→ {names.get(m['winner'], m['winner'])} (by {m['decided_by']})"
                          if m["winner"] else m["status"])
            table.add_row(side(a, m["seeds"][0]), score, side(b, m["seeds"][1]), result)
        parts.append(table)
    champion = bracket.get("champion")
    if champion:
        parts.append(Text(f"champion: {names.get(champion, champion)}", style="bold"))
    return Group(*parts)


# --- the run --------------------------------------------------------------------------------


def _live_scores(viewer: Any, tour: Any) -> dict[str, list[int]]:
    """Scores of the tournament's live games, from one page of ``GET /games``."""
    live = {g["game_id"] for r in tour.rounds for g in r["games"] if g["status"] == "live"}
    if not live:
        return {}
    try:
        page = viewer.games(status="active", limit=100)
    except Exception:
        return {}
    return {g.id: g.scores for g in page.items if g.id in live}


def results_document(tour: Any, standings: Any, entrants: list[Entrant], server: str,
                     started: float, finished: float) -> dict[str, Any]:
    """What ``--json-out`` gets: settings, every game with its result, standings, ratings."""
    names = {e.bot_id: e.name for e in entrants}
    games = []
    for rnd in tour.rounds:
        for g in rnd["games"]:
            games.append({
                "round": rnd["round"],
                **g,
                "team_names": [names.get(t, t) for t in g["teams"]],
                "winner_name": names.get(g["winner"]) if g["winner"] else None,
            })
    return {
        "tournament_id": tour.id,
        "name": tour.name,
        "status": tour.status,
        "server": server,
        "started": round(started, 3),
        "finished": round(finished, 3),
        "elapsed_seconds": round(finished - started, 3),
        "settings": tour.settings,
        "progress": tour.progress,
        "entrants": [
            {"name": e.name, "strategy": e.strategy, "bot_id": e.bot_id, "runner": e.stats()}
            for e in entrants
        ],
        "byes": [{"round": r["round"], "byes": r["byes"]} for r in tour.rounds if r["byes"]],
        "bracket": tour.raw.get("bracket"),
        "games": games,
        "standings": [dataclasses.asdict(row) for row in standings.items],
        "ratings_history": standings.history,
    }


def _start_runners(entrants: list[Entrant], strategies: dict[str, Any],
                   workers: int, stop: threading.Event) -> None:
    from clients.runner import BotRunner

    for e in entrants:
        e.runner = BotRunner(e.client, strategies[e.name], workers=workers,
                             stop_event=stop, poll_timeout=RUNNER_POLL, name=e.name)

        def play(e: Entrant = e) -> None:
            try:
                e.runner.run()
            except Exception as exc:  # the runner catches its own; this is a bug report
                e.crashed = f"{type(exc).__name__}: {exc}"

        e.thread = threading.Thread(target=play, name=f"runner-{e.name}", daemon=True)
        e.thread.start()


def _stop_runners(entrants: list[Entrant], stop: threading.Event) -> None:
    stop.set()
    deadline = time.monotonic() + RUNNER_POLL + 15.0
    for e in entrants:
        if e.thread is not None:
            e.thread.join(max(0.1, deadline - time.monotonic()))
        if e.client is not None:
            e.client.close()


def run(args: argparse.Namespace, variants: dict[str, Any]) -> int:
    """The command (``variants``: the house rules that differ from the defaults)."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 120))

    def on_term(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    service: EmbeddedService | None = None
    entrants: list[Entrant] = []
    stop = threading.Event()
    try:
        fmt = FORMATS[args.format]
        if args.rounds is not None and fmt != "swiss":
            raise TournamentCliError("--rounds is for --format swiss")
        pairs = parse_bots(args.bots)
        strategies = {name: build_strategy(spec, args.move_time) for name, spec in pairs}
        check_duplicate(args, len(pairs))
        check_settings(fmt, len(pairs), tournament_settings(args, variants))
        _setup_logging(console, args.quiet)
        if args.server:
            server = args.server.rstrip("/")
            admin_token = args.admin_token or os.environ.get("ARENA_ADMIN_TOKEN")
            if not admin_token:
                raise TournamentCliError("with --server, creating a tournament needs "
                                         "--admin-token (or $ARENA_ADMIN_TOKEN)")
        else:
            admin_token = secrets.token_urlsafe(24)
            service = EmbeddedService(admin_token, args.data_dir, args.port)
            _say("starting the service (embedded valkey-server + gunicorn)...")
            server = service.start()
            _say(f"service at {server} (data in {service.data_dir})")
        return _play(args, fmt, variants, server, admin_token, pairs, strategies, entrants,
                     stop, service, console)
    except KeyboardInterrupt:
        _say("interrupted; stopping")
        return 130
    except (TournamentCliError, EmbeddedRedisError) as exc:
        _say(str(exc))
        return 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            _stop_runners(entrants, stop)
        finally:
            if service is not None:
                service.stop()
                _say("service stopped")
            signal.signal(signal.SIGTERM, previous)


def _setup_logging(console: Any, quiet: bool) -> None:
    """Warnings (a retry, a failed call) above the display, not through it."""
    import logging

    from rich.logging import RichHandler

    handler = RichHandler(console=console, show_path=False, show_time=not quiet)
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)


def _play(args: argparse.Namespace, fmt: str, variants: dict[str, Any], server: str,
          admin_token: str, pairs: list[tuple[str, str]], strategies: dict[str, Any],
          entrants: list[Entrant], stop: threading.Event, service: EmbeddedService | None,
          console: Any) -> int:
    from clients.api import ArenaClient, ArenaError

    viewer = ArenaClient(server)
    settings = tournament_settings(args, variants)
    try:
        try:
            viewer.readyz()
            check_with_service(viewer, admin_token, fmt, settings)
            for name, spec in pairs:
                client = ArenaClient(server, pool_size=max(16, args.parallel + 4))
                entrants.append(Entrant(name, spec, client=client))
                # an owner of its own per entrant: entrants named by the organizer are
                # consent (no invitation), and are rated against each other
                entrants[-1].bot_id = client.register(name).id
            tour = viewer.create_tournament([e.bot_id for e in entrants], fmt,
                                            admin_token=admin_token, **settings)
        except ArenaError as exc:
            if exc.status == 422 and exc.errors:
                raise refusal(exc.errors, {**settings, "entrants": pairs},
                              before=False) from exc
            raise TournamentCliError(f"{server}: {exc}") from exc
        started = time.time()
        _say(f"tournament {tour.id}: {fmt.replace('_', ' ')}, {len(entrants)} entrants, "
             f"{tour.progress['games_planned']} games of {args.players} players "
             f"({tour.progress['rounds_planned']} rounds)")
        _say(f"watch it at {server}/tournaments/{tour.id}")
        for warning in tour.raw.get("warnings") or []:
            _say(f"warning: {warning}")
        _start_runners(entrants, strategies, args.workers, stop)
        deadline = time.monotonic() + args.timeout if args.timeout else None
        timed_out = False
        with Display(args.quiet, console) as display:
            while True:
                try:
                    tour = viewer.tournament(tour.id)
                    display.update(tour, _live_scores(viewer, tour), entrants)
                except ArenaError as exc:
                    if service is None or service.alive():
                        _say(f"looking at the tournament failed: {exc}")
                if tour.status in ("finished", "cancelled"):
                    break
                if service is not None and not service.alive():
                    raise TournamentCliError("the service stopped; last lines of its log:\n"
                                             + service.log_tail())
                crashed = [e for e in entrants if e.crashed]
                if crashed:
                    raise TournamentCliError(f"the runner of {crashed[0].name} crashed: "
                                             f"{crashed[0].crashed}")
                if deadline is not None and time.monotonic() > deadline:
                    timed_out = True
                    try:  # never leave it running on the server
                        tour = viewer.cancel_tournament(tour.id, admin_token=admin_token)
                    except ArenaError as exc:
                        _say(f"cancelling the tournament failed: {exc}")
                    break
                time.sleep(POLL_EVERY)
        finished = time.time()
        stop.set()
        try:
            standings = viewer.standings(tour.id)
        except ArenaError as exc:
            raise TournamentCliError(f"reading the standings failed: {exc}") from exc
        if tour.raw.get("bracket"):
            console.print(bracket_tables(tour.raw["bracket"], entrants))
        console.print(standings_table(standings, entrants, console.width))
        doc = results_document(tour, standings, entrants, server, started, finished)
        out = Path(args.json_out or f"tournament-{tour.id}.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=2) + "\n")
        elapsed = finished - started
        _say(f"{tour.progress['games_done']}/{tour.progress['games_planned']} games in "
             f"{elapsed:.1f} s; results written to {out}")
        if timed_out:
            _say(f"gave up after --timeout {args.timeout:g} s with the tournament unfinished; "
                 f"it is {tour.status} on the server (live games voided, nothing more "
                 f"scheduled)")
            return 1
        return 0
    finally:
        viewer.close()


RANKING_HELP = (
    "Standings are ranked by, in order (each a tiebreak of the ones before): 1. match "
    "score (per pairing and round, 1 for winning more of its games, then more points in "
    "them; 1/2 each if still level; 1 per bye); 2. matchpoints (duplicate deals: 1 for "
    "every other holder of the same cards with a smaller margin, 1/2 for an equal one); "
    "3. games won; 4. point difference (for minus against); 5. rating ordinal (mu - 3 "
    "sigma); 6. bot id. Ratings (OpenSkill) take the games one at a time in slot order, "
    "whichever table finished first, so the same results give the same ratings; the "
    "results JSON has each game's place in that order (recorded) and both entrants' "
    "ratings before and after it (rating). Limits (the service's): 2 to 64 entrants, 1 to "
    "100 games per pairing and Swiss rounds, at most 1000 games in all; a tournament "
    "outside them is refused before anything is started or registered, with the reason "
    "per option. Knockout: seeds by the leaderboard's rating ordinal (unrated entrants "
    "after rated ones; ties in --bots order), byes to the top seeds; a match is --games "
    "games; who goes through: more games won, then more points in the match, then up to 2 "
    "tiebreak pairs (two more games each), then the higher seed; standings by the round "
    "reached. A knockout counts (entrants - 1) x (games + 4) games against the 1000. "
    "Forfeits: an entrant that withdraws, falls under --no-show or reaches "
    "--max-timeouts leaves and forfeits its live and unplayed games, and a side whose "
    "every move in a finished game was played by the clock forfeits that game: the "
    "opponent wins it (nobody, if both forfeit or it left without ever moving), it adds "
    "no points, hands or matchpoints, and it is a rated loss for the side that forfeited "
    "(docs/ratings.md)."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``allfours tournament`` (the command is wired in ``service.cli.main``)."""
    p.epilog = RANKING_HELP
    p.add_argument("--bots", default="random,heuristic,search",
                   help="entrants: comma-separated strategies (random, heuristic, search, or "
                   "package.module:Class); one may appear twice (default %(default)s)")
    p.add_argument("--format", choices=("round-robin", "swiss", "knockout"),
                   default="round-robin",
                   help="round-robin, swiss or knockout (single elimination seeded by the "
                   "leaderboard's rating, byes to the top seeds; see below)")
    p.add_argument("--rounds", type=int, default=None,
                   help="swiss: rounds to play (default ceil(log2(entrants)))")
    p.add_argument("--games", type=int, default=2,
                   help="games per pairing (per round), each a different deal; even with "
                   "--trusted duplicate deals (default %(default)s)")
    p.add_argument("--players", type=int, choices=(2, 4), default=4,
                   help="4: each entrant holds both seats of its team (default %(default)s)")
    p.add_argument("--duplicate", action=argparse.BooleanOptionalAction, default=None,
                   help="duplicate deals: each deal of a round is played at every table of "
                   "the round by different entrants and results are compared across "
                   "tables (matchpoints); needs 4 entrants or more unless --trusted "
                   "(default: on wherever possible)")
    p.add_argument("--trusted", action="store_true",
                   help="the entrants may see a deal twice: duplicate deals become twins, "
                   "each deal replayed by the same two entrants with the teams swapped; "
                   "works with 2 or 3 entrants. Only for your own bots (this command runs "
                   "them in-process), never for bots you do not control")
    p.add_argument("--target", type=int, default=None,
                   help="points that win a game (the target variant; default 14)")
    p.add_argument("--variant", action="append", default=[], metavar="NAME=VALUE",
                   help="a house rule, e.g. under_trumping=false (repeatable)")
    p.add_argument("--move-time", type=float, default=0.1,
                   help="the search bot's budget per move, seconds (default %(default)s)")
    p.add_argument("--move-limit", type=float, default=None,
                   help="the service's deadline per decision, seconds (0.5..3600); a seat "
                   "that misses it gets a default action, counted as a timeout")
    p.add_argument("--parallel", type=int, default=8,
                   help="games of the tournament at once (default %(default)s)")
    p.add_argument("--workers", type=int, default=4,
                   help="strategies each entrant's runner runs at once; every game "
                   "is played at once regardless (default %(default)s)")
    p.add_argument("--seed", type=int, default=None, help="fixes every deal (default random)")
    p.add_argument("--name", default="tournament", help="the tournament's name")
    p.add_argument("--server", default=None,
                   help="use this running service instead of starting one")
    p.add_argument("--admin-token", default=None,
                   help="with --server: its admin token (default $ARENA_ADMIN_TOKEN)")
    p.add_argument("--data-dir", default=None,
                   help="without --server: keep the embedded Redis data here (default: a "
                   "temporary directory, removed at the end)")
    p.add_argument("--port", type=int, default=None,
                   help="without --server: the port of our service (default: a free one)")
    p.add_argument("--json-out", default=None, metavar="PATH",
                   help="where to write the results (default ./tournament-<id>.json)")
    p.add_argument("--timeout", type=float, default=None,
                   help="give up (exit 1) if the tournament is not over after this many s: "
                   "the tournament is cancelled on the server (its live games voided)")
    p.add_argument("--no-show", type=float, default=None, metavar="SECONDS",
                   help="the no-show rule: an entrant whose live game has waited this long "
                   "on it, or whose every move in a game this old was played by the clock, "
                   "leaves and forfeits its live and unplayed games (default: the "
                   "service's, 600; 0: no such rule)")
    p.add_argument("--max-timeouts", type=int, default=None, metavar="N",
                   help="disqualify an entrant once the move clock has played N of its "
                   "moves (needs --move-limit); it forfeits its live and unplayed games")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars: a plain line per finished round")
