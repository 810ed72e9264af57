"""``BotRunner``: several bots, each a runner in its own thread, play several games at once
through the real service (gunicorn + Redis) to the end; plus the CLI with an author's own
``module:Class`` strategy, and a runner that comes back after the service was unreachable.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from clients.api import ArenaClient, ArenaError, RetryPolicy
from clients.runner import BotRunner, RunnerStats
from clients.strategies import RandomStrategy
from service.storage.embedded import free_port

EXPECTED_S = 25  # seconds, the whole module: the order workers take it in (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
JOIN_TIMEOUT = 60.0


def start(runner: BotRunner) -> tuple[threading.Thread, dict[str, RunnerStats]]:
    out: dict[str, RunnerStats] = {}
    t = threading.Thread(target=lambda: out.setdefault("stats", runner.run()), daemon=True)
    t.start()
    return t, out


def finish(threads: list[threading.Thread], runners: list[BotRunner]) -> None:
    deadline = time.monotonic() + JOIN_TIMEOUT
    for t in threads:
        t.join(max(0.1, deadline - time.monotonic()))
    alive = [t for t in threads if t.is_alive()]
    for r in runners:
        r.stop()
    for t in threads:
        t.join(15)
    assert not alive, "runners did not finish in time"


def test_four_random_runners_play_several_games_at_once_to_the_end(
    live_url: str, caplog
) -> None:
    caplog.set_level(logging.INFO, logger="clients.runner")
    clients = [ArenaClient(live_url) for _ in range(4)]
    # one owner's bots (the first's token): games naming them seat them at once
    ids = [c.register(f"runner-{i}", owner=clients[0].token).id for i, c in enumerate(clients)]
    a, b, c, d = ids
    target = {"target": 5}
    specs = [
        (2, [a, b]),
        (2, [c, d]),
        (2, [b, c]),
        (4, [a, b, c, d]),
        (4, [a, c, a, c]),  # one bot holds both seats of a team
    ]
    games = [clients[0].create_game(n, seats=s, seed=100 + i, variants=target)
             for i, (n, s) in enumerate(specs)]
    per_bot = {bot: sum(bot in s for _, s in specs) for bot in ids}
    runners = [
        BotRunner(cl, RandomStrategy(seed=i), workers=3, max_games=per_bot[ids[i]],
                  poll_timeout=2, check_every=0.5, name=f"runner-{i}")
        for i, cl in enumerate(clients)
    ]
    started = [start(r) for r in runners]
    finish([t for t, _ in started], runners)

    spectator = ArenaClient(live_url)
    total = 0
    for g in games:
        view = spectator.game(g.id)
        assert view.finished and view.winner in (0, 1), view
        record = spectator.record(g.id)
        assert record.complete and max(record.scores) >= 5
        total += len(record.actions)
    stats = [out["stats"] for _, out in started]
    for i, s in enumerate(stats):
        assert s.games_finished == per_bot[ids[i]] and s.errors == 0, s
        assert sorted(s.finished) == sorted(g.id for g, (_, seats) in zip(games, specs)
                                            if ids[i] in seats)
    assert sum(s.actions for s in stats) == total
    # it logged its decisions, each with its own seat's hand only
    decisions = [r for r in caplog.records if " v" in r.getMessage() and "hand was" in
                 r.getMessage()]
    assert len(decisions) == total


def test_a_tournament_through_the_client(live_url: str) -> None:
    """The tournament endpoints: an admin creates one, two runners play it out (the service
    schedules the games), and standings and the leaderboard show it."""
    from tests.clients.conftest import ADMIN_TOKEN

    clients = [ArenaClient(live_url) for _ in range(2)]
    ids = [c.register(f"entrant-{i}").id for i, c in enumerate(clients)]
    with pytest.raises(ArenaError) as info:
        clients[0].create_tournament(ids)
    assert info.value.status in (401, 403)
    t = clients[0].create_tournament(ids, "round_robin", admin_token=ADMIN_TOKEN,
                                     name="client-test", games_per_pairing=2,
                                     variants={"target": 4})  # no kick alone ends it
    assert t.status == "running" and {e.bot_id for e in t.entrants} == set(ids)
    runners = [BotRunner(c, "random", max_games=2, poll_timeout=1, check_every=0.5)
               for c in clients]
    started = [start(r) for r in runners]
    finish([th for th, _ in started], runners)
    anon = ArenaClient(live_url)
    # the last game is recorded just after its answer (the after-finish hooks)
    end_by = time.monotonic() + 60
    while (done := anon.tournament(t.id)).status == "running":
        assert time.monotonic() < end_by, done.progress
        time.sleep(0.1)
    assert done.status == "finished" and done.progress["games_done"] == 2 and done.rounds
    assert t.id in {x.id for x in anon.tournaments(limit=100).items}
    table = anon.standings(t.id)
    assert [r.rank for r in table.items] == [1, 2]
    assert all(r.played == 2 for r in table.items) and sum(r.won for r in table.items) == 2
    board = {r.bot_id: r for r in anon.leaderboard()}
    assert all(board[i].games == 2 and board[i].rating.sigma > 0 for i in ids)
    exported = anon.export(t.id)  # the same, in one document, and as CSV
    assert isinstance(exported, dict) and len(exported["games"]) == 2
    assert [r["bot_id"] for r in exported["standings"]] == [r.bot_id for r in table.items]
    games_csv = anon.export(t.id, "games")
    assert isinstance(games_csv, str) and len(games_csv.strip().splitlines()) == 3


def test_a_function_bot_and_a_bad_strategy_are_handled(live_url: str, caplog) -> None:
    caplog.set_level(logging.INFO, logger="clients.runner")
    one, two = ArenaClient(live_url), ArenaClient(live_url)
    game = one.create_game(2, seats=[one.register("fn").id,
                                     two.register("bad", owner=one.token).id], seed=3,
                           variants={"target": 3})

    def last_legal(view, legal):
        assert view["your_turn"] and view["hand"] is not None
        return legal[-1]

    class Bad:
        def __init__(self) -> None:
            self.n = 0

        def choose(self, view, legal):
            self.n += 1
            if self.n % 2:
                raise RuntimeError("bug in the bot")
            return "not-an-action"

    runners = [BotRunner(one, last_legal, max_games=1, poll_timeout=2, check_every=0.5),
               BotRunner(two, Bad, max_games=1, poll_timeout=2, check_every=0.5)]
    started = [start(r) for r in runners]
    finish([t for t, _ in started], runners)
    assert ArenaClient(live_url).game(game.id).finished
    bad = started[1][1]["stats"]
    assert bad.strategy_errors == bad.actions > 0  # every decision fell back to a legal one
    # one line for the game, however many decisions failed, and no traceback at error
    # level (a strategy that fails on a position fails on every later one: a busy bot
    # would fill its log)
    failed = [r for r in caplog.records if "playing the first legal action" in r.getMessage()
              and r.levelno >= logging.ERROR]
    assert bad.strategy_errors > 1 and len(failed) == 1, [r.getMessage() for r in failed]
    assert failed[0].exc_info is None and game.id in failed[0].getMessage()


def test_stop_when_idle_and_stop_event(live_url: str, caplog) -> None:
    """Each runner stops for its reason: idle, it says so and returns (one that did not
    would poll on until the test's own timeout); told to stop, it ends within a patience
    far beyond its half-second polls (one that ignored the event would never end)."""
    caplog.set_level(logging.INFO, logger="clients.runner")
    client = ArenaClient(live_url)
    client.register("idle")
    stats = BotRunner(client, "random", stop_when_idle=True, poll_timeout=0.5).run()
    assert stats.games_finished == 0
    assert any("idle, stopping" in r.getMessage() for r in caplog.records)

    stop = threading.Event()
    t, _ = start(BotRunner(client, "random", stop_event=stop, poll_timeout=0.5))
    time.sleep(0.3)
    stop.set()
    t.join(120)
    assert not t.is_alive()


def test_a_runner_comes_back_after_the_service_was_unreachable(
    live_url: str, make_proxy
) -> None:
    """The runner starts while nothing listens at its address; once a proxy to the service
    appears there, it plays its game to the end."""
    port = free_port()
    alone, other = ArenaClient(live_url), ArenaClient(live_url)
    bot = alone.register("patient")
    game = other.create_game(2, seats=[bot.id, other.register("other", owner=bot.token).id],
                             seed=9,
                             variants={"target": 3})
    far = ArenaClient(f"http://127.0.0.1:{port}", token=bot.token,
                      retry=RetryPolicy(attempts=2, backoff=0.05))
    patient = BotRunner(far, "random", max_games=1, poll_timeout=1, check_every=0.5,
                        max_backoff=0.5)
    runners = [patient, BotRunner(other, "random", max_games=1, poll_timeout=1,
                                  check_every=0.5)]
    started = [start(r) for r in runners]
    end = time.monotonic() + 30  # until the patient runner has met the missing proxy
    while patient.stats.errors == 0 and time.monotonic() < end:
        time.sleep(0.05)
    assert patient.stats.errors > 0 and patient.stats.actions == 0
    make_proxy(port)
    finish([t for t, _ in started], runners)
    assert ArenaClient(live_url).game(game.id).finished
    assert patient.stats.games_finished == 1 and patient.stats.actions > 0


def test_allfours_bot_runs_an_authors_own_class(live_url: str, tmp_path: Path) -> None:
    (tmp_path / "my_bot.py").write_text(textwrap.dedent("""
        class FirstLegal:
            def choose(self, view, legal):
                return legal[0]
    """))
    mine, theirs = ArenaClient(live_url), ArenaClient(live_url)
    me = mine.register("cli-bot")
    game = theirs.create_game(2, seats=[me.id, theirs.register("py", owner=me.token).id],
                              seed=21,
                              variants={"target": 3})
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    env.pop("ALLFOURS_TOKEN", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "service.cli.main", "bot", "--strategy", "my_bot:FirstLegal",
         "--server", live_url, "--token", me.token, "--games", "1", "--poll", "1"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        other = BotRunner(theirs, "random", max_games=1, poll_timeout=1, check_every=0.5)
        t, _ = start(other)
        out, err = proc.communicate(timeout=JOIN_TIMEOUT)
        finish([t], [other])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["games"] == 1 and summary["actions"] > 0
    assert ArenaClient(live_url).game(game.id).finished
    assert "FirstLegal" in err and f"game {game.id}" in err


def test_allfours_bot_refuses_an_unknown_strategy(live_url: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "service.cli.main", "bot", "--strategy", "nope", "--server",
         live_url, "--token", "x"],
        cwd=ROOT, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert proc.returncode == 2 and "unknown strategy" in proc.stderr


@pytest.mark.parametrize("argv", [["register", "--name", "reg-bot"]])
def test_allfours_register_prints_a_token(live_url: str, argv: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "service.cli.main", *argv, "--server", live_url],
                          cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    bot = json.loads(proc.stdout)
    assert ArenaClient(live_url, token=bot["token"]).me().id == bot["id"]


def test_a_runner_makes_about_one_request_per_move(live_url: str) -> None:
    """With its actions waiting for the next turn (``POST …/actions?wait=``), a runner that
    has nothing else queued decides on the view the action's answer brings: no turn poll
    and no view fetch between its moves. A team's two seats held by one bot are waited
    for together. Counted on the wire, from each runner's own requests."""
    clients = [ArenaClient(live_url) for _ in range(2)]
    ids = [c.register(f"waiting-{i}", owner=clients[0].token).id  # one owner's bots
           for i, c in enumerate(clients)]
    sent: list[list[str]] = [[], []]
    for i, c in enumerate(clients):
        def hook(resp, *_, i=i, **__):
            sent[i].append(f"{resp.request.method} {resp.request.path_url}")
        c.session.hooks["response"].append(hook)
    game = clients[0].create_game(4, seats=[ids[0], ids[1], ids[0], ids[1]], seed=7,
                                  variants={"target": 5})
    runners = [BotRunner(c, RandomStrategy(seed=i), max_games=1, poll_timeout=5,
                         check_every=5, name=f"waiting-{i}")
               for i, c in enumerate(clients)]
    started = [start(r) for r in runners]
    finish([t for t, _ in started], runners)
    record = ArenaClient(live_url).record(game.id)
    assert record.complete
    stats = [out["stats"] for _, out in started]
    assert sum(s.actions for s in stats) == len(record.actions)
    for i, s in enumerate(stats):
        assert s.errors == 0 and s.games_finished == 1, s
        actions = [r for r in sent[i] if r.startswith("POST") and "/actions?wait=" in r]
        assert len(actions) == s.actions, sent[i][:20]
        # a few turn polls and views (the start, the end, a wait that ran out), no more
        assert len(sent[i]) <= s.actions * 1.2 + 10, (len(sent[i]), s.actions)
