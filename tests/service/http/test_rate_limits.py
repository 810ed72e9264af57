"""Rate limits: token guessing is limited per client
address and per network (IPv4 /24, IPv6 /64), counted atomically after the lookup, so a
valid token is never refused for others' failures; the admin token's attempts separately,
more tightly, and numbered before any comparison (exactly the limit compared under
concurrency); nothing is written per guess; a bot's budget is counted per bot and
announced in the IETF ``RateLimit`` fields."""

from __future__ import annotations

import re
import secrets
import time
from typing import Any

import pytest
from redis.cluster import RedisCluster

from service.http import limits
from service.http.app import create_app
from tests.conftest import REDIS_URL
from tests.service.conftest import ADMIN_TOKEN

EXPECTED_S = 35  # seconds, the whole module: the order workers take it in (tests/conftest.py)

ATTACKER = {"REMOTE_ADDR": "203.0.113.7"}
OTHER = {"REMOTE_ADDR": "198.51.100.9"}


def make_app(key_prefix: str, **config: Any):
    """The service with its default limits (unless ``config`` says otherwise)."""
    return create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                       "ARENA_ADMIN_TOKEN": ADMIN_TOKEN, **config})


def clear_of_window_edge(window: int, margin: float = 10.0) -> None:
    """Wait, if need be, until ``margin`` seconds or more are left in the current fixed
    window (``unix time // window``): a test that counts requests against a budget must
    not see the window roll over however slow the machine is."""
    left = window - time.time() % window
    if left < margin:
        time.sleep(left + 0.1)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def key_names(app: Any, key_prefix: str) -> set[bytes]:
    """Keys under the test's prefix, on every master of a cluster (a cluster client's
    KEYS asks one node only)."""
    r = app.extensions["arena"].store.r
    if isinstance(r, RedisCluster):
        return set(r.keys(f"{key_prefix}*", target_nodes=RedisCluster.PRIMARIES))
    return set(r.keys(f"{key_prefix}*"))


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
    # a window far longer than the run: the count starts at the first failure, so no
    # window boundary can fall inside the run however slow the machine is; no request
    # budget, whose counters (10 s windows) could expire during the run and hide the
    # failure counters in the count of keys
    app = make_app(key_prefix, ARENA_AUTH_FAILURE_WINDOW=3600, ARENA_RATE_LIMIT=0)
    assert limits.AUTH_FAILURE_LIMIT > 0
    c = app.test_client()
    me, token = register(c, "alice")
    other, _ = register(c, "bob")
    gid = c.post("/games", json={"players": 2, "seats": [me, other]}, headers=bearer(token),
                 environ_base=OTHER).json["id"]
    before = key_names(app, key_prefix)
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
    # O(1) keys for 2,000 guesses: the address's and its network's counters, nothing per
    # token (the keys made meanwhile, not a count: on a slow machine the 10 s request
    # budget counters of the set-up requests may expire during the guesses)
    made = key_names(app, key_prefix) - before
    assert len(made) == 2 and all(b":fail" in k for k in made), made
    # a valid token is looked up first: served from the very address over its limit, in
    # this process (cached) and in a fresh one (a lookup in Redis)...
    for client in (c, make_app(key_prefix).test_client()):
        r = client.get("/bots/me", headers=bearer(token), environ_base=ATTACKER)
        assert r.status_code == 200 and r.json["id"] == me
        assert client.get(f"/games/{gid}", headers=bearer(token),
                          environ_base=ATTACKER).status_code == 200
    # ...and from any other; while the guesser's next failure is still refused
    r = make_app(key_prefix).test_client().get("/bots/me", headers=bearer(token),
                                                environ_base=OTHER)
    assert r.status_code == 200
    rate_limited(c.get("/bots/me", headers=bearer("still-wrong"), environ_base=ATTACKER))


def proxied(address: str, token: str) -> dict[str, Any]:
    """What a request from ``address`` behind one trusted proxy sends."""
    return {"environ_base": {"REMOTE_ADDR": "192.0.2.1"},
            "headers": {**bearer(token), "X-Forwarded-For": address}}


@pytest.mark.parametrize("network", [
    ["10.9.0.{i}", "10.9.1.1"],  # an IPv4 /24, and the /24 beside it
    ["2001:db8:1:2::{i:x}", "2001:db8:1:3::1"],  # an IPv6 /64, and the /64 beside it
    ["::ffff:10.9.0.{i}", "10.9.1.1"],  # IPv4-mapped: counted as the IPv4 it carries
])
def test_guesses_stepping_across_a_network_share_its_count(key_prefix, network):
    per_address, per_network = 3, 10
    app = make_app(key_prefix, ARENA_TRUSTED_PROXIES=1, ARENA_AUTH_FAILURE_LIMIT=per_address,
                   ARENA_AUTH_FAILURE_NETWORK_LIMIT=per_network,
                   ARENA_AUTH_FAILURE_WINDOW=3600)
    c = app.test_client()
    me, token = register(c, "alice")
    inside, beside = network
    codes = {}
    for i in range(1, 9):  # 8 addresses, each within its own limit
        address = inside.format(i=i)
        codes[address] = [c.get("/bots/me", **proxied(address, "guess")).status_code
                          for _ in range(per_address)]
    flat = [code for row in codes.values() for code in row]
    assert flat[:per_network] == [401] * per_network  # the network's share...
    assert set(flat[per_network:]) == {429}  # ...then refused, however fresh the address
    rate_limited(c.get("/bots/me", **proxied(inside.format(i=200), "guess")))
    # another network has its own count
    assert c.get("/bots/me", **proxied(beside, "guess")).status_code == 401
    # a valid token is served from inside the exhausted network
    r = c.get("/bots/me", **proxied(inside.format(i=1), token))
    assert r.status_code == 200 and r.json["id"] == me


def test_an_address_is_counted_with_its_network(key_prefix):
    """The counts a request falls under: IPv4 /24, IPv6 /64, IPv4-mapped as its IPv4."""
    assert limits.client_network("203.0.113.7") == "203.0.113.0/24"
    assert limits.client_network("2001:db8:1:2:a:b:c:d") == "2001:db8:1:2::/64"
    assert limits.client_network("::ffff:203.0.113.7") == "203.0.113.0/24"
    assert limits.client_network("fe80::1%eth0") == "fe80::/64"
    assert limits.client_network("-") == "-"
    assert limits.AUTH_FAILURE_NETWORK_LIMIT > limits.AUTH_FAILURE_LIMIT
    assert limits.ADMIN_FAILURE_NETWORK_LIMIT > limits.ADMIN_FAILURE_LIMIT


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
    before = key_names(app, key_prefix)
    for _ in range(200):
        rate_limited(c.post("/tournaments", json=body, headers=bearer(secrets.token_hex(12)),
                            environ_base=ATTACKER))
    # the right token is refused too while the address is blocked: no oracle
    rate_limited(c.post("/tournaments", json=body, headers=bearer(ADMIN_TOKEN),
                        environ_base=ATTACKER))
    assert not key_names(app, key_prefix) - before  # no key made per guess
    # bot-token failures have their own count: the address may still fail a bot token
    assert c.get("/bots/me", headers=bearer("x"), environ_base=ATTACKER).status_code == 401
    r = c.post("/tournaments", json=body, headers=bearer(ADMIN_TOKEN), environ_base=OTHER)
    assert r.status_code == 201


def test_simultaneous_admin_guesses_compare_exactly_the_limit(key_prefix):
    """Over real HTTP, 300 wrong admin tokens sent at once by 60 threads: each attempt is
    numbered by one atomic increment before any comparison, so exactly ``limit`` are
    compared (403) and every other one is refused unseen (429); then the admin's own
    right token, from another network, is served and uses up nothing."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import requests
    from werkzeug.serving import make_server

    limit, guesses = 5, 300
    app = make_app(key_prefix, ARENA_ADMIN_FAILURE_LIMIT=limit, ARENA_TRUSTED_PROXIES=1,
                   ARENA_RATE_LIMIT=0)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/tournaments"
    c = app.test_client()
    a, _ = register(c, "a")
    b, _ = register(c, "b")
    body = {"format": "round_robin", "entrants": [a, b]}
    start = threading.Barrier(60)

    def guess(i: int) -> int:
        if i < 60:
            start.wait(timeout=60)
        with requests.Session() as http:
            r = http.post(url, json=body, timeout=120, headers={
                "Authorization": f"Bearer {secrets.token_hex(12)}",
                "X-Forwarded-For": "203.0.113.7"})
            return r.status_code
    try:
        with ThreadPoolExecutor(60) as pool:
            codes = list(pool.map(guess, range(guesses)))
        assert sorted(set(codes)) == [403, 429]
        assert codes.count(403) == limit and codes.count(429) == guesses - limit
        for _ in range(limit + 2):  # the admin, elsewhere: a right token is given back
            r = requests.post(url, json=body, timeout=30, headers={
                "Authorization": f"Bearer {ADMIN_TOKEN}", "X-Forwarded-For": "198.51.100.9"})
            assert r.status_code == 201
    finally:
        server.shutdown()


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
    clear_of_window_edge(30)
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


# --- every counted answer says where the budget stands -------------------------


def budget_left(r: Any) -> int:
    """``r`` of the answer's ``RateLimit`` field, checking that both fields are there
    (with the policy's quota and window)."""
    assert "RateLimit" in r.headers and "RateLimit-Policy" in r.headers, \
        (r.status_code, r.request.path, dict(r.headers))
    return quota(r)[2]


def test_every_counted_operation_announces_the_budget_it_counted(key_prefix):
    """Each operation but the health checks, called with a valid token (the admin's where
    it needs one) and real ids, answers with both fields, whatever its status: fresh
    answers, long-polls (timeout 0), an event stream, problems after the count (a body
    that does not fit: 422; an id nobody has: 404). The routes come from the app itself,
    so a new operation is checked too."""
    from service.http.api import operations

    app = make_app(key_prefix, ARENA_RATE_LIMIT=100_000, ARENA_RATE_WINDOW=3600)
    c = app.test_client()
    me, token = register(c, "alice")
    other, _ = register(c, "bob")
    gid = c.post("/games", json={"players": 2, "seats": [me, other]},
                 headers=bearer(token)).json["id"]
    nobody = secrets.token_hex(6)
    fill = {"game_id": gid, "bot_id": other, "entrant_id": me, "seat": "1", "name": "2p",
            "owner_id": nobody, "tournament_id": nobody, "invitation_id": nobody,
            "target": nobody}
    seen = []
    for rule, method, op in operations(app.url_map.iter_rules(), app.view_functions):
        if not op.limited:
            assert rule in ("/healthz", "/readyz")
            assert "RateLimit" not in c.open(rule, method=method).headers
            continue
        path = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: fill[m[1]], rule)
        headers = bearer(ADMIN_TOKEN if op.auth == "admin" else token)
        if rule == "/bots/me/token":  # rotates or revokes the caller's own: a spare's
            headers = bearer(register(c, f"spare-{method}")[1])
        kw: dict[str, Any] = {"headers": headers}
        if op.body is not None:
            kw["json"] = {}
        if op.query is not None and "timeout" in op.query().fields:
            kw["query_string"] = {"timeout": 0}
        r = c.open(path, method=method.upper(), buffered=False, **kw)
        try:
            budget_left(r)
            seen.append((method, rule, r.status_code))
        finally:
            r.close()
    assert len(seen) > 40
    assert {s for _, _, s in seen} >= {200, 404, 422}
    # the pages a browser gets count per address, and say so too
    for page in ("/", f"/games/{gid}/play"):
        budget_left(c.get(page))
    # refused before the count: no fields (docs/reference.md lists these)
    for r in (c.get("/bots/me"), c.get("/bots/me", headers=bearer("no-such-token")),
              c.get("/bots/me", headers={**bearer(token), "Accept": "text/plain"}),
              c.get("/games/not-an-id!"), c.get("/openapi.yaml"), c.get("/healthz")):
        assert "RateLimit" not in r.headers and "RateLimit-Policy" not in r.headers, \
            (r.request.path, r.status_code)


def test_a_bot_playing_sees_its_budget_count_down_on_every_answer(key_prefix):
    """A real game, played with the answers a bot meets: fresh keyed actions (with and
    without ``?wait``), their replays (with and without ``?wait``), turn polls, views,
    refusals that count (409 illegal, 409 stale version, 412, 422). Every answer carries
    both fields, and each says one request fewer is left than the answer before: no
    answer is left out, none counted twice (fresh actions had no fields and
    replays had)."""
    import random

    app = make_app(key_prefix, ARENA_RATE_LIMIT=100_000, ARENA_RATE_WINDOW=3600)
    c = app.test_client()
    me, token = register(c, "alice")
    r = c.post("/bots", json={"name": "bob"}, headers=bearer(token), environ_base=OTHER)
    other, other_token = r.json["id"], r.json["token"]  # alice's owner's: seated at once
    gid = c.post("/games", json={"players": 2, "seats": [me, other], "seed": 5},
                 headers=bearer(token)).json["id"]
    tokens = {0: token, 1: other_token}
    last: dict[str, int] = {}
    rng = random.Random(4)
    kinds: set[str] = set()

    def counted(r: Any, tok: str, kind: str) -> Any:
        left = budget_left(r)
        if tok in last:
            assert left == last[tok] - 1, (kind, r.status_code, left, last[tok])
        last[tok] = left
        kinds.add(kind)
        return r

    moves = 0
    while True:
        spectator = c.get(f"/games/{gid}").json  # counted per address, not per bot
        if spectator["status"] == "finished":
            break
        tok = tokens[spectator["turn"]]
        h = bearer(tok)
        v = counted(c.get(f"/games/{gid}/turn", headers=h, query_string={"timeout": 0}),
                    tok, "turn poll").json["view"]
        stale = counted(c.post(f"/games/{gid}/actions", headers=h,
                               json={"action": v["legal_actions"][0],
                                     "version": v["version"] + 1}), tok, "409 stale")
        assert stale.status_code == 409
        pre = counted(c.post(f"/games/{gid}/actions",
                             headers={**h, "If-Match": f'"{v["version"] + 5}"'},
                             json={"action": v["legal_actions"][0]}), tok, "412")
        assert pre.status_code == 412
        bad = counted(c.post(f"/games/{gid}/actions", headers=h, json={"action": "10D"}),
                      tok, "422")
        assert bad.status_code == 422
        action = rng.choice(v["legal_actions"])
        key = {"Idempotency-Key": f"move-{v['version']}"}
        wait = {"wait": 0.05} if moves % 2 else {}
        body = {"action": action, "version": v["version"]}
        first = counted(c.post(f"/games/{gid}/actions", headers={**h, **key}, json=body,
                               query_string=wait), tok, "fresh" + (" wait" if wait else ""))
        assert first.status_code == 200, first.json
        assert "Idempotent-Replayed" not in first.headers
        again = counted(c.post(f"/games/{gid}/actions", headers={**h, **key}, json=body,
                               query_string=wait), tok, "replay" + (" wait" if wait else ""))
        assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
        moves += 1
    # a move on the finished game: refused (R22), counted
    tok = tokens[0]
    r = counted(c.post(f"/games/{gid}/actions", headers=bearer(tok), json={"action": "stand"}),
                tok, "409 over")
    assert r.status_code == 409
    assert kinds >= {"turn poll", "409 stale", "412", "422", "fresh", "fresh wait", "replay",
                     "replay wait", "409 over"}
