"""The house's import rules hold: the layers (engine <- storage <- arena <- http <- cli),
no import circles, the cross-cutting modules and the clients each in their place. The
rules are the import-linter contracts in pyproject.toml (``[tool.importlinter]``); this
runs ``lint-imports`` on them, so CI fails on an import that breaks one, with
import-linter's own account of which import and why."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import missing

ROOT = Path(__file__).resolve().parent.parent


def lint_imports(where: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` (this interpreter's, the venv the tests run in) on the project at
    ``where``, reading its pyproject.toml."""
    found = (shutil.which("lint-imports", path=str(Path(sys.executable).parent))
             or shutil.which("lint-imports"))
    if found is None:
        missing("lint-imports (import-linter, in the test extra)")
    return subprocess.run([str(found), "--no-cache", "--no-logo"], cwd=where,
                          capture_output=True, text=True, timeout=120)


def test_every_import_contract_is_kept() -> None:
    run = lint_imports(ROOT)
    assert run.returncode == 0, f"an import breaks the house's rules:\n{run.stdout}{run.stderr}"
    assert " 0 broken" in run.stdout, run.stdout


def test_an_import_up_a_layer_or_in_a_circle_is_refused(tmp_path: Path) -> None:
    """The contracts catch what they are for: in a copy of the sources, the engine
    importing the HTTP app (up four layers), the logs importing the metrics' route
    (up, and a circle: the route imports the metrics) and the games domain importing the
    tournaments (up the arena's domains) each break a contract by name."""
    for package in ("service", "clients"):
        shutil.copytree(ROOT / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("*.so", "__pycache__", "static",
                                                      "templates", "typescript", "starters"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with (tmp_path / "service/engine/freshness.py").open("a") as f:
        f.write("\nfrom service.http import app  # noqa: E402,F401\n")
    with (tmp_path / "service/metrics.py").open("a") as f:
        f.write("\nfrom service.http import metrics_route  # noqa: E402,F401\n")
    with (tmp_path / "service/arena/games/fanout.py").open("a") as f:
        f.write("\nfrom service.arena.tournaments import standings  # noqa: E402,F401\n")
    run = lint_imports(tmp_path)
    out = run.stdout + run.stderr
    assert run.returncode != 0, out
    assert "service.engine.freshness -> service.http.app" in out, out
    assert "The arena's domains" in out, out
    assert "service.arena.games.fanout -> service.arena.tournaments.standings" in out, out
    assert "service.metrics -> service.http.metrics_route" in out, out
    assert "No import circles" in out and "BROKEN" in out, out
