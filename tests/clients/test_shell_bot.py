"""Any language: the POSIX shell bot (curl + jq) plays a whole 2-player game against a
Python bot (``BotRunner``, random) through the real service."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from clients.api import ArenaClient
from clients.runner import BotRunner
from tests.clients.conftest import first_line, kill_bots
from tests.conftest import missing

ROOT = Path(__file__).resolve().parents[2]
SHELL_BOT = ROOT / "clients" / "examples" / "shell_bot.sh"
TIMEOUT = 60.0

@pytest.fixture(autouse=True)
def _curl_and_jq() -> None:
    if not (shutil.which("curl") and shutil.which("jq")):
        missing("the shell bot needs curl and jq: apt-get install -y curl jq")


def test_the_shell_bot_registers_and_plays_a_whole_game_against_a_python_bot(
    live_url: str,
) -> None:
    env = {**os.environ, "ARENA_URL": live_url, "ARENA_NAME": "sh-bot"}
    for name in ("ARENA_TOKEN", "ARENA_GAME"):
        env.pop(name, None)
    proc = subprocess.Popen(["sh", str(SHELL_BOT)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    runner: BotRunner | None = None
    thread: threading.Thread | None = None
    try:
        # the shell bot registers itself and prints its id and token first
        me = json.loads(first_line(proc, 15))
        assert ArenaClient(live_url, token=me["token"]).me().id == me["id"]

        python = ArenaClient(live_url)
        # the shell bot's owner: seated with it at once
        game = python.create_game(2, seats=[me["id"], python.register(
            "py-random", owner=me["token"]).id],
                                  variants={"target": 5})
        runner = BotRunner(python, "random", max_games=1, poll_timeout=1, check_every=0.5)
        thread = threading.Thread(target=runner.run, daemon=True)
        thread.start()

        out, err = proc.communicate(timeout=TIMEOUT)
        assert proc.returncode == 0, err
        thread.join(15)
        assert not thread.is_alive()
    finally:
        kill_bots(proc)
        if runner is not None:
            runner.stop()
        if thread is not None:
            thread.join(15)

    result = json.loads(out.strip().splitlines()[-1])
    view = ArenaClient(live_url).game(game.id)
    assert view.finished and result["game"] == game.id and result["winner"] == view.winner
    record = ArenaClient(live_url).record(game.id)
    assert record.complete and max(record.scores) >= 5
    # both sides really played: the shell bot's actions are in the record
    assert result["actions"] > 0 and runner.stats.actions > 0
    assert result["actions"] + runner.stats.actions == len(record.actions)
    assert f"playing game {game.id}" in err
