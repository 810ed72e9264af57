"""Rate limits (issue 12, points 2 and 3): token guessing is limited per client address
(the admin token's failures separately and more tightly) and writes nothing per guess;
a bot's budget is counted per bot and announced in the IETF ``RateLimit`` fields."""

from __future__ import annotations

import re
import secrets
from typing import Any

import pytest

from service.http import limits
from service.http.app import create_app
from tests.conftest import REDIS_URL
from tests.service.conftest import ADMIN_TOKEN

ATTACKER = {"REMOTE_ADDR": "203.0.113.7"}
OTHER = {"REMOTE_ADDR": "198.51.100.9"}


def make_app(key_prefix: str, **config: Any):
    """The service with its default limits (unless ``config`` says otherwise)."""
    return create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                       "ARENA_ADMIN_TOKEN": ADMIN_TOKEN, **config})


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def key_count(app: Any, key_prefix: str) -> int:
    return len(app.extensions["arena"].store.r.keys(f"{key_prefix}*"))


def register(client: Any, name: str) -> tuple[str, str]:
    r = client.post("/bots", json={"name": name}, environ_base=OTHER)
    assert r.status_code == 201
    return r.json["id"], r.json["token"]


def rate_limited(r: Any) -> int:
    """The answer is the 429 problem; its Retry-After in seconds."""
    assert r.status_code == 429, (r.status_code, r.get_data(as_text=True))
    assert r.mimetype == "application/problem+json"
    assert r.json["type"] == "/problems/rate-limited"
    return int(r.headers["Retry-After"])


def test_guessed_tokens_are_limited_per_address_and_write_nothing_per_guess(key_prefix):
    app = make_app(key_prefix)
    assert app.config["ARENA_AUTH_FAILURE_LIMIT"] == limits.AUTH_FAILURE_LIMIT > 0
    c = app.test_client()
    me, token = register(c, "alice")
    other, _ = register(c, "bob")
    gid = c.post("/games", json={"players": 2, "seats": [me, other]}, headers=bearer(token),
                 environ_base=OTHER).json["id"]
    before = key_count(app, key_prefix)
    limit, window = app.config["ARENA_AUTH_FAILURE_LIMIT"], app.config["ARENA_AUTH_FAILURE_WINDOW"]
    statuses, retry = [], set()
    for i in range(2000):
        url = "/bots/me" if i % 2 else f"/games/{gid}"  # required and optional tokens
        r = c.get(url, headers=bearer(secrets.token_urlsafe(24)), environ_base=ATTACKER)
        statuses.append(r.status_code)
        if r.status_code == 429:
            retry.add(rate_limited(r))
    assert statuses[:limit] == [401] * limit
    assert set(statuses[limit:]) == {429}
    assert retry and all(1 <= s <= window for s in retry)
    # O(1) keys for 2,000 guesses: the address's failure counter, nothing per token
    assert key_count(app, key_prefix) - before <= 2
    # while it is blocked, even a valid token the process has not cached is refused from
    # that address (a right guess must not be told apart from a wrong one)...
    fresh = make_app(key_prefix).test_client()
    rate_limited(fresh.get("/bots/me", headers=bearer(token), environ_base=ATTACKER))
    # ...but another client's valid token works, in this process and in a fresh one
    for client in (c, make_app(key_prefix).test_client()):
        r = client.get("/bots/me", headers=bearer(token), environ_base=OTHER)
        assert r.status_code == 200 and r.json["id"] == me
        assert client.get(f"/games/{gid}", headers=bearer(token),
                          environ_base=OTHER).status_code == 200


def test_tokens_sent_where_none_is_needed_are_not_guesses(key_prefix):
    app = make_app(key_prefix)
    c = app.test_client()
    for _ in range(app.config["ARENA_AUTH_FAILURE_LIMIT"] + 5):
        r = c.get("/leaderboard", headers=bearer(secrets.token_hex(8)), environ_base=ATTACKER)
        assert r.status_code == 200  # not looked up, so not counted
    r = c.get("/bots/me", headers=bearer("nobody"), environ_base=ATTACKER)
    assert r.status_code == 401


def test_admin_token_failures_are_limited_separately_and_tighter(key_prefix):
    app = make_app(key_prefix)
    admin_limit = app.config["ARENA_ADMIN_FAILURE_LIMIT"]
    assert 0 < admin_limit < app.config["ARENA_AUTH_FAILURE_LIMIT"]
    c = app.test_client()
    a, _ = register(c, "a")
    b, _ = register(c, "b")
    body = {"format": "round_robin", "entrants": [a, b]}
    for _ in range(admin_limit):
        r = c.post("/tournaments", json=body, headers=bearer(secrets.token_hex(12)),
                   environ_base=ATTACKER)
        assert r.status_code == 403
    before = key_count(app, key_prefix)
    for _ in range(200):
        rate_limited(c.post("/tournaments", json=body, headers=bearer(secrets.token_hex(12)),
                            environ_base=ATTACKER))
    # the right token is refused too while the address is blocked: no oracle
    rate_limited(c.post("/tournaments", json=body, headers=bearer(ADMIN_TOKEN),
                        environ_base=ATTACKER))
    assert key_count(app, key_prefix) == before
    # bot-token failures have their own count: the address may still fail a bot token
    assert c.get("/bots/me", headers=bearer("x"), environ_base=ATTACKER).status_code == 401
    r = c.post("/tournaments", json=body, headers=bearer(ADMIN_TOKEN), environ_base=OTHER)
    assert r.status_code == 201


def test_forwarded_addresses_count_only_behind_a_trusted_proxy(key_prefix):
    limit = 5
    untrusted = make_app(key_prefix, ARENA_AUTH_FAILURE_LIMIT=limit).test_client()
    # by default X-Forwarded-For is the client's own claim: rotating it does not help
    codes = [untrusted.get("/bots/me", environ_base=ATTACKER,
                           headers={**bearer("guess"), "X-Forwarded-For": f"10.0.0.{i}"}
                           ).status_code for i in range(limit + 3)]
    assert codes[-1] == 429
    trusted = make_app(key_prefix, ARENA_AUTH_FAILURE_LIMIT=limit,
                       ARENA_TRUSTED_PROXIES=1).test_client()
    proxy = {"REMOTE_ADDR": "192.0.2.1"}
    codes = [trusted.get("/bots/me", environ_base=proxy,
                         headers={**bearer("guess"), "X-Forwarded-For": f"10.0.1.{i}"}
                         ).status_code for i in range(limit + 3)]
    assert set(codes) == {401}  # each forwarded client has its own count
    codes = [trusted.get("/bots/me", environ_base=proxy,
                         headers={**bearer("guess"), "X-Forwarded-For": "10.0.2.1"}
                         ).status_code for _ in range(limit + 1)]
    assert codes[-1] == 429


# --- the budget per bot, announced -------------------------------------------------------

POLICY_RE = re.compile(r'^"default";q=(\d+);w=(\d+)$')
FIELD_RE = re.compile(r'^"default";r=(\d+);t=(\d+)$')


def quota(r: Any) -> tuple[int, int, int, int]:
    """(q, w, r, t) from the RateLimit-Policy and RateLimit fields."""
    p = POLICY_RE.match(r.headers["RateLimit-Policy"])
    f = FIELD_RE.match(r.headers["RateLimit"])
    assert p and f, dict(r.headers)
    return int(p[1]), int(p[2]), int(f[1]), int(f[2])


def test_limited_answers_carry_the_ratelimit_fields_with_the_defaults(key_prefix):
    app = make_app(key_prefix)
    assert app.config["ARENA_RATE_LIMIT"] == limits.RATE_LIMIT
    assert app.config["ARENA_RATE_WINDOW"] == limits.RATE_WINDOW
    c = app.test_client()
    me, token = register(c, "alice")
    other, _ = register(c, "bob")
    r = c.post("/games", json={"players": 2, "seats": [me, other]}, headers=bearer(token))
    q, w, left, t = quota(r)
    assert (q, w) == (limits.RATE_LIMIT, limits.RATE_WINDOW)
    assert left == q - 1 and 1 <= t <= w
    gid = r.json["id"]
    seen = [quota(c.get(f"/games/{gid}", headers=bearer(token)))[2] for _ in range(3)]
    seen.append(quota(c.get(f"/games/{gid}/turn", headers=bearer(token),
                            query_string={"timeout": 0}))[2])
    seen.append(quota(c.get("/bots/me", headers=bearer(token)))[2])
    assert seen == [q - 2, q - 3, q - 4, q - 5, q - 6]  # the bot's own budget, all routes
    # a fused request that fails before its game read is still counted, and announced
    r = c.post(f"/games/{gid}/actions", json={"action": "nope"}, headers=bearer(token))
    assert r.status_code == 422 and quota(r)[2] == q - 7
    assert "RateLimit" not in c.get("/healthz").headers


@pytest.mark.parametrize("path", ["/games/{gid}", "/bots/me", "/games/{gid}/actions"])
def test_over_the_budget_is_429_with_retry_after_and_nothing_left(key_prefix, path):
    app = make_app(key_prefix, ARENA_RATE_LIMIT=3, ARENA_RATE_WINDOW=30)
    c = app.test_client()
    me, token = register(c, "alice")
    other, _ = register(c, "bob")
    gid = c.post("/games", json={"players": 2, "seats": [me, other]},
                 headers=bearer(token)).json["id"]
    c.get("/bots/me", headers=bearer(token))
    c.get("/bots/me", headers=bearer(token))
    url = path.format(gid=gid)
    version = c.get(f"/games/{gid}").json["version"]
    if path.endswith("actions"):
        r = c.post(url, json={"action": "stand", "version": version}, headers=bearer(token))
    else:
        r = c.get(url, headers=bearer(token))
    retry = rate_limited(r)
    q, w, left, t = quota(r)
    assert (q, w, left) == (3, 30, 0) and 1 <= retry <= 30 and t == retry
    assert c.get(f"/games/{gid}").json["version"] == version  # nothing applied
    # the budget is the bot's: another bot from the same address is not held back
    _, token2 = register(c, "carol")
    assert c.get("/bots/me", headers=bearer(token2)).status_code == 200
