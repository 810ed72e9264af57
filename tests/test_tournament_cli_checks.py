"""``allfours tournament`` refuses what the service would refuse before it
starts or registers anything, and says why, option by option. Real subprocesses: the
command itself, and (for ``--server``) an ``allfours serve`` on the test Redis under a key
prefix of its own, so the bot accounts it holds can be counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REDIS_URL
from tests.test_serve import serve  # noqa: F401 (a fixture)
from tests.test_tournament_cli import run_tournament


def bots(n: int) -> str:
    return ",".join(["random"] * n)


def test_refused_before_anything_starts_with_every_reason(tmp_path: Path) -> None:
    data = tmp_path / "data"
    cases = [
        # 100 entrants: the service takes 64 at most
        (["--bots", bots(100)], ["--bots (100 entrants): a tournament takes 2 to 64"]),
        # a 64-entrant Swiss of 100 rounds: the rounds, not the games per pairing
        (["--bots", bots(64), "--format", "swiss", "--rounds", "100"],
         ["--rounds 100: 6400 games planned", "at most 15 rounds"]),
        # a 4,032-game round robin
        (["--bots", bots(64), "--games", "2"], ["--bots (64 entrants): 4032 games planned",
                                                "at most 32 entrants"]),
        # every field out of range at once, each under its own option
        (["--bots", "random,heuristic", "--games", "101", "--parallel", "0",
          "--move-limit", "0.1", "--time-bank", "4000"],
         ["--games 101:", "--parallel 0:", "--move-limit 0.1:", "--time-bank 4000.0:"]),
    ]
    for args, said in cases:
        result = run_tournament([*args, "--quiet", "--data-dir", str(data)], tmp_path,
                                timeout=60)
        assert result.returncode == 1, result.stderr
        assert "nothing was started or registered" in result.stderr, result.stderr
        for text in said:
            assert text in result.stderr, (text, result.stderr)
        assert "invalid body" not in result.stderr
        assert not data.exists(), "nothing was started"


@pytest.fixture
def served_on_test_redis(tmp_path: Path, key_prefix: str, redis_client,
                         serve) -> tuple[str, str]:  # noqa: F811 (the fixture)
    """``allfours serve`` on the test Redis under ``key_prefix`` (REDIS_URL set: no
    embedded Redis), with an admin token."""
    token = "tournament-checks-admin"
    process = serve(tmp_path / "unused-data", REDIS_URL=REDIS_URL, ARENA_KEY_PREFIX=key_prefix,
                    ARENA_ADMIN_TOKEN=token, ARENA_LOG_LEVEL="warning",
                    # no accounts but the test's, no tournaments but its (the schedule's)
                    ARENA_HOUSE_BOTS="0", ARENA_TOURNAMENT_SCHEDULE="[]")
    process.wait_healthy("/readyz")
    return process.url(""), token


def registered(redis_client, prefix: str) -> int:
    """Bot accounts the service holds (``{p}bot:{id}`` hashes)."""
    return sum(1 for key in redis_client.scan_iter(match=f"{prefix}bot:*", count=1000)
               if key.count(b":") == prefix.count(":") + 1)


def test_a_refused_tournament_registers_nobody_on_a_running_service(
        tmp_path: Path, served_on_test_redis, key_prefix: str, redis_client) -> None:
    url, token = served_on_test_redis
    server = ["--server", url, "--quiet"]
    too_many = run_tournament([*server, "--admin-token", token, "--bots", bots(100)],
                              tmp_path, timeout=60)
    assert too_many.returncode == 1
    assert "--bots (100 entrants): a tournament takes 2 to 64" in too_many.stderr
    wrong = run_tournament([*server, "--admin-token", "wrong", "--bots", bots(2)], tmp_path,
                           timeout=60)
    assert wrong.returncode == 1 and "forbidden" in wrong.stderr
    assert "nothing was registered" in wrong.stderr
    assert registered(redis_client, key_prefix) == 0, "no account was left behind"
    assert not list(redis_client.scan_iter(match=f"{key_prefix}tour:*"))
    # the same command with the settings the service accepts does register and play
    ok = run_tournament([*server, "--admin-token", token, "--bots", bots(2), "--players", "2",
                         "--games", "1", "--target", "1", "--json-out",
                         str(tmp_path / "ok.json")], tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert registered(redis_client, key_prefix) == 2
    (game,) = json.loads((tmp_path / "ok.json").read_text())["games"]
    assert game["recorded"] == 1 and [r["bot_id"] for r in game["rating"]] == game["teams"]
