"""Creation quotas (issue 22): N creations per window are let through, the next is a 429
problem+json with ``Retry-After`` that writes nothing, per client address (an IPv6 /64 as
one) and per bot; counted atomically in Redis (a real one)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from service.addresses import client_of
from service.arena import house
from service.http.app import create_app
from service.storage.store import Store
from tests.conftest import REDIS_URL
from tests.service.conftest import ADMIN_TOKEN, Api

OFF = {"ARENA_QUOTA_BOTS": 0, "ARENA_QUOTA_GAMES": 0, "ARENA_QUOTA_CLIENT_GAMES": 0,
       "ARENA_QUOTA_HOUSE_GAMES": 0}


def make(key_prefix: str, **settings: Any) -> Any:
    return create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                       "ARENA_RATE_LIMIT": 0, "ARENA_ADMIN_TOKEN": ADMIN_TOKEN,
                       "TESTING": True, **OFF, **settings})


def refused(r: Any, setting: str) -> None:
    assert r.status_code == 429, r.json
    assert r.json["type"] == "/problems/rate-limited" and setting in r.json["detail"]
    assert 1 <= int(r.headers["Retry-After"]) <= 3600


def count(redis_client: Any, pattern: str) -> int:
    return sum(1 for _ in redis_client.scan_iter(match=pattern, count=1000))


def test_bots_per_client_address(key_prefix, redis_client, keys):
    c = make(key_prefix, ARENA_QUOTA_BOTS=3).test_client()
    for i in range(3):
        assert c.post("/bots", json={"name": f"b{i}"}).status_code == 201
    before = count(redis_client, f"{key_prefix}*")
    refused(c.post("/bots", json={"name": "b3"}), "ARENA_QUOTA_BOTS")
    assert count(redis_client, f"{key_prefix}*") == before  # nothing written
    assert count(redis_client, keys.bot("*")) == 3
    # another address has its own count
    r = c.post("/bots", json={"name": "elsewhere"}, environ_base={"REMOTE_ADDR": "10.1.2.3"})
    assert r.status_code == 201


def test_an_ipv6_slash_64_is_one_client(key_prefix):
    c = make(key_prefix, ARENA_QUOTA_BOTS=2).test_client()

    def post(addr: str) -> int:
        return c.post("/bots", json={"name": "v6"},
                      environ_base={"REMOTE_ADDR": addr}).status_code

    assert post("2001:db8:1:2::1") == 201
    assert post("2001:db8:1:2:ffff::9") == 201
    assert post("2001:db8:1:2::77") == 429  # the same /64
    assert post("2001:db8:1:3::1") == 201  # the next /64
    assert client_of("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert client_of("::ffff:192.0.2.7") == "192.0.2.7" == client_of("192.0.2.7")


def test_exactly_the_quota_is_let_through_under_concurrency(key_prefix, redis_client, keys):
    app = make(key_prefix, ARENA_QUOTA_BOTS=5)
    codes: list[int] = []
    lock = threading.Lock()

    def register() -> None:
        code = app.test_client().post("/bots", json={"name": "race"}).status_code
        with lock:
            codes.append(code)

    threads = [threading.Thread(target=register) for _ in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(codes) == [201] * 5 + [429] * 19
    assert count(redis_client, keys.bot("*")) == 5


def test_games_per_bot_and_per_client(key_prefix, redis_client, keys):
    app = make(key_prefix, ARENA_QUOTA_GAMES=2, ARENA_QUOTA_CLIENT_GAMES=3)
    api = Api(app.test_client())
    _, ta = api.bot("a")
    b, tb = api.bot("b")
    for _ in range(2):
        api.game(ta, 2)
    refused(api.c.post("/games", json={"players": 2}, headers=api.auth(ta)),
            "ARENA_QUOTA_GAMES")
    api.game(tb, 2)  # b's own count; the client's third
    # the client's quota is used up: b's second is refused, and b's count is given back
    refused(api.c.post("/games", json={"players": 2}, headers=api.auth(tb)),
            "ARENA_QUOTA_CLIENT_GAMES")
    assert redis_client.zcard(keys.index("all")) == 3
    store = app.extensions["arena"].store
    window = app.config["ARENA_QUOTA_WINDOW"]
    import time

    slot = int(time.time()) // window
    assert int(redis_client.get(keys.quota(f"games:b{b}", slot))) == 1
    assert 0 < redis_client.ttl(keys.quota(f"games:b{b}", slot)) <= window
    assert store.cluster in (True, False)


def test_house_games_per_client_and_per_bot(key_prefix, redis_client, keys):
    app = make(key_prefix, ARENA_QUOTA_HOUSE_GAMES=2)
    store = Store(redis_client, key_prefix)
    house.ensure_accounts(store)
    house.beat(store)
    api = Api(app.test_client())
    for _ in range(2):
        r = api.c.post("/house/games", json={"players": 2})
        assert r.status_code == 201, r.json
    bots, games = count(redis_client, keys.bot("*")), redis_client.zcard(keys.index("all"))
    refused(api.c.post("/house/games", json={"players": 2}), "ARENA_QUOTA_HOUSE_GAMES")
    # no account registered, no game made by the refused request
    assert count(redis_client, keys.bot("*")) == bots
    assert redis_client.zcard(keys.index("all")) == games
    # a bot with a token, from another address: its own count per bot, too
    _, token = api.bot("player")
    other = {"REMOTE_ADDR": "10.9.9.9"}
    for _ in range(2):
        r = api.c.post("/house/games", json={"players": 2}, headers=api.auth(token),
                       environ_base=other)
        assert r.status_code == 201
    r = api.c.post("/house/games", json={"players": 2}, headers=api.auth(token),
                   environ_base={"REMOTE_ADDR": "10.9.9.10"})
    refused(r, "ARENA_QUOTA_HOUSE_GAMES")


@pytest.mark.parametrize("setting,path", [("ARENA_QUOTA_BOTS", "/bots")])
def test_zero_turns_a_quota_off(key_prefix, setting, path):
    c = make(key_prefix, **{setting: 0}).test_client()
    for i in range(30):
        assert c.post(path, json={"name": f"n{i}"}).status_code == 201


def test_the_defaults_are_on_and_documented():
    from service.http import quotas
    from service.http.app import DEFAULTS

    for name in quotas.DEFAULTS:
        assert DEFAULTS[name] > 0, name
    import pathlib

    ops = (pathlib.Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    for name in quotas.DEFAULTS:
        assert name in ops, name
