"""The settings and entrants of ``allfours tournament`` (``service.cli.tournament``): ``--bots``
parsed into entrants, the options into a tournament's settings, and both checked (against
the service's own request schema, and with ``--server`` by that service) before anything
is registered, so that a refusal names each option and why.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import threading
from typing import Any

FORMATS = {"round-robin": "round_robin", "round_robin": "round_robin", "swiss": "swiss",
           "knockout": "knockout"}


_NAME_OK = re.compile(r"[^A-Za-z0-9 ._-]+")


class TournamentCliError(RuntimeError):
    """A failure worth one line on stderr and exit status 1."""


def _say(message: str) -> None:
    print(f"allfours tournament: {message}", file=sys.stderr, flush=True)


CMD = "cmd:"  # the strategy of an entrant that is a command (``--bot-cmd``)


def parse_bots(spec: str, commands: list[str] | None = None,
               names: list[str] | None = None) -> list[tuple[str, str]]:
    """``"random,heuristic,heuristic,pkg.mod:MyBot"`` → ``[(entrant name, strategy)]``,
    after the ``commands`` (``--bot-cmd``: strategy ``cmd:<command>``, named by ``names``
    in order, else ``cmd``).

    Names are the strategy (the class name for ``module:Class``), made distinct by a
    ``-2``, ``-3``... suffix, and fit the service's bot-name pattern.
    """
    strategies = [s.strip() for s in spec.split(",") if s.strip()]
    commands = commands or []
    names = names or []
    if len(names) > len(commands):
        raise TournamentCliError("--bot-name names a --bot-cmd: give each --bot-name after "
                                 "its --bot-cmd")
    if len(strategies) + len(commands) < 2:
        raise TournamentCliError("--bots (with --bot-cmd) needs at least two entrants, e.g. "
                                 "random,heuristic")
    seen: dict[str, int] = {}
    out = []
    wanted = [(names[i] if i < len(names) else "cmd", CMD + c) for i, c in enumerate(commands)]
    for strategy in strategies:
        base = strategy.rsplit(":", 1)[-1].rsplit(".", 1)[-1] if ":" in strategy else strategy
        wanted.append((base, strategy))
    for base, strategy in wanted:
        base = _NAME_OK.sub("-", base).strip(" -")[:30] or "bot"
        seen[base] = seen.get(base, 0) + 1
        out.append((base if seen[base] == 1 else f"{base}-{seen[base]}", strategy))
    return out


def check_duplicate(args: argparse.Namespace, entrants: int) -> None:
    """Refuse, before anything is registered, what the service would refuse about
    duplicate deals (see ``service.arena.tournaments.service``)."""
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
             "time_bank": "--time-bank",
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
    if args.time_bank is not None:
        settings["time_bank"] = args.time_bank
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

    from service.http.tournaments.schemas import TournamentCreate

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

    if spec.startswith(CMD):
        return None  # a command plays for itself
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
    proc: Any = None  # a command's process (``--bot-cmd``)
    log: Any = None  # its output's file

    @property
    def command(self) -> str | None:
        return self.strategy[len(CMD):] if self.strategy.startswith(CMD) else None

    @property
    def shown_strategy(self) -> str:
        """What the tables say it plays: its strategy, or ``command`` for a --bot-cmd
        (its command line is in the log's first line and the results)."""
        return "command" if self.command is not None else self.strategy

    def stats(self) -> dict[str, Any]:
        if self.runner is None:
            return {}
        s = self.runner.stats
        return {"actions": s.actions, "games_finished": s.games_finished, "wins": s.wins,
                "conflicts": s.conflicts, "errors": s.errors,
                "strategy_errors": s.strategy_errors,
                "rate_limited": self.client.rate_limited if self.client else 0}
