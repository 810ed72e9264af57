"""The ``allfours`` command."""

from __future__ import annotations

import argparse
import json
import sys

from .engine.errors import InvalidVariants
from .engine.variants import Variants


def _variants(pairs: list[str]) -> Variants:
    """``--variant name=value`` pairs (values parsed as JSON, else taken as text)."""
    data = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep:
            raise InvalidVariants(f"--variant wants name=value, not {pair!r}")
        try:
            data[name] = json.loads(raw)
        except json.JSONDecodeError:
            data[name] = raw
    return Variants.from_dict(data)


def _cmd_simulate(args: argparse.Namespace) -> int:
    from .simulate import ITEM_ORDER, simulate

    result = simulate(args.games, args.players, args.seed, _variants(args.variant))
    if args.json:
        print(json.dumps(result))
        return 0
    w = result["wins"]
    print(
        f"{result['games']} games, {result['players']} players, "
        f"seeds {args.seed}..{args.seed + args.games - 1}"
    )
    print(f"wins: team 0 {w['team_0']}, team 1 {w['team_1']}")
    print(f"average hands per game: {result['average_hands']}")
    print("points by item (total, per game):")
    for item in ITEM_ORDER:
        print(
            f"  {item:<10}{result['points_by_item'][item]:>8}"
            f"{result['points_per_game'][item]:>10.3f}"
        )
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from .serve import serve

    return serve(args.host, args.port, args.workers, args.data_dir, args.app)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="allfours", description="All Fours Arena")
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser(
        "simulate", help="play seeded games between random players and summarise them"
    )
    sim.add_argument("--games", type=int, default=1000)
    sim.add_argument("--players", type=int, choices=(2, 4), default=4)
    sim.add_argument("--seed", type=int, default=0, help="game i uses seed SEED+i")
    sim.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a house rule, e.g. target=7 or under_trumping=false (repeatable)",
    )
    sim.add_argument("--json", action="store_true", help="print one JSON object")
    sim.set_defaults(func=_cmd_simulate)
    srv = sub.add_parser(
        "serve",
        help="run the HTTP service under gunicorn (with an embedded Redis unless REDIS_URL)",
        description="Run the HTTP service under gunicorn (gevent workers). With REDIS_URL "
        "set, games live in that Redis; without it, an embedded valkey-server keeps them "
        "under --data-dir with append-only persistence. Ctrl-C stops both.",
    )
    srv.add_argument("--host", default="127.0.0.1", help="address to listen on")
    srv.add_argument("--port", type=int, default=8000)
    srv.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    srv.add_argument(
        "--data-dir",
        default=None,
        help="embedded Redis data directory (default $ARENA_DATA_DIR or ./data)",
    )
    srv.add_argument("--app", default="service.wsgi:app", help=argparse.SUPPRESS)
    srv.set_defaults(func=_cmd_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except InvalidVariants as exc:
        parser.error(str(exc))
    return 2


if __name__ == "__main__":
    sys.exit(main())
