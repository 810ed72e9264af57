"""Where a token is looked at, and what an unknown one gets.

The rule, stated in the contract's description: an operation without security ignores
``Authorization`` entirely (an unknown or malformed token answers exactly as no token);
where a token is optional (views, ``/turn``, ``/events``, ``/record``) a token that is
present must be valid (401, documented there); required: 401; admin: 401/403.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.contract import load_yaml
from tests.service.conftest import ADMIN_TOKEN

UNKNOWN = {"Authorization": "Bearer not-a-token-of-anyone"}
MALFORMED = {"Authorization": "Basic Zm9vOmJhcg=="}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def spec(client) -> dict[str, Any]:
    return load_yaml(client.get("/openapi.yaml").get_data(as_text=True))


def open_operations(doc: dict[str, Any]) -> set[tuple[str, str]]:
    """(method, path) of every operation the contract says needs no token."""
    return {(m.upper(), p) for p, ops in doc["paths"].items() for m, op in ops.items()
            if not op.get("security")}  # `security: []`: public


def test_operations_without_auth_ignore_any_authorization_header(api):
    bot_id, token = api.bot("alice")
    other_id, _ = api.bot("bob")
    game = api.game(token, 2, seats=[bot_id, other_id])
    r = api.c.post("/tournaments", headers=ADMIN,
                   json={"format": "round_robin", "entrants": [bot_id, other_id]})
    assert r.status_code == 201, r.json
    tid = r.json["id"]
    over = api.c.post("/tournaments", headers=ADMIN, json={"format": "swiss",
                                                           "registration": "open"}).json["id"]
    assert api.c.post(f"/tournaments/{over}/cancel", headers=ADMIN).status_code == 200
    calls = {
        ("GET", "/healthz"): "/healthz",
        ("GET", "/readyz"): "/readyz",
        ("GET", "/leaderboard"): "/leaderboard",
        ("GET", "/tournaments"): "/tournaments",
        ("GET", "/tournaments/{tournament_id}"): f"/tournaments/{tid}",
        ("GET", "/tournaments/{tournament_id}/standings"): f"/tournaments/{tid}/standings",
        ("GET", "/tournaments/{tournament_id}/export"): f"/tournaments/{tid}/export",
        ("GET", "/tournaments/{tournament_id}/export.csv"): f"/tournaments/{tid}/export.csv",
        ("GET", "/games"): "/games",
        ("GET", "/bots/{bot_id}"): f"/bots/{bot_id}",
        ("GET", "/bots/{bot_id}/analysis"): f"/bots/{bot_id}/analysis",
        ("GET", "/ladders"): "/ladders",
        ("GET", "/ladders/{name}"): "/ladders/2p",
        ("GET", "/ladders/{name}/standings"): "/ladders/2p/standings",
        ("GET", "/ladders/{name}/bots/{bot_id}/history"): f"/ladders/2p/bots/{bot_id}/history",
        ("GET", "/tournaments/schedule"): "/tournaments/schedule",
        ("GET", "/house"): "/house",
        ("GET", "/bots/{bot_id}/games"): f"/bots/{bot_id}/games",
        # a cancelled tournament's stream: its snapshot, then its end
        ("GET", "/tournaments/{tournament_id}/events"): f"/tournaments/{over}/events",
    }
    # every operation the contract leaves open is checked here, so a new one is too
    assert set(calls) == open_operations(spec(api.c))
    for (method, _path), url in calls.items():
        body = {"name": "carol"} if method == "POST" else None
        plain = api.c.open(url, method=method, json=body)
        assert plain.status_code in (200, 201), (url, plain.json)
        for headers in (UNKNOWN, MALFORMED, ADMIN, api.auth(token)):
            r = api.c.open(url, method=method, json=body, headers=headers)
            assert r.status_code == plain.status_code, (url, headers, r.json)
            if method == "GET" and r.is_json:
                assert r.json == plain.json, url
            elif method == "GET":  # the event stream
                assert r.data == plain.data, url
    assert game["id"]


def test_an_admin_client_sending_its_token_everywhere_reads_its_tournament(api):
    ids = [api.bot(n)[0] for n in ("a", "b")]
    r = api.c.post("/tournaments", headers=ADMIN,
                   json={"format": "round_robin", "entrants": ids})
    assert r.status_code == 201
    tid = r.json["id"]
    assert api.c.get(f"/tournaments/{tid}", headers=ADMIN).status_code == 200
    assert api.c.get(f"/tournaments/{tid}/standings", headers=ADMIN).status_code == 200
    assert api.c.get("/tournaments", headers=ADMIN).json["items"][0]["id"] == tid


def test_where_a_token_is_optional_an_unknown_one_is_401_as_documented(api):
    bot_id, token = api.bot("alice")
    other_id, _ = api.bot("bob")
    gid = api.game(token, 2, seats=[bot_id, other_id])["id"]
    doc = spec(api.c)
    optional = {(m.upper(), p) for p, ops in doc["paths"].items() for m, op in ops.items()
                if op.get("security") == [{}, {"bearer": []}]}
    assert optional == {("GET", "/games/{game_id}"), ("GET", "/games/{game_id}/turn"),
                        ("GET", "/games/{game_id}/events"),
                        ("GET", "/games/{game_id}/record"), ("POST", "/house/games"),
                        ("GET", "/games/{game_id}/analysis"),
                        ("POST", "/games/{game_id}/analysis"),  # a seat's asks are free
                        ("POST", "/bots")}  # a bot's token: the new bot joins its owner
    urls = {"/games/{game_id}": f"/games/{gid}",
            "/games/{game_id}/turn": f"/games/{gid}/turn?timeout=0",
            "/games/{game_id}/events": f"/games/{gid}/events",
            "/games/{game_id}/record": f"/games/{gid}/record",
            "/games/{game_id}/analysis": f"/games/{gid}/analysis",
            "/house/games": "/house/games", "/bots": "/bots"}
    bodies = {"/house/games": {"players": 2}, "/bots": {"name": "carol"}}
    for method, path in optional:
        assert "401" in doc["paths"][path][method.lower()]["responses"], path
        r = api.c.open(urls[path], method=method, headers=UNKNOWN, json=bodies.get(path))
        assert r.status_code == 401 and r.json["type"] == "/problems/unauthorized", path
        assert r.headers["WWW-Authenticate"].startswith("Bearer")
    # required and admin: 401 documented; open: not
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            documented = "401" in op["responses"]
            assert documented == bool(op.get("security")), (method, path)
            if op.get("security") == [{"admin": []}]:
                assert "403" in op["responses"]


@pytest.mark.parametrize("sent", ["Bearer None", "Bearer null", "Bearer undefined", "Bearer "])
def test_where_a_token_is_optional_an_empty_or_none_one_is_no_token(api, sent):
    """Generated clients without a token send `Bearer None` (openapi-python-generator) or
    an empty one: where no token is needed it is read as none (issue 39: `POST /bots` was
    401); where one is required it is still 401."""
    bot_id, token = api.bot("alice")
    other_id, _ = api.bot("bob")
    gid = api.game(token, 2, seats=[bot_id, other_id])["id"]
    none = {"Authorization": sent}
    r = api.c.post("/bots", headers=none, json={"name": "carol"})
    assert r.status_code == 201, r.json
    r = api.c.get(f"/games/{gid}", headers=none)
    assert r.status_code == 200 and r.json["seat"] is None  # the spectator's view
    r = api.c.post("/games", headers=none, json={"players": 2})
    assert r.status_code == 401 and r.json["type"] == "/problems/unauthorized"
    assert api.c.get("/bots/me", headers=none).status_code == 401


def test_the_contract_states_the_rule(client):
    text = spec(client)["info"]["description"]
    assert "Authorization" in text and "ignored" in text


# the webhook operations: each needs the bot's own token
CALLBACK_OPERATIONS = {("PUT", "/bots/me/callback"), ("GET", "/bots/me/callback"),
                       ("DELETE", "/bots/me/callback"), ("POST", "/bots/me/callback/verify"),
                       ("GET", "/bots/me/callback/deliveries")}


def test_the_callback_operations_need_the_bots_token(api):
    doc = spec(api.c)
    listed = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops
              if p.startswith("/bots/me/callback")}
    assert listed == CALLBACK_OPERATIONS
    for method, path in sorted(CALLBACK_OPERATIONS):
        assert doc["paths"][path][method.lower()]["security"] == [{"bearer": []}]
        body = {"url": "https://example.org/hook"} if method == "PUT" else None
        for headers in ({}, UNKNOWN, MALFORMED, ADMIN):
            r = api.c.open(path, method=method, json=body, headers=headers)
            assert r.status_code == 401, (method, path, headers, r.json)


def test_stopping_a_tournament_needs_its_organizer_and_withdrawing_the_entrants_own(api):
    """Cancel, pause and resume are the organizer's (a bot of its owner, or
    the admin, who organizes the service's own); a withdrawal is the entrant's alone. A
    refused call changes nothing."""
    (a, ta), (b, tb) = api.bot("a"), api.bot("b")
    r = api.c.post("/tournaments", headers=ADMIN, json={"format": "round_robin",
                                                        "entrants": [a, b]})
    tid = r.json["id"]
    doc = spec(api.c)
    admin = {(m.upper(), p) for p, ops in doc["paths"].items() for m, op in ops.items()
             if op.get("security") == [{"admin": []}]}
    organizer = {(m.upper(), p) for p, ops in doc["paths"].items() for m, op in ops.items()
                 if op.get("security") == [{"bearer": []}, {"admin": []}]}
    stops = {("POST", f"/tournaments/{{tournament_id}}/{verb}")
             for verb in ("cancel", "pause", "resume", "start")}
    consent = {("POST", "/owner-invitations"), ("GET", "/admin/suspensions")} | {
        (m, f"/admin/{what}/{{{key}}}/suspension")
        for m in ("POST", "DELETE") for what, key in (("bots", "bot_id"),
                                                      ("owners", "owner_id"))}
    assert admin == consent
    assert organizer == {("POST", "/tournaments"), (
        "POST", "/tournaments/{tournament_id}/entrants/{entrant_id}/exclude")} | stops
    for _method, path in sorted(stops):
        url = path.replace("{tournament_id}", tid)
        assert api.c.post(url).status_code == 401
    # the admin's tournament: a bot's token is not its organizer's
    r = api.c.post(f"/tournaments/{tid}/cancel", headers=api.auth(ta))
    assert r.status_code == 403 and r.json["type"] == "/problems/not-organizer"
    # a wrong token is a failed admin attempt (limited per client): one is enough here
    r = api.c.post(f"/tournaments/{tid}/cancel", headers=UNKNOWN)
    assert r.status_code == 403 and r.json["type"] == "/problems/forbidden"
    withdraw = "/tournaments/{tournament_id}/entrants/{entrant_id}/withdraw"
    assert doc["paths"][withdraw]["post"]["security"] == [{"bearer": []}]
    url = f"/tournaments/{tid}/entrants/{a}/withdraw"
    assert api.c.post(url).status_code == 401
    assert api.c.post(url, headers=UNKNOWN).status_code == 401
    assert api.c.post(url, headers=ADMIN).status_code == 401  # not a bot's token
    r = api.c.post(url, headers=api.auth(tb))
    assert r.status_code == 403 and r.json["type"] == "/problems/forbidden-entrant"
    r = api.c.post(f"/tournaments/{tid}/entrants/{'0' * 12}/withdraw", headers=api.auth(tb))
    assert r.status_code == 404
    t = api.c.get(f"/tournaments/{tid}").json
    assert t["status"] == "running"
    assert [e["status"] for e in t["entrants"]] == ["in", "in"]
    r = api.c.post(url, headers=api.auth(ta))
    assert r.status_code == 200
    assert {e["bot_id"]: e["status"] for e in r.json["entrants"]}[a] == "withdrawn"


def test_a_token_never_reads_as_a_command_line_option(redis_client, key_prefix):
    """Bot tokens start with ``af_``: a bare ``token_urlsafe`` begins with "-" once in 64,
    and ``allfours bot --token -x...`` then stopped at argparse ("expected one argument"),
    as did every starter's command line built the same way."""
    from service.cli.main import build_parser
    from service.storage.store import Store

    store = Store(redis_client, key_prefix)
    tokens = [store.create_bot(f"b{i}")[1] for i in range(200)]
    assert all(t.startswith("af_") and len(t) > 40 for t in tokens)
    assert len(set(tokens)) == len(tokens)
    parser = build_parser()
    for token in tokens:
        args = parser.parse_args(["bot", "--token", token, "--server", "http://x"])
        assert args.token == token
