"""The docs that can be run are run: README.md's curl walk-through and the runnable blocks
of docs/bots.md, against a real service (``allfours serve``: gunicorn with the gevent
worker, as deployed) on the test Redis under this module's own key prefix.

A block is runnable when the line before its fence is ``<!-- runnable -->``. Shell blocks
run with bash under ``set -euo pipefail``, with ``http://127.0.0.1:8000`` pointed at the
test service; the README's walk-through runs with every curl made to fail on an HTTP
error (``--fail-with-body``), so a request the walk-through shows as working must work.
docs/bots.md's shell blocks check their own answers (``test ... = ...``), since some
show errors on purpose; they run in order in one shell, as a reader would paste them.
Python blocks run on their own, with ``S`` in the environment.

The rest checks what the docs say about the code: every rule R1–R23 has its anchor in
docs/rules.md, every house rule is there with its default and values, every
``docs/rules.md#rNN`` link anywhere resolves, and the README sends readers to the docs
in the repository rather than to a path outside it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from service.arena.core.problems import KINDS
from service.engine.variants import _CHOICES, Variants
from tests.conftest import REDIS_URL, missing
from tests.test_serve import Serve, kill_leftovers

EXPECTED_S = 40  # seconds, the whole module: the order workers take it in (tests/conftest.py)

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
RULES = ROOT / "docs" / "rules.md"
BOTS = ROOT / "docs" / "bots.md"
REFERENCE = ROOT / "docs" / "reference.md"
RATINGS = ROOT / "docs" / "ratings.md"
DOC_URL = "http://127.0.0.1:8000"
MARK = "<!-- runnable -->"
RUN_TIMEOUT = 120.0


def runnable_blocks(path: Path, lang: str) -> list[str]:
    """The fenced ``lang`` blocks of ``path`` whose fence follows a ``<!-- runnable -->``
    line, in order."""
    lines = path.read_text().splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() == MARK:
            fence = lines[i + 1].strip()
            assert fence.startswith("```"), f"{path.name}:{i + 2}: {MARK} must precede a fence"
            if fence != f"```{lang}":
                continue
            end = lines.index("```", i + 2)
            blocks.append("\n".join(lines[i + 2 : end]) + "\n")
    return blocks


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, redis_client) -> Iterator[str]:
    """One real service for the module, on the test Redis under a key prefix of its own
    (deleted at the end)."""
    for tool in ("bash", "curl", "jq"):
        if shutil.which(tool) is None:
            missing(f"{tool} is not installed (.ci/run installs curl and jq)")
    prefix = f"aftest:{uuid.uuid4().hex[:12]}:"
    tmp = tmp_path_factory.mktemp("docs")
    process = Serve(tmp, tmp / "unused-data", REDIS_URL=REDIS_URL, ARENA_KEY_PREFIX=prefix)
    try:
        process.wait_healthy()
        yield process.url("")
    finally:
        process.stop()
        kill_leftovers(process.seen)
        keys = list(redis_client.scan_iter(match=f"{prefix}*", count=1000))
        for i in range(0, len(keys), 500):
            redis_client.delete(*keys[i : i + 500])


def run_shell(script: str, base: str, prelude: str = "") -> subprocess.CompletedProcess:
    assert DOC_URL in script, f"the docs' examples talk to {DOC_URL}"
    text = "set -euo pipefail\n" + prelude + script.replace(DOC_URL, base)
    return subprocess.run(
        ["bash", "-c", text], capture_output=True, text=True, timeout=RUN_TIMEOUT,
        env={**os.environ, "S": base},
    )  # fmt: skip


def explain(done: subprocess.CompletedProcess) -> str:
    return f"exit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"


# --- the README ------------------------------------------------------------------------


def test_readme_curl_walkthrough_runs_as_written(service: str) -> None:
    """The walk-through, pasted into a shell, works: every request succeeds."""
    blocks = runnable_blocks(README, "sh")
    assert len(blocks) == 1, "README.md marks exactly one runnable block: the curl walk-through"
    strict_curl = 'curl() { command curl --fail-with-body "$@"; }\n'
    done = run_shell(blocks[0], service, strict_curl)
    assert done.returncode == 0, explain(done)
    out = done.stdout
    assert "/problems/" not in out, explain(done)
    # the seat in turn saw its legal actions and the beggar's choice was applied
    assert '"your_turn": true' in out, explain(done)
    assert re.search(r'"legal_actions": \[\s*"stand",\s*"beg"\s*\]', out), explain(done)
    answers = re.findall(r'^\{"version":\d+,"turn":\d,"decision":"give_one_or_run"\}$', out, re.M)
    assert len(answers) == 2 and answers[0] == answers[1], explain(done)  # a retry: same answer
    # the dealer's long-poll answered with its choice; the events include the beg
    assert re.search(r'\[\s*"give_one",\s*"run_pack"\s*\]', out), explain(done)
    assert "event: beg" in out, explain(done)


def test_readme_points_to_the_docs_in_the_repository() -> None:
    text = README.read_text()
    assert "docs/rules.md" in text and "docs/bots.md" in text
    assert "shared/rules" not in text  # a path a user of the repository does not have


def test_readme_is_a_page_that_links_every_guide() -> None:
    """A newcomer reads the README in five minutes (at most 12 KB); everything
    else is a page under docs/, and the README's map of the guides names each of them."""
    text = README.read_text()
    assert len(text.encode()) <= 12 * 1024, len(text.encode())
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"(docs/{page.name})" in text, f"README.md does not link docs/{page.name}"


def test_readme_claims_about_notation_are_what_the_api_accepts(service: str) -> None:
    """The README (and docs/bots.md) say the API takes only the canonical names; it does."""
    a = requests.post(f"{service}/bots", json={"name": "notation"}, timeout=10).json()
    auth = {"Authorization": f"Bearer {a['token']}"}
    game = requests.post(f"{service}/games", json={"players": 2, "seats": [a["id"], a["id"]]},
                         headers=auth, timeout=10).json()
    for wrong in ("10D", "td", "Td", "as", "Beg", "STAND", " beg", "10"):
        r = requests.post(f"{service}/games/{game['id']}/actions", headers=auth, timeout=10,
                          json={"action": wrong})
        assert r.status_code == 422, (wrong, r.text)
        assert r.json()["type"] == "/problems/validation", (wrong, r.text)
    # wherever the docs name a long or lower-case form, the same paragraph says the API
    # refuses it (422) or that only the engine's parse_card (Python) takes it
    for path in (README, BOTS, ROOT / "docs" / "engine.md"):
        for paragraph in path.read_text().split("\n\n"):
            if "`10D`" in paragraph or "lower case" in paragraph:
                assert "422" in paragraph or "parse_card" in paragraph, (path.name, paragraph)


# --- docs/bots.md ----------------------------------------------------------------------


def test_bots_md_shell_examples_run_in_order(service: str) -> None:
    blocks = runnable_blocks(BOTS, "sh")
    assert len(blocks) >= 4, "docs/bots.md has runnable shell examples"
    done = run_shell("\n".join(blocks), service)
    assert done.returncode == 0, explain(done)
    assert "version-conflict" in done.stdout and "idempotency-key-reused" in done.stdout


def test_bots_md_python_examples_run(service: str, tmp_path: Path) -> None:
    blocks = runnable_blocks(BOTS, "python")
    assert blocks, "docs/bots.md has a runnable Python example"
    for n, block in enumerate(blocks):
        assert DOC_URL in block
        script = tmp_path / f"example_{n}.py"
        script.write_text(block.replace(DOC_URL, service))
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              timeout=RUN_TIMEOUT, cwd=tmp_path)
        assert done.returncode == 0, f"block {n}:\n{explain(done)}"


def test_ratings_md_checks_a_seed_commitment_as_written(service: str, tmp_path: Path) -> None:
    """The snippet a player would use to check a finished game's commitment runs
    and finds the revealed seed and salt matching."""
    blocks = runnable_blocks(RATINGS, "python")
    assert len(blocks) == 1, "docs/ratings.md has the commitment check"
    script = tmp_path / "check_commitment.py"
    script.write_text(blocks[0].replace(DOC_URL, service))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, cwd=tmp_path)
    assert done.returncode == 0, explain(done)
    assert "matches its commitment" in done.stdout, explain(done)
    assert "ratings.md" in BOTS.read_text(), "docs/bots.md links the ratings page"


def test_the_reference_names_every_problem_type() -> None:
    """A bot author learns what to do with each error the service can send."""
    text = REFERENCE.read_text()
    for kind, (status, _title) in KINDS.items():
        assert f"`{kind}`" in text, kind
        assert str(status) in text, (kind, status)


def test_the_reference_names_every_field_of_the_view() -> None:
    """docs/reference.md is where a bot author looks a field up: every property of the
    contract's ``View`` is in its table of the view."""
    from tests.contract import load_yaml

    spec = load_yaml((ROOT / "openapi.yaml").read_text())
    text = REFERENCE.read_text()
    table = text[text.index("## The view\n"):]
    table = table[:table.index("\n## ", 1)]
    named = set(re.findall(r"`(\w+)`", "\n".join(
        line.split(" | ")[0] for line in table.splitlines() if line.startswith("| `"))))
    fields = set(spec["components"]["schemas"]["View"]["properties"])
    assert fields <= named, sorted(fields - named)


def test_the_guide_and_the_reference_link_each_other() -> None:
    """The guide is read in one sitting and sends the reader to the reference for the rest;
    the reference sends a newcomer back to the guide."""
    assert "(reference.md" in BOTS.read_text() and "(bots.md" in REFERENCE.read_text()


# --- docs/rules.md -----------------------------------------------------------------------


def test_rules_md_has_an_anchor_for_every_rule_id() -> None:
    anchors = re.findall(r'<a id="(r\d+)"></a>', RULES.read_text())
    assert anchors == [f"r{n}" for n in range(1, 24)]


def test_rules_md_lists_every_house_rule_with_its_default_and_values() -> None:
    """The code (service/engine/variants.py) is the truth for the variants."""
    text = RULES.read_text()
    table = {m[0]: m for m in re.findall(r"^\| `(\w+)` \| `([^`]+)` \| (.+) \|$", text, re.M)}
    defaults = Variants().to_dict()
    assert set(table) == set(defaults)
    for name, default in defaults.items():
        shown = str(default).lower() if isinstance(default, bool) else str(default)
        assert table[name][1] == shown, (name, table[name][1], default)
        for value in _CHOICES.get(name, ()):
            assert f"`{value}`" in table[name][2], (name, value)
        if isinstance(default, bool):
            assert "`true`" in table[name][2] and "`false`" in table[name][2], name


def test_every_link_to_a_rule_resolves() -> None:
    anchors = set(re.findall(r'<a id="(r\d+)"></a>', RULES.read_text()))
    sources = [README, BOTS, REFERENCE, RULES, ROOT / "openapi.yaml",
               *(ROOT / "service").rglob("*.py")]
    linked = set()
    for path in sources:
        for anchor in re.findall(r"rules\.md#(r\d+)", path.read_text()):
            assert anchor in anchors, (path.name, anchor)
            linked.add(anchor)
    assert linked, "the README, docs/bots.md and the problems link to rules by anchor"


def anchors_of(path: Path) -> set[str]:
    """Explicit ``<a id>`` anchors and GitHub's slugs of the headings."""
    text = path.read_text()
    found = set(re.findall(r'<a id="([^"]+)"></a>', text))
    for heading in re.findall(r"^#+ (.+)$", text, re.M):
        plain = re.sub(r"<[^>]+>", "", heading).strip().lower()
        found.add(re.sub(r"[^\w\- ]", "", plain).replace(" ", "-"))
    return found


def test_every_link_between_the_docs_resolves() -> None:
    """Every relative link of the README and of each page under docs/ names a file of the
    repository, and its #anchor, if any, is a heading or anchor of that file."""
    for path in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        for target, anchor in re.findall(r"\]\(([\w./-]*?)(?:#([\w-]+))?\)",
                                         path.read_text()):
            if not target and not anchor:
                continue
            linked = (path.parent / target).resolve() if target else path
            assert linked.exists(), (path.name, target)
            if anchor:
                assert anchor in anchors_of(linked), (path.name, target, anchor)


def test_a_refused_action_points_to_its_rule_in_the_docs(service: str) -> None:
    """An illegal-action or not-your-turn problem names its rule and where it is explained."""
    a = requests.post(f"{service}/bots", json={"name": "ruled"}, timeout=10).json()
    b = requests.post(f"{service}/bots", json={"name": "other"}, timeout=10,  # a's owner
                      headers={"Authorization": f"Bearer {a['token']}"}).json()
    game = requests.post(f"{service}/games", headers={"Authorization": f"Bearer {a['token']}"},
                         json={"players": 2, "seed": 42, "seats": [a["id"], b["id"]]},
                         timeout=10).json()
    r = requests.post(f"{service}/games/{game['id']}/actions", json={"action": "beg"},
                      headers={"Authorization": f"Bearer {a['token']}"}, timeout=10)
    assert r.status_code == 409, r.text
    problem = r.json()
    assert problem["type"] == "/problems/not-your-turn" and problem["rule"] == "R23"
    assert problem["rule_doc"] == "docs/rules.md#r23"
    anchors = set(re.findall(r'<a id="(r\d+)"></a>', RULES.read_text()))
    assert problem["rule_doc"].split("#")[1] in anchors
