"""A stranger's bots find the next scheduled tournament and play it to the end, with no
admin token configured anywhere: the service under gunicorn (two workers, each with its
tournament clock), a schedule of its own, and two owners' bots over real HTTP — one the
JavaScript starter run as a process (``ARENA_ENTER=next``), the other a Python client and
runner. Both enter by themselves, the clock starts the tournament at its time, and both
appear in its final standings."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

from clients.api import ArenaClient
from clients.runner import BotRunner
from service.cli.bot_process import start_bot, stop_bot
from tests.conftest import missing
from tests.service.conftest import gunicorn

ROOT = Path(__file__).resolve().parents[3]
STARTER = ROOT / "clients" / "starters" / "javascript" / "run"
EXPECTED_S = 60
EVERY_S = 15  # a tournament starts every 15 s; made 15 s ahead
SCHEDULE = [{"name": "quick", "every": EVERY_S, "ahead": EVERY_S, "tournament": {
    "name": "Quick Swiss", "format": "swiss", "registration": "open", "rounds": 2,
    "games_per_pairing": 1, "players": 2, "variants": {"target": 5}, "move_limit": 5,
    "min_entrants": 2, "max_entrants": 8}}]


def test_two_owners_bots_one_a_javascript_process_find_enter_and_finish_a_scheduled_one(
        tmp_path, key_prefix):
    if shutil.which("node") is None:
        missing("the JavaScript starter needs node: apt-get install -y nodejs")
    settings = {"ARENA_KEY_PREFIX": key_prefix, "ARENA_ADMIN_TOKEN": "",
                "ARENA_RATE_LIMIT": "0", "ARENA_OWNERS_PER_NETWORK": "0",
                "ARENA_ANALYSIS_WORKERS": "0", "ARENA_HOUSE_BOTS": "0",
                "ARENA_TOURNAMENT_SCHEDULE": json.dumps(SCHEDULE)}
    with gunicorn(**settings) as (url, _proc):
        schedule = ArenaClient(url)._call("getTournamentSchedule")["items"]
        assert schedule[0]["name"] == "quick"
        js_client, py_client = ArenaClient(url), ArenaClient(url)
        js_bot = js_client.register("js-starter")  # one owner
        py_bot = py_client.register("py-runner")  # another
        assert js_bot.id != py_bot.id
        node = start_bot(str(STARTER), url, js_client.token or "", tmp_path / "js.log",
                         {"ARENA_ENTER": "next"})
        stop = threading.Event()
        runner = BotRunner(py_client, "random", stop_event=stop, poll_timeout=1.0)
        thread = threading.Thread(target=runner.run, daemon=True)
        thread.start()
        try:
            done = _play_until_both_finish_one(url, py_client, js_bot.id, py_bot.id, node)
        finally:
            stop.set()
            stop_bot(node)
            thread.join(10)
        log = (tmp_path / "js.log").read_text()
        assert f"entered tournament {done['id']}" in log, log
        rows = ArenaClient(url)._call("getStandings",
                                      tournament_id=done["id"])["items"]
        assert {r["bot_id"] for r in rows} >= {js_bot.id, py_bot.id}
        assert all(r["played"] > 0 for r in rows if r["bot_id"] in (js_bot.id, py_bot.id))
        assert done["organizer"] is None and done["schedule"] == "quick"


def _play_until_both_finish_one(url: str, py: ArenaClient, js_id: str, py_id: str,
                                node: object) -> dict:
    """The Python bot enters the soonest tournament (again after one of its is cancelled
    for want of entrants, as the starter does on its notice); the answer is the first
    finished tournament both bots entered."""
    viewer = ArenaClient(url)
    mine: str | None = None
    deadline = time.monotonic() + 6 * EVERY_S + 60
    while time.monotonic() < deadline:
        assert node.poll() is None, "the JavaScript bot exited"  # type: ignore[attr-defined]
        if mine is None:
            entered = py.enter_next()
            mine = entered.id if entered else None
        if mine is not None:
            t = viewer.tournament(mine).raw
            ids = {e["bot_id"] for e in t["entrants"]}
            if t["status"] == "finished" and {js_id, py_id} <= ids:
                return t
            if t["status"] in ("finished", "cancelled"):
                mine = None
        time.sleep(0.5)
    raise AssertionError("no tournament was finished by both bots")
