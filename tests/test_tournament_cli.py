"""``allfours tournament`` as a user runs it: a real subprocess, real services, real bots.

Two runs: one that starts its own service (embedded valkey-server + gunicorn) and must
leave no process behind, and one against an ``allfours serve`` already running. Each
checks the JSON results against themselves: every game finished, and standings that add
up to the games' results. Every wait is bounded; every process is stopped in a finally.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from service.cli.tournament_setup import TournamentCliError, parse_bots
from service.engine import Variants
from service.storage.embedded import free_port
from tests.test_serve import (  # serve: a fixture
    alive,
    cmdline,
    descendants,
    http_status,
    serve,  # noqa: F401
    stop_process,
)

# each test starts what it needs (no module-wide service): pytest-xdist may run them on
# different workers (tests/conftest.py)
SPREAD_OVER_WORKERS = True
EXPECTED_S = 55  # seconds, the whole module: the order workers take it in (tests/conftest.py)

ROOT = Path(__file__).resolve().parent.parent
RUN_TIMEOUT = 120.0


def test_entrant_names_are_distinct_and_valid() -> None:
    assert parse_bots("random,heuristic,heuristic, search ,heuristic") == [
        ("random", "random"), ("heuristic", "heuristic"), ("heuristic-2", "heuristic"),
        ("search", "search"), ("heuristic-3", "heuristic"),
    ]  # fmt: skip
    assert parse_bots("tests.bots:My Bot!,random")[0] == ("My Bot", "tests.bots:My Bot!")
    with pytest.raises(TournamentCliError):
        parse_bots("random")


def test_duplicate_deals_with_too_few_entrants_are_refused_before_anything_starts(
        tmp_path: Path) -> None:
    result = run_tournament(["--bots", "random,heuristic,random", "--duplicate", "--quiet",
                             "--data-dir", str(tmp_path / "data")], tmp_path)
    assert result.returncode == 1
    assert "--duplicate needs at least 4 entrants" in result.stderr
    assert "--trusted" in result.stderr
    assert not (tmp_path / "data").exists(), "nothing was started"
    odd = run_tournament(["--bots", "random,heuristic", "--trusted", "--games", "3",
                          "--quiet"], tmp_path)
    assert odd.returncode == 1 and "come in twins" in odd.stderr


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("REDIS_URL", "ARENA_ADMIN_TOKEN", "ALLFOURS_SERVER")}
    env.update(extra)
    return env


def run_tournament(args: list[str], cwd: Path, watch: dict[int, str] | None = None,
                   env: dict[str, str] | None = None, timeout: float = RUN_TIMEOUT,
                   ) -> subprocess.CompletedProcess[str]:
    """Run ``allfours tournament ARGS`` to the end (bounded). With ``watch``, every
    descendant seen while it runs is recorded there (pid → command line)."""
    out, err = cwd / "stdout.txt", cwd / "stderr.txt"
    with out.open("w") as fo, err.open("w") as fe:
        proc = subprocess.Popen(
            [sys.executable, "-m", "service.cli.main", "tournament", *args],
            cwd=cwd, env=env or _env(), stdout=fo, stderr=fe, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        try:
            while proc.poll() is None:
                if watch is not None:
                    watch.update(descendants(proc.pid))
                if time.monotonic() > deadline:
                    raise AssertionError(f"still running after {timeout}s:\n"
                                         + err.read_text())
                time.sleep(0.1)
        finally:
            if proc.poll() is None:
                stop_process(proc, signal.SIGTERM)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out.read_text(),
                                       err.read_text())


def check_results(doc: dict[str, Any], entrants: int, games: int) -> None:
    """The JSON is complete and adds up: every game over, standings = the games' results."""
    assert doc["status"] == "finished"
    assert len(doc["entrants"]) == entrants
    assert len(doc["games"]) == games == doc["progress"]["games_planned"]
    ids = {e["bot_id"] for e in doc["entrants"]}
    names = {e["bot_id"]: e["name"] for e in doc["entrants"]}
    target = doc["settings"]["variants"].get("target", 14)
    tally = {b: {"played": 0, "won": 0, "for": 0, "against": 0, "hands": 0} for b in ids}
    for g in doc["games"]:
        assert g["status"] == "done" and g["game_id"]
        assert set(g["teams"]) <= ids and g["winner"] in g["teams"]
        assert g["team_names"] == [names[t] for t in g["teams"]]
        win_team = g["teams"].index(g["winner"])
        assert max(g["scores"]) >= target and g["scores"][win_team] >= target
        for team, bot in enumerate(g["teams"]):
            t = tally[bot]
            t["played"] += 1
            t["won"] += team == win_team
            t["for"] += g["scores"][team]
            t["against"] += g["scores"][1 - team]
            t["hands"] += g["hands_won"][team]
    rows = doc["standings"]
    assert [r["rank"] for r in rows] == list(range(1, entrants + 1))
    assert sum(r["won"] for r in rows) == games
    assert sum(r["played"] for r in rows) == 2 * games
    assert sum(r["points_for"] for r in rows) == sum(r["points_against"] for r in rows)
    for r in rows:
        t = tally[r["bot_id"]]
        assert (r["played"], r["won"], r["lost"]) == (t["played"], t["won"],
                                                        t["played"] - t["won"])
        assert (r["points_for"], r["points_against"], r["hands_won"]) == (
            t["for"], t["against"], t["hands"])
        rating = r["rating"]
        assert rating["sigma"] > 0
        assert rating["ordinal"] == pytest.approx(rating["mu"] - 3 * rating["sigma"], abs=1e-3)
    assert doc["ratings_history"], "a rating snapshot per round"


def test_tournament_with_its_own_service_leaves_nothing_behind(tmp_path: Path) -> None:
    data_dir, port = tmp_path / "data", free_port()
    out = tmp_path / "results" / "t.json"
    seen: dict[int, str] = {}
    try:
        result = run_tournament(
            ["--bots", "random,heuristic", "--format", "round-robin", "--games", "2",
             "--players", "2", "--target", "3", "--trusted", "--quiet", "--json-out", str(out),
             "--data-dir", str(data_dir), "--port", str(port)],
            tmp_path, watch=seen,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        # both halves of the service really ran as our children...
        assert any("valkey-server" in c or "redis-server" in c for c in seen.values()), seen
        assert any("gunicorn" in c and f":{port}" in c for c in seen.values()), seen
        # ...and none of them (nor anything else on our port or data dir) is left
        assert not [p for p, c in seen.items() if alive(p) and cmdline(p) == c]
        others = [cmdline(int(p.name)) for p in Path("/proc").iterdir() if p.name.isdigit()]
        assert not [c for c in others if str(data_dir) in c or f"127.0.0.1:{port} " in c]
        assert http_status(f"http://127.0.0.1:{port}/healthz", 1) == 0

        doc = json.loads(out.read_text())
        check_results(doc, entrants=2, games=2)
        assert doc["settings"]["players"] == 2
        assert doc["settings"]["games_per_pairing"] == 2
        # two entrants: duplicate deals only as trusted twins (one deal, the teams swapped)
        assert doc["settings"]["duplicate"] is True and doc["settings"]["trusted"] is True
        # every house rule in force, as every `variants` object of the contract has them
        assert doc["settings"]["variants"] == {**Variants().to_dict(), "target": 3}
        first, second = doc["games"]
        assert first["seed"] == second["seed"] and first["teams"] == second["teams"][::-1]
        assert [r["comparisons"] for r in doc["standings"]] == [2, 2]
        assert sorted(r["matchpoints"] for r in doc["standings"]) in ([0, 2], [1, 1])
        assert [e["name"] for e in doc["entrants"]] == ["random", "heuristic"]
        assert (data_dir / "appendonly.aof").exists() or (data_dir / "appendonlydir").is_dir()
        assert "Standings" in result.stdout and "heuristic" in result.stdout
    finally:
        for pid, line in seen.items():
            if alive(pid) and cmdline(pid) == line:
                os.kill(pid, signal.SIGKILL)


def test_a_knockout_runs_end_to_end_and_prints_its_bracket(tmp_path: Path) -> None:
    """Five real bots (runners over HTTP) on the command's own service: three byes to the
    top seeds, four rounds of matches played to a champion, the bracket printed and in the
    JSON, the standings by the round reached."""
    out = tmp_path / "ko.json"
    result = run_tournament(
        ["--bots", "heuristic,random,heuristic,random,random", "--format", "knockout",
         "--games", "2", "--players", "2", "--target", "3", "--quiet", "--seed", "6",
         "--json-out", str(out)], tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = json.loads(out.read_text())
    check_results(doc, entrants=5, games=len(doc["games"]))
    br = doc["bracket"]
    names = {e["bot_id"]: e["name"] for e in doc["entrants"]}
    # nobody is rated on a fresh service: seeded in --bots order, byes to seeds 1-3
    assert [names[s["bot_id"]] for s in br["seeds"]] == [
        "heuristic", "random", "heuristic-2", "random-2", "random-3"]
    first = br["rounds"][0]["matches"]
    assert [m["status"] for m in first] == ["bye", "done", "bye", "bye"]
    assert [r["name"] for r in br["rounds"]] == ["quarterfinals", "semifinals", "final"]
    final = br["rounds"][-1]["matches"][0]
    assert br["champion"] == final["winner"] and final["decided_by"] in ("games", "points",
                                                                        "seed")
    assert [r["place"] for r in doc["standings"]] == ["1", "2", "3-4", "3-4", "5"]
    assert doc["standings"][0]["bot_id"] == br["champion"]
    assert "Bracket" in result.stdout and "round 3: final" in result.stdout
    assert f"champion: {names[br['champion']]}" in result.stdout
    bad = run_tournament(["--bots", "random,random", "--format", "knockout", "--rounds", "2",
                          "--quiet"], tmp_path)
    assert bad.returncode == 1 and "--rounds is for --format swiss" in bad.stderr


def test_command_bots_of_any_language_play_the_built_in_strategies(tmp_path: Path) -> None:
    """Two --bot-cmd entrants (the Python starter; a command line as any language's) and
    one built-in: each command started with ARENA_URL and ARENA_TOKEN, playing its games
    over HTTP to the end, its output in bot-NAME.log; a command that exits ends the run."""
    out = tmp_path / "cmd.json"
    starter = ROOT / "clients" / "starters" / "python" / "run"
    result = run_tournament(
        ["--bot-cmd", str(starter), "--bot-name", "mine", "--bot-cmd", str(starter),
         "--bots", "heuristic", "--games", "1", "--players", "2", "--target", "3",
         "--quiet", "--json-out", str(out)], tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = json.loads(out.read_text())
    check_results(doc, entrants=3, games=len(doc["games"]))
    assert sorted(e["name"] for e in doc["entrants"]) == ["cmd", "heuristic", "mine"]
    played = {r["bot_name"]: r["played"] for r in doc["standings"]}
    assert played == {"mine": 2, "cmd": 2, "heuristic": 2}
    assert (tmp_path / "bot-mine.log").exists() and "mine (command)" in result.stdout
    dead = run_tournament(["--bot-cmd", "exit 3", "--bots", "random", "--players", "2",
                           "--quiet", "--move-limit", "5"], tmp_path)
    assert dead.returncode == 1 and "exited with status 3" in dead.stderr


@pytest.fixture
def running_service(tmp_path: Path, serve) -> tuple[str, str]:  # noqa: F811 (the fixture)
    """``allfours serve`` with an admin token, on its own embedded Redis."""
    token = "tournament-cli-admin"
    process = serve(tmp_path / "serve-data", ARENA_ADMIN_TOKEN=token,
                    ARENA_LOG_LEVEL="warning")
    process.wait_healthy("/readyz")
    return process.url(""), token


def test_tournament_against_a_running_service(tmp_path: Path, running_service) -> None:
    url, token = running_service
    bad = run_tournament(["--server", url, "--admin-token", "wrong", "--bots", "random,random",
                          "--quiet"], tmp_path)
    assert bad.returncode == 1
    assert "forbidden" in bad.stderr

    out = tmp_path / "swiss.json"
    result = run_tournament(
        ["--server", url, "--admin-token", token, "--bots", "random,random,heuristic",
         "--format", "swiss", "--rounds", "2", "--games", "2", "--players", "4",
         "--variant", "target=3", "--move-limit", "30", "--time-bank", "60", "--quiet",
         "--json-out", str(out)],
        tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = json.loads(out.read_text())
    # 3 entrants: each Swiss round is one pairing of 2 games and a bye
    check_results(doc, entrants=3, games=4)
    assert [e["name"] for e in doc["entrants"]] == ["random", "random-2", "heuristic"]
    assert doc["settings"]["format"] == "swiss" and doc["settings"]["players"] == 4
    assert doc["settings"]["move_limit"] == 30 and doc["settings"]["time_bank"] == 60
    assert doc["settings"]["duplicate"] is False, "3 entrants: a deal per game by default"
    assert len(doc["byes"]) == 2
    assert doc["server"] == url
    assert http_status(url + "/readyz") == 200, "an outside service is left running"
    # no admin token: the entrants are one owner's bots, which organizes the tournament
    mine = run_tournament(["--server", url, "--bots", "random,heuristic", "--players", "2",
                           "--games", "1", "--variant", "target=3", "--quiet",
                           "--json-out", str(tmp_path / "mine.json")], tmp_path)
    assert mine.returncode == 0, mine.stderr
    assert "one owner's bots, which organizes" in mine.stderr
    tid = json.loads((tmp_path / "mine.json").read_text())["tournament_id"]
    with urllib.request.urlopen(f"{url}/tournaments/{tid}") as r:
        t = json.loads(r.read())
    assert t["organizer"] is not None and t["rated"] is False


def test_the_default_rate_limit_lets_the_bundled_runner_play_at_full_speed(
        tmp_path: Path, running_service) -> None:
    """With the service's DEFAULT limits (``allfours serve`` with no
    ARENA_RATE_LIMIT in its environment), four runners play a 4-player round robin of 8
    games a pairing (48 games) without one 429: not for a bot, not for the CLI's own
    anonymous polling."""
    url, token = running_service
    assert "ARENA_RATE_LIMIT" not in _env() and "ARENA_RATE_WINDOW" not in _env()
    out = tmp_path / "full-speed.json"
    result = run_tournament(
        ["--server", url, "--admin-token", token,
         "--bots", "random,random,heuristic,heuristic", "--players", "4", "--games", "8",
         "--variant", "target=7", "--quiet", "--json-out", str(out)],
        tmp_path, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    said = result.stdout + result.stderr  # the client's retry warnings, wherever logged
    assert " 429" not in said and "rate-limited" not in said, said
    doc = json.loads(out.read_text())
    check_results(doc, entrants=4, games=48)
    for e in doc["entrants"]:
        assert e["runner"]["rate_limited"] == 0, e
        assert e["runner"]["errors"] == 0, e
