"""``allfours check-bot`` judges real bots: the project's own bot and every starter in
clients/starters/ (seven languages) pass every situation; each deliberately broken bot
(broken_bots/, the Python starter with one fault a real author ships) fails the situation
that names its defect, and the report's first line names that cause.

Every run is the real thing: check-bot starts its own service (embedded valkey-server and
gunicorn), its real TCP proxy injects the 429, 503, lost answer, stale version and restart,
a stranger invites the bot, and the bot is a process of its own. A broken bot is run with
``--only`` its situation(s), so check-bot plays only the games they need.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from service.cli.checks.situations import SITUATIONS
from tests.conftest import missing

# a few long tests: pytest-xdist may run them on different workers (tests/conftest.py)
SPREAD_OVER_WORKERS = True
EXPECTED_S = 700  # seconds, the whole module: the order workers take it in (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
STARTERS = ROOT / "clients" / "starters"
BROKEN = Path(__file__).resolve().parent / "broken_bots"
RUN_TIMEOUT = 300.0
TOOLS = {"python": ["python3"], "javascript": ["node"], "typescript": ["node", "npm"],
         "go": ["go"], "ruby": ["ruby"], "java": ["javac", "java"], "cpp": ["g++"]}
INSTALL = {"python": "python3", "javascript": "nodejs", "typescript": "nodejs npm",
           "go": "golang-go", "ruby": "ruby",
           "java": "default-jdk-headless libgoogle-gson-java",
           "cpp": "g++ libcurl4-openssl-dev nlohmann-json3-dev"}
# what else a starter needs, beyond its tools: files Debian packages install (each group:
# one of these paths)
FILES = {"java": [[Path("/usr/share/java/gson.jar")]],
         "cpp": [[Path("/usr/include/nlohmann/json.hpp")],
                 [Path("/usr/include/curl/curl.h"),
                  *Path("/usr/include").glob("*-linux-gnu/curl/curl.h")]]}


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
    its strategies, accepting invitations from anyone as a bot that wants games does."""
    command = (f"{sys.executable} -m service.cli.main bot --strategy {strategy} "
               '--server "$ARENA_URL" --token "$ARENA_TOKEN" --log-level warning '
               "--accept-from '*'")
    status, report, out = check_bot(tmp_path, "--command", command)
    assert verdicts(report) == dict.fromkeys(SITUATIONS, True), out
    assert status == 0, out
    assert out.splitlines()[0].startswith(f"allfours check-bot: {len(SITUATIONS)} situations, "
                                          f"{len(SITUATIONS)} passed")
    assert all(s["seconds"] > 0 for s in report["situations"]), report


@pytest.mark.parametrize("language", sorted(TOOLS))
def test_each_starter_passes_every_situation(tmp_path: Path, language: str) -> None:
    for tool in TOOLS[language]:
        if not shutil.which(tool):
            missing(f"the {language} starter needs {tool}: apt-get install -y "
                    f"{INSTALL[language]}")
    for group in FILES.get(language, []):
        if not any(f.exists() for f in group):
            missing(f"the {language} starter needs {group[0]}: apt-get install -y "
                    f"{INSTALL[language]}")
    run = STARTERS / language / "run"
    assert run.stat().st_mode & 0o111, f"{run} must be executable"
    status, report, out = check_bot(tmp_path, "--", str(run))
    assert verdicts(report) == dict.fromkeys(SITUATIONS, True), out
    assert status == 0, out


# each broken bot: the situations it runs, the situations it must fail, and the cause the
# report's first line must name (the situation, and the kind of cause)
BROKEN_BOTS = [
    ("no_key", ["idempotency_key"], ["idempotency_key"], "idempotency_key", "refused"),
    ("ignore_retry_after", ["rate_limited", "unavailable"], ["rate_limited", "unavailable"],
     "rate_limited", "refused"),
    ("keyless_retry", ["lost_answer"], ["lost_answer"], "lost_answer", "refused"),
    ("busy_poll", ["no_busy_loop"], ["no_busy_loop"], "no_busy_loop", "too many requests"),
    ("slow", ["move_limit"], ["move_limit"], "move_limit", "too slow"),
    ("first_seat_only", ["four_player_two_seats"], ["four_player_two_seats"],
     "four_player_two_seats", "one seat"),
    ("ignore_invitations", ["invitation"], ["invitation"], "invitation", "invitation"),
    ("one_seat_after_reconnect", ["four_player_reconnect"], ["four_player_reconnect"],
     "four_player_reconnect", "one seat"),
    ("own_rules", ["house_rules_four_player"], ["house_rules_four_player"],
     "house_rules_four_player", "refused"),
    ("one_game_at_a_time", ["several_games"], ["several_games"], "several_games", "one game"),
    ("last_moment", ["time_bank"], ["time_bank"], "time_bank", "too slow"),
    # exits on the stale version's 409: every game it was in fails with it, and the report
    # says the exit on that answer explains them
    ("exit_on_409", ["stale_version", "four_player_two_seats", "two_player", "move_limit"],
     ["stale_version", "four_player_two_seats", "two_player", "move_limit"], "stale_version",
     "exited"),
]


@pytest.mark.parametrize(("fault", "only", "failing", "cause", "words"), BROKEN_BOTS,
                         ids=[b[0] for b in BROKEN_BOTS])
def test_a_broken_bot_fails_naming_its_situation(tmp_path: Path, fault: str, only: list[str],
                                                 failing: list[str], cause: str,
                                                 words: str) -> None:
    bot = BROKEN / f"broken_{fault}.py"
    status, report, out = check_bot(tmp_path, "--only", ",".join(only),
                                    "--", sys.executable, str(bot))
    assert status == 1, out
    assert report["passed"] is False
    got = verdicts(report)
    assert {s for s, ok in got.items() if not ok} == set(failing), out
    first = out.splitlines()[0]
    assert f"the cause: {cause} — " in first and words in first, first
    assert report["cause"]["situation"] == cause, report["cause"]
    for situation in failing:
        assert f"FAIL  {situation}" in out
        entry = next(s for s in report["situations"] if s["situation"] == situation)
        assert entry["fix"] and entry["docs"].startswith("docs/"), entry
        assert entry["real_play"], entry  # what real play would do to the bot
        assert entry["explained_by"] in ("", cause), entry
    others = [s for s in report["situations"] if not s["passed"] and s["situation"] != cause]
    assert all(s["explained_by"] == cause for s in others), others


def test_the_control_bot_passes_what_the_broken_ones_fail(tmp_path: Path) -> None:
    """The broken bots' base with no fault passes every situation: each broken bot fails
    for its fault alone."""
    status, report, out = check_bot(tmp_path, "--", sys.executable, str(BROKEN / "correct.py"))
    assert verdicts(report) == dict.fromkeys(SITUATIONS, True), out
    assert status == 0, out


def test_the_readme_bot_accepts_an_invitation(tmp_path: Path) -> None:
    """README.md's dozen-line bot, as printed there, answers a stranger's invitation (it
    does none of the rest: it is the smallest bot, not one for real play)."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## A bot in a dozen lines", 1)[1].split("```python\n", 1)[1]
    bot = tmp_path / "readme_bot.py"
    bot.write_text(block.split("```", 1)[0])
    status, report, out = check_bot(tmp_path, "--only", "invitation", "--", sys.executable,
                                    str(bot))
    assert verdicts(report) == {"invitation": True}, out
    assert status == 0 and "accepted in" in report["situations"][0]["what"], out


def test_a_bot_that_never_asks_fails_at_once(tmp_path: Path) -> None:
    status, report, out = check_bot(tmp_path, "--command", "exit 3")
    assert status == 1, out
    assert verdicts(report) == {"two_player": False}
    assert "exited (status 3) before any request" in report["situations"][0]["what"]
    assert out.splitlines()[0].endswith("the cause: two_player — the bot's process exited")


def test_an_unknown_situation_is_refused_before_anything_starts(tmp_path: Path) -> None:
    status, report, out = check_bot(tmp_path, "--only", "nonsense", "--", "true")
    assert status == 2
    assert "unknown situation" in out and "two_player" in out
    assert report == {}


def test_every_situation_points_to_a_section_that_exists() -> None:
    from service.cli.checks.situations import docs_link
    from tests.test_docs import anchors_of

    for situation in SITUATIONS:
        path, _, anchor = docs_link(situation).partition("#")
        assert anchor in anchors_of(ROOT / path), (situation, path, anchor)
    assert "check-your-bot-before-it-competes" in anchors_of(ROOT / "docs" / "bots.md")
