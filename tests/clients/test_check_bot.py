"""``allfours check-bot`` judges real bots: the project's own bot and every starter in
clients/starters/ pass every situation; each deliberately broken bot (broken_bots/, the
Python starter with one fault) fails, and the report names the situation it broke.

Every run is the real thing: check-bot starts its own service (embedded valkey-server and
gunicorn), its real TCP proxy injects the 429, 503, lost answer, stale version and restart,
and the bot is a process of its own. A broken bot is run with ``--only`` its situation, so
check-bot plays only the game that situation needs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from service.cli.check_bot import SITUATIONS
from tests.conftest import missing

# a few long tests: pytest-xdist may run them on different workers (tests/conftest.py)
SPREAD_OVER_WORKERS = True
EXPECTED_S = 340  # seconds, the whole module: the order workers take it in (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
STARTERS = ROOT / "clients" / "starters"
BROKEN = Path(__file__).resolve().parent / "broken_bots"
RUN_TIMEOUT = 280.0
TOOLS = {"python": ["python3"], "javascript": ["node"], "typescript": ["node", "npm"],
         "go": ["go"], "ruby": ["ruby"]}
INSTALL = {"python": "python3", "javascript": "nodejs", "typescript": "nodejs npm",
           "go": "golang-go", "ruby": "ruby"}


def check_bot(tmp_path: Path, *args: str) -> tuple[int, dict, str]:
    """Run ``allfours check-bot`` as a user would; (exit status, the JSON report, stdout)."""
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "service.cli.main", "check-bot", "--quiet", "--json",
         str(report), *args],
        capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=ROOT, check=False)
    data = json.loads(report.read_text()) if report.exists() else {}
    return proc.returncode, data, proc.stdout + proc.stderr


def verdicts(report: dict) -> dict[str, bool]:
    return {s["situation"]: s["passed"] for s in report.get("situations", [])}


@pytest.mark.parametrize("strategy", ["random", "heuristic", "search"])
def test_the_project_bot_passes_every_situation(tmp_path: Path, strategy: str) -> None:
    """The project's own pulling bot (clients/runner.py, ``allfours bot``) with each of
    its strategies."""
    command = (f"{sys.executable} -m service.cli.main bot --strategy {strategy} "
               '--server "$ARENA_URL" --token "$ARENA_TOKEN" --log-level warning')
    status, report, out = check_bot(tmp_path, "--command", command)
    assert verdicts(report) == dict.fromkeys(SITUATIONS, True), out
    assert status == 0, out


@pytest.mark.parametrize("language", sorted(TOOLS))
def test_each_starter_passes_every_situation(tmp_path: Path, language: str) -> None:
    for tool in TOOLS[language]:
        if not shutil.which(tool):
            missing(f"the {language} starter needs {tool}: apt-get install -y "
                    f"{INSTALL[language]}")
    run = STARTERS / language / "run"
    assert run.stat().st_mode & 0o111, f"{run} must be executable"
    status, report, out = check_bot(tmp_path, "--", str(run))
    assert verdicts(report) == dict.fromkeys(SITUATIONS, True), out
    assert status == 0, out


@pytest.mark.parametrize(("fault", "situations"), [
    ("no_key", ["idempotency_key"]),
    ("ignore_retry_after", ["rate_limited", "unavailable"]),
    ("keyless_retry", ["lost_answer"]),
    ("busy_poll", ["no_busy_loop"]),
    ("slow", ["move_limit"]),
    ("first_seat_only", ["four_player_two_seats"]),
])
def test_a_broken_bot_fails_naming_its_situation(tmp_path: Path, fault: str,
                                                 situations: list[str]) -> None:
    bot = BROKEN / f"broken_{fault}.py"
    status, report, out = check_bot(tmp_path, "--only", ",".join(situations),
                                    "--", sys.executable, str(bot))
    assert status == 1, out
    assert report["passed"] is False
    assert verdicts(report) == dict.fromkeys(situations, False), out
    for situation in situations:
        assert f"FAIL  {situation}" in out
        entry = next(s for s in report["situations"] if s["situation"] == situation)
        assert entry["fix"] and entry["docs"].startswith("docs/"), entry


def test_a_bot_that_never_asks_fails_at_once(tmp_path: Path) -> None:
    status, report, out = check_bot(tmp_path, "--command", "exit 3")
    assert status == 1, out
    assert verdicts(report) == {"two_player": False}
    assert "exited (status 3) before any request" in report["situations"][0]["what"]


def test_an_unknown_situation_is_refused_before_anything_starts(tmp_path: Path) -> None:
    status, report, out = check_bot(tmp_path, "--only", "nonsense", "--", "true")
    assert status == 2
    assert "unknown situation" in out and "two_player" in out
    assert report == {}


def test_every_situation_points_to_a_section_that_exists() -> None:
    from service.cli.check_bot import docs_link
    from tests.test_docs import anchors_of

    for situation in SITUATIONS:
        path, _, anchor = docs_link(situation).partition("#")
        assert anchor in anchors_of(ROOT / path), (situation, path, anchor)
    assert "check-your-bot-before-it-competes" in anchors_of(ROOT / "docs" / "bots.md")
