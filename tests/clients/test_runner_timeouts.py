"""A running bot is never charged a timeout.

Short move limits and many games at once per bot (a tournament of several
entrants, 8 games a pairing, all of a round's tables in parallel), on the real service
(gunicorn, gevent workers) and real Redis: every runner must see each new game's first turn
as soon as the service knows it, and every later turn of each game, however many of its
games are waiting on another bot. Two ways a bot runs: ``BotRunner`` with the options
``allfours bot`` uses (its defaults: poll 10 s, act wait 10 s, 4 workers), and the
tournament command (``allfours tournament --move-limit 0.5``).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from clients.api import ArenaClient
from clients.runner import BotRunner
from clients.strategies import RandomStrategy
from tests.test_tournament_cli import check_results, run_tournament

EXPECTED_S = 45  # seconds, the whole module: the order workers take it in (tests/conftest.py)

# The runners' own waits are 10 s (the long-poll and the act wait of `allfours bot`'s
# defaults): a runner that missed a turn until one of them ended is charged a timeout at
# any limit below 10 s. A short limit also charges the machine's load instead: a busy
# 2-core box (CI's four test workers beside a gunicorn service) stalls a process for
# seconds now and then. So the limit is 7 s: a turn missed until the runner's
# current wait ends goes over it whenever that wait had more than 7 s left, and the
# defect missed turns in most games, so 48 games still charge it many times; only a
# stall of 7 s charges load.
MOVE_LIMIT = 7.0
FINISH_TIMEOUT = 240.0


def test_runners_with_the_bot_command_defaults_meet_no_timeout(live_url: str) -> None:
    from tests.clients.conftest import ADMIN_TOKEN

    clients = [ArenaClient(live_url, pool_size=32) for _ in range(4)]
    ids = [c.register(f"prompt-{i}").id for i, c in enumerate(clients)]
    t = clients[0].create_tournament(
        ids, "round_robin", admin_token=ADMIN_TOKEN, name="no-timeouts", players=2,
        games_per_pairing=8, parallel=16, move_limit=MOVE_LIMIT, variants={"target": 5})
    stop = threading.Event()
    runners = [BotRunner(c, RandomStrategy(seed=i), stop_event=stop, name=f"prompt-{i}")
               for i, c in enumerate(clients)]  # `allfours bot`'s defaults otherwise
    threads = [threading.Thread(target=r.run, daemon=True) for r in runners]
    for th in threads:
        th.start()
    viewer = ArenaClient(live_url)
    try:
        deadline = time.monotonic() + FINISH_TIMEOUT
        while viewer.tournament(t.id).status == "running":
            assert time.monotonic() < deadline, viewer.tournament(t.id).progress
            time.sleep(0.5)
    finally:
        stop.set()
        for th in threads:
            th.join(30)
    done = viewer.tournament(t.id)
    assert done.progress["games_done"] == 48
    games = [g for r in done.rounds for g in r["games"]]
    charged = {g["game_id"]: g["timeouts"] for g in games if sum(g["timeouts"])}
    assert not charged, f"timeouts charged to running bots: {charged}"
    assert sum(row.timeouts for row in viewer.standings(t.id).items) == 0
    assert not any(th.is_alive() for th in threads)
    for r in runners:
        assert r.stats.errors == 0 and r.stats.strategy_errors == 0, r.stats


def test_the_tournament_command_with_short_move_limits_meets_no_timeout(
        tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    result = run_tournament(
        ["--bots", "random,random,random,random,random", "--format", "round-robin",
         "--games", "6", "--players", "2", "--target", "5", "--parallel", "12",
         "--move-limit", str(MOVE_LIMIT), "--quiet", "--json-out", str(out)],
        tmp_path, timeout=FINISH_TIMEOUT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = json.loads(out.read_text())
    check_results(doc, entrants=5, games=60)
    charged = {g["game_id"]: g["timeouts"] for g in doc["games"] if sum(g["timeouts"])}
    assert not charged, f"timeouts charged to running bots: {charged}"
    assert sum(row["timeouts"] for row in doc["standings"]) == 0
