"""Every problem kind: status, stable type, problem+json, and no state change."""

from __future__ import annotations

import pytest
import redis

from service.http.app import create_app
from tests.conftest import REDIS_URL

PJ = "application/problem+json"


def problem(resp, status: int, kind: str) -> dict:
    assert resp.status_code == status, (resp.status_code, resp.get_data(as_text=True))
    assert resp.mimetype == PJ
    body = resp.get_json(force=True)
    assert body["type"] == f"/problems/{kind}"
    assert body["status"] == status and body["title"]
    return body


@pytest.fixture
def table(api):
    game_id, tokens = api.table(4, 11)
    return game_id, tokens


def test_validation_names_the_fields(api):
    _, token = api.bot()
    r = api.c.post("/games", json={"players": 3, "colour": "red"}, headers=api.auth(token))
    body = problem(r, 422, "validation")
    assert set(body["errors"]) == {"players", "colour"}
    r = api.c.post("/games", json={"players": 2, "variants": {"target": 0, "nope": 1}},
                   headers=api.auth(token))
    assert set(problem(r, 422, "validation")["errors"]["variants"]) == {"target", "nope"}
    r = api.c.post("/games", json={"players": 2, "seats": ["abcdefabcdef", None]},
                   headers=api.auth(token))
    assert "seats" in problem(r, 404, "not-found")["errors"]
    r = api.c.post("/bots", json={"name": ""})
    assert "name" in problem(r, 422, "validation")["errors"]
    r = api.c.get("/games", query_string={"limit": 0, "junk": 1})
    assert set(problem(r, 422, "validation")["errors"]) == {"limit", "junk"}


def test_malformed_json_and_wrong_shape(api):
    r = api.c.post("/bots", data=b"{nope", content_type="application/json")
    problem(r, 400, "malformed-json")
    r = api.c.post("/bots", json=[1, 2])
    problem(r, 422, "validation")
    r = api.c.post("/bots", data=b"", content_type="application/json")
    problem(r, 422, "validation")


def test_not_found_and_method_not_allowed(api):
    problem(api.c.get("/games/000000000000"), 404, "not-found")
    problem(api.c.get("/bots/000000000000"), 404, "not-found")
    problem(api.c.get("/no/such/path"), 404, "not-found")
    r = api.c.delete("/games")
    problem(r, 405, "method-not-allowed")
    assert "GET" in r.headers["Allow"]


def test_unauthorized(api, table):
    game_id, _ = table
    r = api.act(game_id, None, "stand")
    problem(r, 401, "unauthorized")
    assert r.headers["WWW-Authenticate"].startswith("Bearer")
    problem(api.act(game_id, "not-a-token", "stand"), 401, "unauthorized")
    r = api.c.get(f"/games/{game_id}", headers={"Authorization": "Basic x"})
    problem(r, 401, "unauthorized")
    problem(api.view(game_id, seat=1), 401, "unauthorized")


def test_forbidden_seat_and_not_your_turn(api, table):
    game_id, tokens = table
    _, stranger = api.bot("stranger")
    before = api.view(game_id).json
    problem(api.act(game_id, stranger, "stand"), 403, "forbidden-seat")
    turn = before["turn"]
    other = (turn + 1) % 4
    problem(api.view(game_id, tokens[other], seat=turn), 403, "forbidden-seat")
    body = problem(api.act(game_id, tokens[other], "stand"), 409, "not-your-turn")
    assert body["rule"] == "R23"
    assert api.view(game_id).json == before


def test_illegal_action_names_the_rule_and_changes_nothing(api, table):
    game_id, tokens = table
    before = api.view(game_id).json
    turn = before["turn"]
    hand = api.view(game_id, tokens[turn]).json["hand"]
    body = problem(api.act(game_id, tokens[turn], hand[0]), 409, "illegal-action")
    assert body["rule"] == "R8" and body["detail"].startswith("R8: ")
    body = problem(api.act(game_id, tokens[turn], "give_one"), 409, "illegal-action")
    assert api.view(game_id).json == before
    body = problem(api.act(game_id, tokens[turn], "XX"), 422, "validation")
    assert "action" in body["errors"]


def test_illegal_card_reveals_no_hidden_card(api):
    """R14 refusals name only the tried card and public facts."""
    from service.engine import CARD_NAMES

    for seed in range(30):
        game_id, tokens = api.table(2, seed)
        v = api.view(game_id).json
        api.act(game_id, tokens[v["turn"]], "stand")
        lead = api.view(game_id, tokens[v["turn"]]).json
        api.act(game_id, tokens[lead["turn"]], lead["legal_actions"][0])
        follower = api.view(game_id).json["turn"]
        mine = api.view(game_id, tokens[follower]).json
        illegal = sorted(set(mine["hand"]) - set(mine["legal_actions"]))
        if not illegal:
            continue
        body = problem(api.act(game_id, tokens[follower], illegal[0]), 409, "illegal-action")
        assert body["rule"] == "R14"
        others = set(CARD_NAMES) - set(mine["hand"]) - {lead["legal_actions"][0]}
        others -= {k["card"] for k in mine["kicks"]}
        assert not any(c in body["detail"] for c in others)
        return
    pytest.fail("no seed in 0..29 produced an R14 refusal: widen the search")


def test_waiting_game_and_seats(api):
    _, t0 = api.bot("a")
    _, t1 = api.bot("b")
    game = api.game(t0, 2)
    assert game["status"] == "waiting"
    problem(api.act(game["id"], t0, "stand"), 409, "game-not-started")
    r = api.c.post(f"/games/{game['id']}/seats/0", headers=api.auth(t1))
    problem(r, 409, "seat-taken")
    problem(api.c.post(f"/games/{game['id']}/seats/3", headers=api.auth(t1)), 404, "not-found")
    r = api.c.post(f"/games/{game['id']}/seats/1", headers=api.auth(t1))
    assert r.status_code == 200 and r.json["status"] == "active" and r.json["seat"] == 1
    assert r.json["version"] == game["version"] + 1


def test_version_conflict_and_precondition(api, table):
    game_id, tokens = table
    v = api.view(game_id).json
    t = tokens[v["turn"]]
    body = problem(api.act(game_id, t, "stand", version=v["version"] + 5), 409,
                   "version-conflict")
    assert body["current_version"] == v["version"]
    r = api.act(game_id, t, "stand", headers={"If-Match": f'"{v["version"] - 1}"'})
    problem(r, 412, "precondition-failed")
    assert api.view(game_id).json == v
    r = api.act(game_id, t, "stand", headers={"If-Match": f'"{v["version"]}"'})
    assert r.status_code == 200 and r.json["version"] == v["version"] + 1
    assert r.headers["ETag"] == f'"{v["version"] + 1}"'


def test_payload_too_large(api):
    r = api.c.post("/bots", data=b'{"name": "' + b"x" * 40000 + b'"}',
                   content_type="application/json")
    problem(r, 413, "payload-too-large")


def test_rate_limited(key_prefix):
    app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                      "ARENA_RATE_LIMIT": 3, "ARENA_RATE_WINDOW": 60})
    c = app.test_client()
    for _ in range(3):
        assert c.get("/games").status_code == 200
    r = c.get("/games")
    problem(r, 429, "rate-limited")
    assert 1 <= int(r.headers["Retry-After"]) <= 60
    assert c.get("/healthz").status_code == 200


def test_redis_down_is_503_and_recovers(key_prefix, redis_client):
    app = create_app({"REDIS_URL": "redis://127.0.0.1:1/0", "ARENA_KEY_PREFIX": key_prefix})
    c = app.test_client()
    r = c.get("/games")
    problem(r, 503, "service-unavailable")
    assert r.headers["Retry-After"]
    problem(c.get("/readyz"), 503, "service-unavailable")
    assert c.get("/healthz").status_code == 200
    if not isinstance(redis_client, redis.Redis):
        return  # a cluster: the recovery below repoints a single Redis client's pool
    # "Redis comes back": point the same app's pool at a live server.
    store = app.extensions["arena"].store
    store.r.connection_pool.reset()
    store.r.connection_pool.connection_kwargs.update(
        redis.Redis.from_url(REDIS_URL).connection_pool.connection_kwargs
    )
    assert c.get("/readyz").status_code == 200
    assert c.get("/games").status_code == 200


def test_the_cluster_clients_node_table_race_in_a_failover_is_a_503(key_prefix, redis_client):
    """redis-py's cluster client, handling a lost node, can trip over its own node table
    rebuilt by another thread ("dictionary keys changed during iteration", seen in the
    threaded failover test): that request met a failover, so 503 and Retry-After like the
    connection error it was handling; a RuntimeError of any other origin stays a 500."""
    app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix})
    c = app.test_client()
    r = app.extensions["arena"].store.r

    def race(*_args, **_kwargs):
        try:
            raise redis.ConnectionError("Error 111 connecting to 127.0.0.1:1.")
        except redis.ConnectionError:
            raise RuntimeError("dictionary keys changed during iteration")  # noqa: B904

    r.execute_command = race
    resp = c.get("/games")
    problem(resp, 503, "service-unavailable")
    assert resp.headers["Retry-After"]

    from service.http.problems import _failing_over

    assert not _failing_over(RuntimeError("dictionary keys changed during iteration"))


def test_a_pattern_matches_the_whole_string_not_up_to_a_final_newline(client):
    """JSON Schema's ``^…$`` ends at the string's end; Python's ``$`` would also match
    before a final newline, so ``"alice\\n"`` must be refused as the contract says."""
    r = client.post("/bots", json={"name": "alice\n"})
    problem(r, 422, "validation")
    assert "name" in r.json["errors"]


def test_person_is_a_json_boolean(client):
    """``person`` is true or false: 0, 1 or "yes" are mistakes worth reporting."""
    for wrong in (0, 1, "yes"):
        r = client.post("/bots", json={"name": "ann", "person": wrong})
        problem(r, 422, "validation")


def test_the_bots_error_table_lists_every_problem_kind_with_its_status():
    """docs/reference.md's table of problem types has a row for every kind of
    ``problems.KINDS`` (the one registry), with its status, and nothing else; a kind
    answered with ``Retry-After`` (every 429 and 503) says in its row to wait that long,
    the connection caps' 429 and 503 included."""
    import re
    from pathlib import Path

    from service.http.problems import KINDS

    text = (Path(__file__).resolve().parents[3] / "docs" / "reference.md").read_text()
    errors = text[text.index("## Problem types\n"):]
    errors = errors[:errors.index("\n## ", 1)]
    rows = {m[1]: (int(m[2]), m[3]) for m in re.finditer(
        r"^\| `([a-z-]+)` \| (\d{3}) \| (.*) \|$", errors, re.M)}
    assert set(rows) == set(KINDS), (set(KINDS) - set(rows), set(rows) - set(KINDS))
    for kind, (status, rest) in rows.items():
        assert status == KINDS[kind][0], kind
        if status in (429, 503):
            assert "Retry-After" in rest.rsplit("|", 1)[-1], kind
    assert KINDS["over-capacity"][1] != KINDS["service-unavailable"][1]
