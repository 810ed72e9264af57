"""``allfours tournament``: run a whole tournament from one command.

    allfours tournament --bots random,heuristic,search --format round-robin --games 20
    allfours tournament --bot-cmd 'java -jar mybot.jar' --bot-name mine --bots heuristic

What it does, in order:

1. **The service.** With ``--server`` it uses that service: with its admin token
   (``--admin-token`` or ``$ARENA_ADMIN_TOKEN``) each entrant is an owner of its own and the
   service organizes; without, every entrant is a bot of the first entrant's owner, which
   organizes the tournament with its own token (one owner's games: unrated). Without
   ``--server`` it starts one of its own exactly as ``allfours serve`` does — an embedded
   ``valkey-server`` (in a temporary directory, or ``--data-dir``) and gunicorn with the
   same command line and config — on a free port, with a freshly generated admin token,
   the default rate limits (sized so that the bundled runners never meet them), and
   gunicorn's log in a file so it cannot tear the progress display. It waits for ``/readyz``.
2. **The entrants.** First the settings are checked against the service's own request
   schema (``service.http.tournaments.schemas.TournamentCreate``: ranges and size limits) and, with
   ``--server``, by that service (a ``POST /tournaments`` without entrants, which can never
   create one, answers 403 for a wrong admin token and 422 naming each refused field): a
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
4. **The bots play as real HTTP clients**: one ``BotRunner`` per built-in entrant in a
   thread of this process, and one process per ``--bot-cmd`` (any language: ``java -jar
   mybot.jar``), started as ``check-bot`` starts a bot (``service.cli.bot_process``: its
   own session, ``ARENA_URL`` and ``ARENA_TOKEN`` in its environment, its output in
   ``bot-NAME.log``); each finds its turns through the turn long-poll like any other bot.
   A command that exits ends the run with its log's last lines. In a 4-player game an
   entrant holds both seats of its team and plays both.
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
import json
import os
import secrets
import signal
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from service.cli.bot_process import start_bot, stop_bot
from service.cli.embedded_service import EmbeddedService
from service.cli.tournament_display import (
    Display,
    _live_scores,
    bracket_tables,
    results_document,
    standings_table,
)
from service.cli.tournament_setup import (
    FORMATS,
    Entrant,
    TournamentCliError,
    _say,
    build_strategy,
    check_duplicate,
    check_settings,
    check_with_service,
    parse_bots,
    refusal,
    tournament_settings,
)
from service.storage.embedded import (
    EmbeddedRedisError,
    log_tail,
)

POLL_EVERY = 0.5  # seconds between looks at the tournament
RUNNER_POLL = 1.0  # a runner's turn long-poll: also how soon it notices a stop


# --- the run --------------------------------------------------------------------------------


def _start_runners(entrants: list[Entrant], strategies: dict[str, Any],
                   workers: int, stop: threading.Event, server: str, logs: Path) -> None:
    from clients.runner import BotRunner

    for e in entrants:
        if e.command is not None:  # a bot of its own, in any language: ARENA_URL, ARENA_TOKEN
            e.log = logs / f"bot-{e.name}.log"
            e.proc = start_bot(e.command, server, e.client.token or "", e.log)
            _say(f"{e.name}: `{e.command}` started (output in {e.log})")
            continue
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
    for e in entrants:
        stop_bot(e.proc)
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
        pairs = parse_bots(args.bots, args.bot_cmd, args.bot_name)
        strategies = {name: build_strategy(spec, args.move_time) for name, spec in pairs}
        check_duplicate(args, len(pairs))
        check_settings(fmt, len(pairs), tournament_settings(args, variants))
        _setup_logging(console, args.quiet)
        if args.server:
            server = args.server.rstrip("/")
            # without the admin token the entrants are one owner's, which organizes it
            admin_token = args.admin_token or os.environ.get("ARENA_ADMIN_TOKEN") or None
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
            if admin_token is not None:
                check_with_service(viewer, admin_token, fmt, settings)
            for name, spec in pairs:
                client = ArenaClient(server, pool_size=max(16, args.parallel + 4))
                entrants.append(Entrant(name, spec, client=client))
                # with the admin token, an owner of its own per entrant (named by the
                # service's organizer, rated against each other); without it, all of the
                # first entrant's owner, which organizes them (its own bots: unrated)
                first = None if admin_token or len(entrants) == 1 else entrants[0].client.token
                entrants[-1].bot_id = client.register(name, owner=first).id
            if admin_token is None:
                admin_token = entrants[0].client.token  # the organizer's, for its controls
                _say("no admin token: the entrants are one owner's bots, which organizes "
                     "the tournament (its games are unrated)")
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
        logs = Path(args.json_out).parent if args.json_out else Path(".")
        _start_runners(entrants, strategies, args.workers, stop, server, logs)
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
                gone = [e for e in entrants if e.proc is not None and e.proc.poll() is not None]
                if gone:  # its games would fall to the clock (or hang without one)
                    raise TournamentCliError(
                        f"the bot {gone[0].name} (`{gone[0].command}`) exited with status "
                        f"{gone[0].proc.returncode}; last lines of {gone[0].log}:\n"
                        + log_tail(gone[0].log, 15))
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
    p.add_argument("--bot-cmd", action="append", default=[], metavar="COMMAND",
                   help="an entrant that is a command, in any language (repeatable), e.g. "
                   "'java -jar mybot.jar': started with ARENA_URL and ARENA_TOKEN in its "
                   "environment (as check-bot starts it), its output in bot-NAME.log beside "
                   "the results; it plays against the other commands and --bots")
    p.add_argument("--bot-name", action="append", default=[], metavar="NAME",
                   help="the name of the --bot-cmd before it (repeatable; default cmd, "
                   "cmd-2...)")
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
    p.add_argument("--time-bank", type=float, default=None, metavar="SECONDS",
                   help="with --move-limit: each seat's reserve for decisions slower than "
                   "the limit, drawn down before the clock plays a default (0..3600; "
                   "default none)")
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
                   help="with --server: its admin token (default $ARENA_ADMIN_TOKEN); "
                   "without one the entrants are one owner's bots, which organizes it "
                   "(unrated)")
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
