"""``allfours check-bot --webhook``: the project's webhook bot passes every situation; a
webhook bot that believes unsigned requests, or answers past the move limit, fails, and the
report names the situation.

Every run is the real thing: check-bot starts its own service (embedded valkey-server and
gunicorn, allowed to call loopback through ARENA_CALLBACK_NETWORKS), registers the bot's
callback URL behind its real TCP proxy (which cuts one call, answers one 503, holds one past
its deadline), restarts the service mid-game, and sends the bot forged, stale and replayed
requests of its own. The bot is a process of its own, started by check-bot with its
secret. A broken bot is run with ``--only`` its situation, so only the game it needs is
played.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from service.cli.checks.webhook import SITUATIONS, docs_link
from service.storage.embedded import free_port
from tests.conftest import missing

EXPECTED_S = 120  # seconds, the whole module: the order workers take it in (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "clients" / "examples"
BROKEN = Path(__file__).resolve().parent / "broken_bots"
RUN_TIMEOUT = 400.0


def check_webhook(tmp_path: Path, bot: list[str], *args: str,
                  port: int | None = None) -> tuple[int, dict, str]:
    """Run ``allfours check-bot --webhook`` as a user would; (status, report, output)."""
    port = port or free_port()
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "service.cli.main", "check-bot", "--quiet", "--json",
         str(report), "--webhook", f"http://127.0.0.1:{port}/", *args, "--",
         *[part.replace("{port}", str(port)) for part in bot]],
        capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=ROOT, check=False)
    data = json.loads(report.read_text()) if report.exists() else {}
    return proc.returncode, data, proc.stdout + proc.stderr


def verdicts(report: dict) -> dict[str, bool]:
    return {s["situation"]: s["passed"] for s in report.get("situations", [])}


def test_the_example_webhook_bot_passes_every_situation(tmp_path: Path) -> None:
    status, report, out = check_webhook(
        tmp_path, [sys.executable, str(EXAMPLES / "webhook_bot.py"), "--port", "{port}"])
    assert verdicts(report) == dict.fromkeys(SITUATIONS, True), out
    assert status == 0, out


def test_the_node_example_webhook_bot_passes_too(tmp_path: Path) -> None:
    if not shutil.which("node"):
        missing("the Node webhook bot needs node: apt-get install -y nodejs")
    status, report, out = check_webhook(tmp_path, ["node", str(EXAMPLES / "webhook_bot.mjs")])
    assert verdicts(report) == dict.fromkeys(SITUATIONS, True), out
    assert status == 0, out


@pytest.mark.parametrize(("fault", "situations"), [
    ("no_signature", ["signature"]),
    ("slow", ["move_limit"]),
])
def test_a_broken_webhook_bot_fails_naming_its_situation(tmp_path: Path, fault: str,
                                                         situations: list[str]) -> None:
    status, report, out = check_webhook(
        tmp_path, [sys.executable, str(BROKEN / f"webhook_{fault}.py")],
        "--only", ",".join(situations))
    assert status == 1, out
    assert report["passed"] is False
    assert verdicts(report) == dict.fromkeys(situations, False), out
    for situation in situations:
        assert f"FAIL  {situation}" in out
        entry = next(s for s in report["situations"] if s["situation"] == situation)
        assert entry["fix"] and entry["docs"].startswith("docs/"), entry


def test_a_webhook_bot_that_never_listens_fails_its_verification(tmp_path: Path) -> None:
    status, report, out = check_webhook(tmp_path, ["sh", "-c", "exit 3"])
    assert status == 1, out
    assert verdicts(report) == {"verification": False}
    assert "exited (status 3)" in report["situations"][0]["what"]


def test_a_webhook_url_without_a_port_is_refused_before_anything_starts(tmp_path) -> None:
    report = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "service.cli.main", "check-bot", "--json", str(report),
         "--webhook", "http://127.0.0.1/", "--", "true"],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)
    assert proc.returncode == 2 and "with its port" in proc.stderr
    assert not report.exists()


def test_every_webhook_situation_points_to_a_section_that_exists() -> None:
    from tests.test_docs import anchors_of

    for situation in SITUATIONS:
        path, _, anchor = docs_link(situation).partition("#")
        assert anchor in anchors_of(ROOT / path), (situation, path, anchor)
