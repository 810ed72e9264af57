"""The service as deployed (gunicorn, gevent, two workers — so two sweepers) enforces move
deadlines and finishes a tournament nobody plays, with no client touching the games."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import pytest

from tests.service.conftest import gunicorn


def call(url: str, body: Any = None, token: str | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


@pytest.fixture
def service(key_prefix, redis_client):
    with gunicorn(ARENA_KEY_PREFIX=key_prefix, ARENA_ADMIN_TOKEN="proc-admin",
                  ARENA_RATE_LIMIT="0") as (url, _):
        yield url


def test_gunicorn_workers_enforce_deadlines_and_run_tournaments(service):
    a = call(service + "/bots", {"name": "a"})
    b = call(service + "/bots", {"name": "b"}, a["token"])  # a's owner: seated at once
    g = call(service + "/games", {"players": 2, "seats": [a["id"], b["id"]], "seed": 3,
                                  "move_limit": 0.5}, a["token"])
    t = call(service + "/tournaments", {"format": "swiss", "entrants": [a["id"], b["id"]],
                                        "rounds": 1, "variants": {"target": 1},
                                        "move_limit": 0.5}, "proc-admin")
    end = time.monotonic() + 30
    while call(f"{service}/tournaments/{t['id']}")["status"] != "finished":
        assert time.monotonic() < end, "the tournament did not finish on timeouts"
        time.sleep(0.25)
    # The standalone game has no end in sight: its seats time out one decision after
    # another. The tournament (target 1) may finish first, so wait for three of them.
    while len(call(f"{service}/games/{g['id']}/record")["timeouts"]) < 3:
        assert time.monotonic() < end, "the standalone game's seats did not time out"
        time.sleep(0.25)
    record = call(f"{service}/games/{g['id']}/record")
    plies = [x["ply"] for x in record["timeouts"]]
    assert len(plies) >= 3
    assert plies == list(range(1, len(plies) + 1))  # each decision timed out exactly once
    st = call(f"{service}/tournaments/{t['id']}/standings")
    assert sum(row["played"] for row in st["items"]) == 4
    # Target 1: a game whose first kick scores ends before anyone can time out, so count
    # the timeouts the tournament's games really had, and check the standings add them up.
    # A game whose every decision of a side the clock made is forfeited, and a forfeited
    # game adds no timeouts: only the others' count.
    detail = call(f"{service}/tournaments/{t['id']}")
    games = [s["game_id"] for r in detail["rounds"] for s in r["games"] if not s["forfeit"]]
    recorded = sum(len(call(f"{service}/games/{gid}/record")["timeouts"]) for gid in games)
    assert sum(row["timeouts"] for row in st["items"]) == recorded
