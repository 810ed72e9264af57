"""Every problem ``type`` resolves (issue 39): ``GET /problems/<kind>`` answers a page
saying when the problem is answered and what a bot should do, as HTML for people and the
same text as Markdown or JSON for tools; the text is one table
(``service.arena.core.problem_texts``) that docs/reference.md's error table repeats word for
word."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from service.arena.core.problem_texts import TEXTS
from service.arena.core.problems import KINDS
from tests.service.http.test_errors import problem

ROOT = Path(__file__).resolve().parents[3]


def test_every_kind_has_its_text_and_nothing_else_has_one():
    assert list(TEXTS) and set(TEXTS) == set(KINDS)
    for kind, (when, todo) in TEXTS.items():
        assert when.strip() and todo.strip(), kind


def test_the_references_problem_table_reads_as_the_texts():
    text = (ROOT / "docs" / "reference.md").read_text()
    errors = text[text.index("## Problem types\n"):]
    errors = errors[:errors.index("\n## ", 1)]
    rows = {m[1]: (m[2], m[3]) for m in re.finditer(
        r"^\| `([a-z-]+)` \| \d{3} \| (.*) \| (.*) \|$", errors, re.M)}
    assert rows == TEXTS


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_type_answers_its_page_in_three_forms(client, kind):
    status, title = KINDS[kind]
    when, todo = TEXTS[kind]
    url = f"/problems/{kind}"
    page = client.get(url, headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    assert page.status_code == 200 and page.mimetype == "text/html"
    html = page.get_data(as_text=True)
    assert f"<h1>{title}</h1>".replace("'", "&#39;") in html and f"HTTP {status}" in html
    assert "<script" not in html and "What a bot should do" in html
    md = client.get(url, headers={"Accept": "text/markdown"})
    assert md.mimetype == "text/markdown" and md.headers["Vary"] == "Accept"
    body = md.get_data(as_text=True)
    assert body.startswith(f"# {title}\n") and f"`{url}` · HTTP {status}" in body
    data = client.get(url, headers={"Accept": "application/json"}).json
    assert data["type"] == url and data["status"] == status and data["title"] == title
    # the same words in every form (the first letter capitalized, a full stop added)
    for said, text in ((data["when"], when), (data["what_to_do"], todo)):
        assert said[1:].startswith(text[1:].split("[")[0]) and said.endswith(".")
        assert said in body


def test_a_problems_type_uri_leads_to_its_page(client):
    """What a bot receives names a page that answers: follow the `type` of a real 404."""
    got = problem(client.get("/games/0123456789ab"), 404, "not-found")
    page = client.get(got["type"], headers={"Accept": "text/markdown"})
    assert page.status_code == 200 and "## What a bot should do" in page.get_data(as_text=True)


def test_an_unknown_type_is_a_404_problem_and_the_index_lists_every_type(client):
    problem(client.get("/problems/no-such-kind"), 404, "not-found")
    problem(client.get("/problems/validation", headers={"Accept": "image/png"}), 406,
            "not-acceptable")
    index = client.get("/problems", headers={"Accept": "application/json"}).json
    assert [row["type"] for row in index] == [f"/problems/{k}" for k in KINDS]
