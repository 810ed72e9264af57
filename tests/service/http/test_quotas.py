"""Creation quotas: N creations per window are let through, the next is a 429
problem+json with ``Retry-After`` that writes nothing, per client address (an IPv6 /64 as
one) and per bot; counted atomically in Redis (a real one)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from service.addresses import client_of
from service.arena.accounts import house
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

    ops = (pathlib.Path(__file__).parents[3] / "docs" / "operations.md").read_text()
    for name in quotas.DEFAULTS:
        assert name in ops, name


def test_anonymous_house_players_count_in_their_own_network(key_prefix, redis_client):
    """A person playing the house without a token is a new owner admitted from the
    visitor's network: strangers from other networks never share that count (before, every
    anonymous visitor counted in one owners-per-network bucket, and the 21st visitor of the
    hour from anywhere was refused)."""
    app = make(key_prefix, ARENA_QUOTA_HOUSE_GAMES=10, ARENA_OWNERS_PER_NETWORK=2)
    store = Store(redis_client, key_prefix)
    house.ensure_accounts(store)
    house.beat(store)
    c = app.test_client()

    def play(address: str) -> Any:
        return c.post("/house/games", json={"players": 2},
                      environ_base={"REMOTE_ADDR": address})

    assert play("10.20.1.1").status_code == 201
    assert play("10.20.1.2").status_code == 201
    over = play("10.20.1.3")  # that network's own owner count is used up
    assert over.status_code == 429 and "new owners per network" in over.json["detail"]
    for i in range(5):  # every other network still plays
        r = play(f"10.30.{i}.1")
        assert r.status_code == 201, r.json
    # the refused visitor's house quota was given back: its address plays its 10 less 1
    q = list(redis_client.scan_iter(match=f"{key_prefix}quota:house:a10.20.1.3:*"))
    assert len(q) == 1 and int(redis_client.get(q[0])) == 0


def test_a_refused_registration_takes_nothing_from_the_bot_quota(key_prefix, redis_client):
    app = make(key_prefix, ARENA_QUOTA_BOTS=2, ARENA_OWNER_ADMISSION="invite")
    c = app.test_client()
    for _ in range(5):  # refused by the admission: no quota taken
        assert c.post("/bots", json={"name": "n", "invitation": "nope"}).status_code == 403
    codes = [c.post("/owner-invitations",
                    headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).json["code"]
             for _ in range(3)]
    made = [c.post("/bots", json={"name": "n", "invitation": k}).status_code for k in codes]
    assert made == [201, 201, 429]


# --- the service-wide budget and the memory guard (service.http.budget) ----------------------


def test_strangers_creations_have_a_service_wide_budget_with_a_reserve_per_network(
        key_prefix, redis_client, monkeypatch):
    """Anonymous and new owners' creations are counted service-wide a minute, so many
    addresses do not multiply the per-address quotas; each network keeps a reserve, so
    an actor that spends the budget does not shut out a stranger's first creations. A
    refusal (429) takes nothing; an established owner's bots are not counted."""
    from service.http import budget

    monkeypatch.setattr(budget, "WINDOW_S", 10**6)  # one window for the whole test
    app = make(key_prefix, ARENA_NEW_ACCOUNTS_PER_MINUTE=3, ARENA_BUDGET_RESERVE=1,
               ARENA_ESTABLISHED_AGE=3600, ARENA_OWNERS_PER_NETWORK=0)
    c = app.test_client()

    def register(address: str, token: str | None = None) -> Any:
        return c.post("/bots", json={"name": "n"}, environ_base={"REMOTE_ADDR": address},
                      headers={"Authorization": f"Bearer {token}"} if token else {})

    # an owner made two hours ago is established: its new bots are not strangers'
    old = register("10.50.0.1").json
    redis_client.hset(f"{key_prefix}owner:{old['owner']}", "created",
                      int(__import__("time").time()) - 7200)
    # the flood's network takes the service's last two of three (the first was the
    # regular's, then anonymous), then is refused
    assert [register(f"10.40.0.{i}").status_code for i in (1, 2)] == [201, 201]
    counters = {k: redis_client.get(k) for k in redis_client.scan_iter(
        match=f"{key_prefix}{{budget}}:*")}
    refused = register("10.40.0.9")
    assert refused.status_code == 429 and "ARENA_NEW_ACCOUNTS_PER_MINUTE" in refused.json[
        "detail"]
    assert int(refused.headers["Retry-After"]) >= 1
    assert {k: redis_client.get(k) for k in counters} == counters  # took nothing
    assert register("10.60.0.1").status_code == 201  # a stranger's network: its reserve
    assert register("10.60.0.2").status_code == 429  # ... of one
    assert register("10.40.0.5", old["token"]).status_code == 201  # established: free
    # a new owner's bot (registered with its token) is a stranger's creation too
    young = register("10.70.0.1").json
    assert register("10.70.0.2", young["token"]).status_code == 429


def test_past_the_memory_guard_strangers_wait_and_players_go_on(key_prefix, monkeypatch):
    """Above ``ARENA_MEMORY_GUARD`` of Redis' maxmemory, anonymous and new owners'
    creations are 503 with Retry-After (counted in ``allfours_storage_guard_refusals``);
    an established owner still registers and plays."""
    from service.http import budget

    app = make(key_prefix, ARENA_ESTABLISHED_AGE=0)
    c = app.test_client()
    owner = c.post("/bots", json={"name": "regular"}).json
    # this process read 90 of 100 bytes just now (a real server near its cap)
    monkeypatch.setattr(budget, "_memory", budget._Memory())
    budget._memory.at, budget._memory.used, budget._memory.cap = 1e18, 90, 100
    refused = c.post("/bots", json={"name": "stranger"})
    assert refused.status_code == 503 and refused.json["type"] == "/problems/service-unavailable"
    assert int(refused.headers["Retry-After"]) > 0 and "nearly full" in refused.json["detail"]
    auth = {"Authorization": f"Bearer {owner['token']}"}
    assert c.post("/bots", json={"name": "second"}, headers=auth).status_code == 201
    assert c.post("/games", json={"players": 2}, headers=auth).status_code == 201
    budget._memory.used = 80  # below the guard again
    assert c.post("/bots", json={"name": "stranger"}).status_code == 201


def test_the_memory_alarm_gauge_rises_well_before_the_cap():
    """``allfours_redis_memory_alarm`` is 1 from ``ARENA_MEMORY_ALARM`` of maxmemory on (a
    cluster: the fullest node), 0 below it and with no cap."""
    from service.metrics import MemoryCollector

    class Fake:
        def __init__(self, info: dict[str, Any]) -> None:
            self.r = self
            self._info = info

        def info(self, section: str) -> dict[str, Any]:
            return self._info

    def alarm(info: dict[str, Any]) -> float:
        found = {m.name: m.samples[0].value for m in MemoryCollector(Fake(info), 0.7).collect()}
        return found["allfours_redis_memory_alarm"]

    assert alarm({"used_memory": 69, "maxmemory": 100}) == 0
    assert alarm({"used_memory": 70, "maxmemory": 100}) == 1
    assert alarm({"used_memory": 10**9, "maxmemory": 0}) == 0  # no cap: nothing to warn of
    nodes = {"a:1": {"used_memory": 10, "maxmemory": 100},
             "b:2": {"used_memory": 75, "maxmemory": 100}}
    assert alarm(nodes) == 1


def test_the_reserves_stop_at_a_ceiling_of_the_budget(key_prefix, monkeypatch):
    """However many networks an actor has, strangers' creations a minute stop at
    ``budget.CEILING`` times the service's budget (the storage holds)."""
    from service.http import budget

    monkeypatch.setattr(budget, "WINDOW_S", 10**6)  # one window for the whole test

    app = make(key_prefix, ARENA_NEW_ACCOUNTS_PER_MINUTE=2, ARENA_BUDGET_RESERVE=1,
               ARENA_OWNERS_PER_NETWORK=0)
    c = app.test_client()
    codes = [c.post("/bots", json={"name": "n"},
                    environ_base={"REMOTE_ADDR": f"10.{80 + i}.0.1"}).status_code
             for i in range(2 * budget.CEILING + 2)]
    assert codes.count(201) == 2 * budget.CEILING  # the budget, then reserves to the ceiling
    assert codes[-1] == 429
