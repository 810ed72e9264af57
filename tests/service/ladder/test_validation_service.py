"""The validation game with real bots (clients/runner.py BotRunner) against the real house
process, under gunicorn (two workers: two matchmakers, two sweepers) on a real Redis. The
in-process cases, step by step: tests/service/ladder/test_validation.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from clients.api import ArenaClient
from clients.runner import BotRunner
from tests.conftest import REDIS_URL
from tests.service.conftest import gunicorn

EXPECTED_S = 45  # seconds, the whole module: the order workers take it in (tests/conftest.py)

# generous for a loaded machine: a decision has 5 s and a bank of 5 s more
LADDERS = json.dumps({"quick": {"players": 2, "variants": {"target": 3}, "move_limit": 5,
                                "time_bank": 5}})


def wait_for(what: str, check: Any, seconds: float = 120.0) -> Any:
    end = time.monotonic() + seconds
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.1)


class Site:
    def __init__(self, url: str) -> None:
        self.url = url
        self.owner = 0

    def call(self, method: str, path: str, token: str | None = None, body: Any = None,
             **params: Any) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        r = requests.request(method, self.url + path, json=body, headers=headers,
                             params=params, timeout=30)
        assert r.status_code in (200, 201), (method, path, r.status_code, r.text)
        return r.json()

    def bot(self, name: str) -> tuple[str, str]:
        """A bot of an owner of its own (as any newcomer)."""
        b = self.call("POST", "/bots", body={"name": name})
        return b["id"], b["token"]

    def entry(self, token: str) -> dict[str, Any]:
        return self.call("GET", "/ladders/quick/entry", token)


@pytest.fixture(scope="module")
def site(redis_client) -> Iterator[Site]:
    prefix = f"aftest:{uuid.uuid4().hex[:12]}:"
    env = {"ARENA_KEY_PREFIX": prefix, "ARENA_RATE_LIMIT": "0", "ARENA_ACCESS_LOG": "0",
           "ARENA_LADDERS": LADDERS, "ARENA_OWNERS_PER_NETWORK": "0"}
    try:
        with gunicorn(**env) as (url, _proc):
            house = subprocess.Popen(
                [sys.executable, "-m", "service.arena.accounts.house", "--server", url],
                env={**os.environ, "REDIS_URL": REDIS_URL, **env},
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_for("the house bots", lambda: redis_client.exists(f"{prefix}house:alive"),
                         60)
                yield Site(url)
            finally:
                house.terminate()
                try:
                    house.wait(20)
                except subprocess.TimeoutExpired:
                    house.kill()
                    house.wait()
    finally:
        keys = list(redis_client.scan_iter(match=f"{prefix}*", count=1000))
        for i in range(0, len(keys), 500):
            redis_client.delete(*keys[i:i + 500])


def runner(site: Site, token: str, strategy: Any = "random") -> tuple[BotRunner, threading.Thread]:
    r = BotRunner(ArenaClient(site.url, token=token), strategy, ladder="quick",
                  poll_timeout=2.0, act_wait=2.0, check_every=0.5,
                  stop_event=threading.Event(), name="under-test")
    t = threading.Thread(target=r.run, daemon=True)
    t.start()
    return r, t


def test_a_real_bot_passes_its_validation_game_and_is_queued_unrated(site):
    _, token = site.bot("newcomer")
    # the entry is made here, so that its validation game is seen however soon the runner
    # then wins it (a poll after the runner's own join may already find it queued)
    first = site.call("POST", "/ladders/quick/entry", token, {})
    gid = first["validation_game"]
    assert first["state"] == "validating" and gid
    run, thread = runner(site, token)
    try:
        queued = wait_for("the bot queued", lambda: (lambda e: e if e["state"] in (
            "waiting", "not_admitted") else None)(site.entry(token)))
        assert queued["state"] == "waiting", queued["reason"]
        record = site.call("GET", f"/games/{gid}/record")
        assert record["complete"] and record["timeouts"] == []
        assert queued["rating"]["games"] == 0  # unrated
        assert site.call("GET", "/ladders/quick/standings")["items"] == []
        # passed once: its next entry is queued at once
        site.call("DELETE", "/ladders/quick/entry", token)
        assert site.call("POST", "/ladders/quick/entry", token, {})["state"] == "waiting"
    finally:
        run.stop()
        thread.join(15)


def test_a_bot_that_never_moves_is_not_admitted(site):
    _, token = site.bot("absent")
    e = site.call("POST", "/ladders/quick/entry", token, {})
    assert e["state"] == "validating"
    out = wait_for("not admitted", lambda: (lambda x: x if x["state"] != "validating"
                                            else None)(site.entry(token)), 90)
    assert out["state"] == "not_admitted" and "never moved" in out["reason"]
    assert out["validation_game"] == e["validation_game"]
    game = site.call("GET", f"/games/{e['validation_game']}")
    assert game["status"] == "finished"


def test_a_bot_that_stalls_mid_game_is_not_admitted_and_its_runner_stops(site):
    _, token = site.bot("stalls")
    decided = []

    def stalling(view: dict[str, Any], legal: list[str]) -> str:
        decided.append(view["version"])
        if len(decided) >= 2:  # the second decision: past its limit and its bank
            time.sleep(view["move_limit"] + (view["bank_left"] or 0) + 3)
        return legal[0]

    run, thread = runner(site, token, stalling)
    try:
        out = wait_for("not admitted", lambda: (lambda x: x if x["state"] in (
            "not_admitted", "waiting") else None)(site.entry(token)), 120)
        if len(decided) >= 2:
            assert out["state"] == "not_admitted", out
            assert "the clock played" in out["reason"]
            thread.join(30)
            assert not thread.is_alive()  # the runner read why and stopped
        else:  # the game ended before a second decision of the bot: it passed
            assert out["state"] == "waiting"
    finally:
        run.stop()
        thread.join(15)


def test_a_runner_asked_for_n_games_plays_n_rated_ones_and_leaves(site):
    """``BotRunner(max_games=1, ladder=...)`` (``allfours bot --ladder quick --games 1``):
    the unrated validation game is not one of them; each runner stops by itself after its
    rated game, and leaves no entry behind (``off``, ``games_left`` 0)."""
    bots = [site.bot(f"counts-{i}") for i in range(2)]
    tokens = [t for _, t in bots]
    runs = [BotRunner(ArenaClient(site.url, token=t), "random", ladder="quick", max_games=1,
                      poll_timeout=2.0, act_wait=2.0, check_every=0.5, name=f"counts-{i}")
            for i, t in enumerate(tokens)]
    threads = [threading.Thread(target=r.run, daemon=True) for r in runs]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join(180)
        assert not any(t.is_alive() for t in threads), "a runner did not stop by itself"
        for r, (bot_id, token) in zip(runs, bots, strict=True):
            entry = site.entry(token)
            assert entry["state"] == "off" and entry["games_left"] == 0, entry
            assert entry["rating"]["games"] == 1, entry

            def games(rated: str, bot_id: str = bot_id) -> set[str]:
                page = site.call("GET", f"/bots/{bot_id}/games", rated=rated, limit=50)
                return {g["id"] for g in page["items"]}

            # one rated game, and its validation game (another follows one that ended
            # before the bot's first decision: a kick can end a game of 3 points, R22),
            # listed once the games' after-finish hooks have run
            rated = wait_for("the rated game listed", lambda: games("true"), 30)
            validation = wait_for("the validation game listed", lambda: games("false"), 30)
            assert len(rated) == 1, (rated, entry)
            # the runner saw every game it had a decision in finish (a game a kick ended
            # before the bot's first decision it never saw)
            assert set(r.stats.finished) <= rated | validation, (r.stats, rated, validation)
            assert r.stats.games_finished >= 1, r.stats
    finally:
        for r in runs:
            r.stop()
        for t in threads:
            t.join(15)

