"""Bad input that used to get a wrong answer: deeply nested
JSON, ids that are not ids, and the security headers of every answer."""

from __future__ import annotations

import pytest

from service.http.api import JSON_MAX_DEPTH
from tests.service.http.test_errors import PJ, problem  # noqa: F401 (PJ: a constant some use)

# --- 4: nesting depth -------------------------------------------------------------------------


@pytest.mark.parametrize("body", ["[" * 8000, "{\"a\":" * 3000], ids=["arrays", "objects"])
def test_deeply_nested_json_is_a_400_not_a_500(api, body):
    """``'[' * 8000`` used to raise RecursionError inside json.loads: a 500."""
    _, token = api.bot()
    for path in ("/bots", "/games"):
        r = api.c.post(path, data=body.encode(), content_type="application/json",
                       headers=api.auth(token))
        assert "nested" in problem(r, 400, "malformed-json")["detail"]


def test_nesting_limit_is_exact_and_stated(api, client):
    """Up to JSON_MAX_DEPTH levels parse (and then fail validation as usual); one more is
    refused before any schema sees it. The contract states the limit."""
    ok = "[" * JSON_MAX_DEPTH + "]" * JSON_MAX_DEPTH
    problem(api.c.post("/bots", data=ok, content_type="application/json"), 422, "validation")
    deep = '{"name":' + "[" * JSON_MAX_DEPTH + "]" * JSON_MAX_DEPTH + "}"
    problem(api.c.post("/bots", data=deep, content_type="application/json"),
            400, "malformed-json")
    # brackets inside strings are text, not nesting
    r = api.c.post("/bots", json={"name": "[" * 60})
    assert r.status_code == 422  # too long a name, but parsed
    spec = client.get("/openapi.yaml").get_data(as_text=True)
    assert f"nested at most {JSON_MAX_DEPTH} levels" in spec


# --- 5: ids are checked before they become Redis keys -----------------------------------------


def test_bot_id_with_key_suffix_is_404_not_503(api):
    """``/bots/{id}:turns`` made the key ``bot:{id}:turns``: the bot's set of turns, a
    Redis type error (503) once the bot had a turn."""
    bot_id, token = api.bot("a")
    other, _ = api.bot("b")
    api.game(token, 2, seats=[bot_id, other], seed=1)
    for suffix in (":turns", ":turn", "", "x"):
        if suffix:
            problem(api.c.get(f"/bots/{bot_id}{suffix}"), 404, "not-found")
    assert api.c.get(f"/bots/{bot_id}").status_code == 200


@pytest.mark.parametrize("path", [
    "/bots/{id}:turns",
    "/games/{id}:changed",
    "/games/{id}:changed/turn",
    "/games/{id}:changed/record",
    "/games/{id}:changed/events",
    "/tournaments/{id}:x",
    "/tournaments/{id}:x/standings",
    "/games/ABCDEFABCDEF",
    "/games/*",
])
def test_every_path_id_is_validated(api, path):
    bot_id, token = api.bot("a")
    game = api.game(token, 2)
    ident = bot_id if path.startswith("/bots") else game["id"]
    r = api.c.get(path.replace("{id}", ident), headers=api.auth(token))
    problem(r, 404, "not-found")
    for post in ("/games/{id}:changed/actions", "/games/{id}:changed/seats/1"):
        r = api.c.post(post.replace("{id}", game["id"]), json={"action": "stand"},
                       headers=api.auth(token))
        problem(r, 404, "not-found")


# --- 7: security headers ----------------------------------------------------------------------


def _headers_ok(r) -> str:
    assert r.headers["X-Content-Type-Options"] == "nosniff", r.headers
    assert r.headers["X-Frame-Options"] == "DENY"
    csp = r.headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in csp
    return csp


def test_every_answer_is_nosniff_and_unframeable(api):
    bot_id, token = api.bot()
    game = api.game(token, 2)
    answers = [
        api.c.get("/healthz"), api.c.get("/games"), api.c.get(f"/bots/{bot_id}"),
        api.view(game["id"], token), api.c.get("/openapi.yaml"),
        api.c.get("/games/000000000000"), api.c.post("/bots", data=b"{"),
        api.c.delete("/games"), api.c.get("/bots/me"),
        api.c.get(f"/games/{game['id']}/events", query_string={"last_event_id": "x"}),
    ]
    for r in answers:
        csp = _headers_ok(r)
        assert csp.startswith("default-src 'none'"), (r.request.path, csp)
    # the pages keep their own policy (scripts and styles from the service itself)
    for path in ("/", f"/games/{game['id']}/replay"):
        csp = _headers_ok(api.c.get(path, headers={"Accept": "text/html"}))
        assert "script-src 'self'" in csp


def test_docs_page_allows_its_own_inline_script_by_hash_only(client):
    import base64
    import hashlib
    import re

    r = client.get("/docs/try/")  # swagger-ui, to try requests
    assert r.status_code == 200 and r.mimetype == "text/html"
    csp = _headers_ok(r)
    script_src = re.search(r"script-src ([^;]*)", csp).group(1).split()
    assert "'unsafe-inline'" not in csp and "'unsafe-eval'" not in csp
    inline = re.findall(rb"<script>(.*?)</script>", r.data, re.DOTALL)
    assert len(inline) == 1
    digest = base64.b64encode(hashlib.sha256(inline[0]).digest()).decode()
    assert script_src == ["'self'", f"'sha256-{digest}'"]
    # assets are local and sniff-proof too
    asset = client.get("/docs/try/swagger-ui-bundle.js")
    assert asset.status_code == 200
    assert asset.headers["X-Content-Type-Options"] == "nosniff"
    assert b"validator.swagger.io" not in r.data  # no badge image from elsewhere
