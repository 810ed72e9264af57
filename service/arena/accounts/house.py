"""House bots: the built-in strategies, played by the service's own deployment, so a person
(or a new bot author) always has someone to play against.

**Accounts.** One ordinary bot account per strategy and role: ``house-heuristic`` takes the
opponents' seats, ``house-heuristic-partner`` the person's partner's seat in a 4-player
game. Opponents and partner are never the same account: a bot's seats share one token,
and one token holding both teams' seats could look at both teams' hands. The ids live in
the Redis hash ``{p}house`` (field ``heuristic`` or ``heuristic:partner``), so they survive
restarts and their ratings keep accumulating. They all belong to the owner ``house``
(``service.arena.accounts.owners``), and accept any game within
``ARENA_HOUSE_GAMES_PER_CHALLENGER`` games an hour per challenging owner
(``service.arena.accounts.invitations``). Their tokens are never stored: every start of the house
process mints a fresh token per account (the store keeps only its hash, as
for any bot) and drops the previous one.

**Process.** ``python -m service.arena.accounts.house --server URL``: one
``clients.runner.BotRunner`` thread per account, each an ordinary HTTP client of the
service (long-polling its turns, rate limited like any bot). ``allfours serve`` starts it
beside gunicorn and stops it first, while the service still answers: on SIGTERM/SIGINT the
runners are told to stop, get ``STOP_GRACE_S`` to finish what they are sending, and the
process then leaves at once and quietly — a runner still in a long-poll is abandoned, not
waited for (every move is sent with its ``Idempotency-Key``, so a move cut off is applied
once or not at all, and the move deadline covers the seat), and nothing is logged about
the requests cut short. While it runs it keeps ``{p}house:alive`` set (expiring after
``ALIVE_TTL_S``); the API seats house bots only while that key is there, and otherwise
answers 503.

**CPU.** The process runs ``ARENA_HOUSE_NICE`` (10) steps nicer than the service, and
the search bot's decisions are budgeted per game, per owner played against and by the
process's own CPU use, the heuristic playing past them
(``service.arena.accounts.house_cpu``); how many decisions each played is added to
``{p}house:decisions`` every beat (``allfours_house_decisions_total``).

**Switch.** ``ARENA_HOUSE_BOTS=0`` in the environment, or ``allfours serve
--no-house-bots``: no house process, and ``POST /house/games`` answers 503.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

from service.arena.accounts import house_cpu
from service.arena.accounts.house_cpu import Tally
from service.arena.accounts.owners import HOUSE_OWNER, Owners
from service.arena.core.problems import Problem
from service.logs import use_json
from service.storage.bots import new_token, token_hash
from service.storage.store import Store

STRATEGIES = ("random", "heuristic", "search")
ROLES = ("opponent", "partner")
ALIVE_TTL_S = 30
BEAT_S = 10.0
STOP_GRACE_S = 0.25  # after a stop, for the runners' requests in flight (see the docstring)

log = logging.getLogger(__name__)


def enabled(environ: dict[str, str] | None = None) -> bool:
    """House bots run unless ``ARENA_HOUSE_BOTS`` is 0, false, no or off."""
    value = (os.environ if environ is None else environ).get("ARENA_HOUSE_BOTS", "1")
    return value.strip().lower() not in ("0", "false", "no", "off")


def _field(strategy: str, role: str) -> str:
    return strategy if role == "opponent" else f"{strategy}:{role}"


def account_name(strategy: str, role: str) -> str:
    return f"house-{strategy}" if role == "opponent" else f"house-{strategy}-partner"


def ensure_accounts(store: Store) -> dict[tuple[str, str], tuple[str, str]]:
    """Every house account's (bot id, fresh token), creating the accounts the first time.

    Only the house process calls this: the fresh tokens exist nowhere else."""
    key = f"{store.p}house"
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for strategy in STRATEGIES:
        for role in ROLES:
            field = _field(strategy, role)
            raw = store.r.hget(key, field)
            if raw is None or store.get_bot(raw.decode()) is None:
                bot, _ = store.create_bot(account_name(strategy, role), permanent=True)
                # Two house processes starting at once: the first account written wins.
                store.r.hsetnx(key, field, bot["id"])
                raw = store.r.hget(key, field)
            bot_id = raw.decode()
            # every house account belongs to the one owner ``house`` (set on each start,
            # so accounts made before owners existed join it too): the house accepts
            # challenges within a per-challenger limit (service.arena.accounts.invitations)
            Owners(store).add_bot(HOUSE_OWNER, bot_id)
            token = new_token()
            old = store.r.hget(key, f"{field}:token")
            # one MULTI on a single Redis; in a cluster (three slots) the same three steps
            # in this order: a crash between them leaves at worst a token nobody holds
            pipe = store.r.pipeline(transaction=not store.cluster)
            pipe.set(f"{store.p}token:{token_hash(token)}", bot_id)
            pipe.hset(key, f"{field}:token", token_hash(token))
            if old:
                pipe.delete(f"{store.p}token:{old.decode()}")
            pipe.execute()
            out[(strategy, role)] = (bot_id, token)
    return out


def beat(store: Store, tally: Tally | None = None) -> None:
    """Say the house bots are playing (for ``ALIVE_TTL_S`` seconds), and add the search
    bot's decisions since the last beat to ``{p}house:decisions`` (field ``search``, or
    ``heuristic:<reason>``)."""
    pipe = store.r.pipeline(transaction=False)
    pipe.set(f"{store.p}house:alive", str(int(time.time())), ex=ALIVE_TTL_S)
    for (strategy, reason), n in (tally.take() if tally is not None else {}).items():
        field = f"{strategy}:{reason}" if reason else strategy
        pipe.hincrby(f"{store.p}house:decisions", field, n)
    pipe.execute()


def _settings(environ: dict[str, str] | os._Environ[str]) -> dict[str, Any]:
    """The house's CPU settings from the environment (``house_cpu.DEFAULTS``)."""
    return {k: type(v)(environ[k]) if k in environ else v
            for k, v in house_cpu.DEFAULTS.items()}


def _strategies(store: Store, accounts: dict[tuple[str, str], tuple[str, str]],
                settings: dict[str, Any], tally: Tally) -> dict[str, Any]:
    """What each strategy name plays: the search within its budgets (one ``Budgeted``
    for both search accounts, so a game's budget is the game's), the others as named."""
    from clients.strategies import HeuristicStrategy, SearchStrategy

    house_bots = {bot for bot, _ in accounts.values()}
    owners = Owners(store)
    known: dict[str, str] = {}

    def owner_of(view: dict[str, Any]) -> str | None:
        bot = house_cpu.opponent(view, house_bots)
        if bot is None:
            return None
        if bot not in known:
            if len(known) > house_cpu.GAMES_KEPT:
                known.clear()
            known[bot] = owners.owner_of(bot)
        return known[bot]

    search = house_cpu.Budgeted(SearchStrategy(), HeuristicStrategy(), owner_of, tally,
                                settings)
    return {"search": search}


def seats_for(store: Store, person: str | None, players: int, opponent: str,
              partner: str | None) -> list[str | None]:
    """The seats of a game between a person (seat 0) and house bots: opponents in the odd
    seats, the partner (4 players) in seat 2. 503 when no house process is running."""
    key = f"{store.p}house"
    pipe = store.r.pipeline(transaction=False)
    pipe.exists(f"{store.p}house:alive")
    pipe.hget(key, _field(opponent, "opponent"))
    pipe.hget(key, _field(partner or opponent, "partner"))
    alive, opp, mate = pipe.execute()
    if not alive or opp is None or mate is None:
        raise Problem("service-unavailable",
                      "no house bot is playing here now (ARENA_HOUSE_BOTS=0, or starting up)",
                      headers={"Retry-After": "5"})
    if players == 2:
        return [person, opp.decode()]
    return [person, opp.decode(), mate.decode(), opp.decode()]


def listing(store: Store) -> dict[str, Any]:
    """The house bots as ``GET /house`` shows them: whether a house process plays here
    now, and each account (id, name, strategy, role) made so far."""
    key = f"{store.p}house"
    pipe = store.r.pipeline(transaction=False)
    pipe.exists(f"{store.p}house:alive")
    pipe.hgetall(key)
    alive, fields_ = pipe.execute()
    ids = {k.decode(): v.decode() for k, v in fields_.items()
           if not k.decode().endswith(":token")}
    names = store.bot_names(list(ids.values())) if ids else {}
    items = []
    for strategy in STRATEGIES:
        for role in ROLES:
            bot = ids.get(_field(strategy, role))
            if bot is not None:
                items.append({"bot_id": bot, "bot_name": names.get(bot) or
                              account_name(strategy, role), "strategy": strategy,
                              "role": role})
    return {"playing": bool(alive), "items": items}


# --- the process ---------------------------------------------------------------------------


def _wait_ready(server: str, stop: threading.Event, timeout: float = 60.0) -> bool:
    import requests

    deadline = time.monotonic() + timeout
    while not stop.is_set() and time.monotonic() < deadline:
        try:
            if requests.get(server + "/readyz", timeout=2).status_code == 200:
                return True
        except requests.RequestException:
            pass
        stop.wait(0.3)
    return False


def run(server: str, redis_url: str, prefix: str, workers: int = 4) -> int:
    """Play every house account's games until SIGTERM/SIGINT."""
    from clients.api import ArenaClient
    from clients.runner import BotRunner
    from service.storage import redis_client

    stop = threading.Event()

    def on_signal(_signum: int, _frame: Any) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    settings = _settings(os.environ)
    with contextlib.suppress(OSError):  # not allowed: the service's own priority
        os.nice(int(settings["ARENA_HOUSE_NICE"]))
    if not _wait_ready(server, stop):
        log.error("house bots: %s never answered /readyz", server)
        return 1
    store = Store(redis_client.connect(redis_url), prefix)
    accounts = ensure_accounts(store)
    tally = Tally()
    playing = _strategies(store, accounts, settings, tally)
    runners: list[BotRunner] = []
    threads: list[threading.Thread] = []
    for (strategy, role), (_bot_id, token) in accounts.items():
        client = ArenaClient(server, token=token)
        runner = BotRunner(client, playing.get(strategy, strategy), workers=workers,
                           poll_timeout=5.0,
                           act_wait=5.0, stop_event=threading.Event(),
                           name=account_name(strategy, role))
        runners.append(runner)
        threads.append(threading.Thread(target=runner.run, name=runner.name, daemon=True))
    for t in threads:
        t.start()
    log.info("house bots playing: %s", ", ".join(r.name for r in runners))
    try:
        while not stop.is_set():
            with contextlib.suppress(Exception):  # Redis away a moment: the next beat
                beat(store, tally)
            stop.wait(BEAT_S)
    finally:
        # quiet from here: what the runners meet while they stop is not news
        for name in ("clients", "urllib3"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        for r in runners:
            r.stop()
        with contextlib.suppress(Exception):  # the service's Redis may be going too
            store.r.delete(f"{store.p}house:alive")
        until = time.monotonic() + STOP_GRACE_S
        for t in threads:
            t.join(max(0.0, until - time.monotonic()))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m service.arena.accounts.house",
                                     description="Run the house bots against a service.")
    parser.add_argument("--server", required=True, help="the service's URL")
    parser.add_argument("--workers", type=int, default=4, help="games decided at once per bot")
    args = parser.parse_args(argv)
    # one JSON object a line, as every other line the service writes (service.logs)
    use_json(logging.WARNING)
    log.setLevel(logging.INFO)
    redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    prefix = os.environ.get("ARENA_KEY_PREFIX", "af:")
    status = run(args.server.rstrip("/"), redis_url, prefix, args.workers)
    # Leave now: a normal exit would join the runners' game threads (a ThreadPoolExecutor's
    # are joined at exit), each possibly in a long-poll of several seconds (STOP_GRACE_S).
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    sys.exit(main())
