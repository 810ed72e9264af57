"""openapi.yaml through two linters bot authors' tools build on (issue 39): Redocly CLI
(`recommended`) and Spectral (`spectral:oas`), pinned by tests/clients/generated/'s
package.json. No errors; a warning only where tests/clients/generated/lint-accepted.yaml
lists its rule, at the places listed, with why the rule is wrong for this API; and a
listed warning that no longer fires must leave the list.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema_rs

from tests.clients.test_generated_clients import ROOT, TS, _run, npm_ready
from tests.contract import load_yaml

EXPECTED_S = 20  # seconds, the whole module (tests/conftest.py)

ACCEPTED = load_yaml((TS / "lint-accepted.yaml").read_text())


def _lint(script: str) -> Any:
    done = _run([npm_ready(), "run", "-s", script], TS)
    out = done.stdout
    return json.loads(out[:out.rindex("]") + 1] if out.lstrip().startswith("[") else out)


def _check(found: dict[str, set[str]], accepted: dict[str, Any]) -> None:
    for rule, places in found.items():
        assert rule in accepted, f"{rule} at {sorted(places)} is not accepted"
        listed = accepted[rule]["at"]
        assert accepted[rule]["reason"].strip(), rule
        assert all(any(p.startswith(a) for a in listed) for p in places), (rule, places)
    stale = set(accepted) - set(found)
    assert not stale, f"accepted but no longer found: {stale}"


def test_redocly_recommended_finds_no_error_and_only_accepted_warnings() -> None:
    report = _lint("lint:redocly")
    assert report["totals"]["errors"] == 0, [p for p in report["problems"]
                                             if p["severity"] == "error"]
    found: dict[str, set[str]] = {}
    for p in report["problems"]:
        found.setdefault(p["ruleId"], set()).add(p["location"][0]["pointer"])
    _check(found, ACCEPTED["redocly"])


def test_spectral_oas_finds_no_error_and_only_accepted_warnings() -> None:
    results = _lint("lint:spectral")
    assert not [r for r in results if r["severity"] == 0], results  # 0: error
    found: dict[str, set[str]] = {}
    for r in results:
        found.setdefault(r["code"], set()).add("#/" + "/".join(
            str(p).replace("~", "~0").replace("/", "~1") for p in r["path"]))
    _check(found, ACCEPTED["spectral"] or {})


def test_the_examples_redocly_refuses_are_valid() -> None:
    """The reason given for `no-invalid-media-type-examples`, checked: each example is
    valid JSON Schema 2020-12."""
    doc = load_yaml((ROOT / "openapi.yaml").read_text())
    for pointer in ACCEPTED["redocly"]["no-invalid-media-type-examples"]["at"]:
        path, method = pointer.split("/")[2].replace("~1", "/"), pointer.split("/")[3]
        media = doc["paths"][path][method]["requestBody"]["content"]["application/json"]
        validator = jsonschema_rs.validator_for({**doc, **media["schema"]})
        assert validator.is_valid(media["example"]), list(validator.iter_errors(
            media["example"]))
