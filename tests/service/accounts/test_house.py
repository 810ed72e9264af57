"""POST /house/games: a person against the house bots, over a real Redis.

The house process is stood in for by what it leaves in Redis (its accounts and its
"alive" key, written by ``service.arena.accounts.house`` itself); the end-to-end runs with the real
process are in tests/test_serve.py and tests/web/test_person.py.
"""

from __future__ import annotations

from service.arena.accounts import house
from service.storage.redis_client import connect
from service.storage.store import Store
from tests.conftest import REDIS_URL


def house_up(key_prefix: str) -> dict:

    store = Store(connect(REDIS_URL), key_prefix)
    accounts = house.ensure_accounts(store)
    house.beat(store)
    return accounts


def test_no_house_bots_running_is_503_and_registers_nobody(client, key_prefix) -> None:
    r = client.post("/house/games", json={"players": 2})
    assert r.status_code == 503 and r.json["type"] == "/problems/service-unavailable"
    assert r.headers["Retry-After"]

    keys = list(connect(REDIS_URL).scan_iter(match=f"{key_prefix}bot:*"))
    assert keys == []  # no account left behind by a refused request


def test_a_new_person_is_registered_and_seated_against_the_house(client, key_prefix) -> None:
    accounts = house_up(key_prefix)
    r = client.post("/house/games", json={"players": 4, "opponent": "search",
                                          "partner": "random", "name": "Ana",
                                          "variants": {"target": 7}})
    assert r.status_code == 201, r.json
    made = r.json
    assert made["seat"] == 0 and made["player"]["name"] == "Ana" and made["player"]["token"]
    seats = [s["bot_id"] for s in made["game"]["seats"]]
    opp, mate = accounts[("search", "opponent")][0], accounts[("random", "partner")][0]
    assert seats == [made["player"]["id"], opp, mate, opp]
    assert made["game"]["move_limit"] == 60 and made["game"]["status"] == "active"
    assert made["game"]["variants"]["target"] == 7
    assert r.headers["Location"] == f"/games/{made['game']['id']}"


def test_a_known_player_keeps_their_account(client, key_prefix, api) -> None:
    house_up(key_prefix)
    me, token = api.bot("returning")
    r = client.post("/house/games", json={"players": 2, "move_limit": 30},
                    headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 201, r.json
    assert r.json["player"] is None and r.json["game"]["seats"][0]["bot_id"] == me
    assert r.json["game"]["seats"][1]["bot_name"] == "house-heuristic"
    # A partner is for 4 players: with 2 it is ignored, as documented.
    r = client.post("/house/games", json={"players": 2, "partner": "search"},
                    headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 201 and len(r.json["game"]["seats"]) == 2


def test_bad_requests_are_refused_and_change_nothing(client, key_prefix) -> None:
    house_up(key_prefix)
    for body in ({"players": 3},
                 {"players": 2, "opponent": "nobody"}, {"players": 2, "move_limit": 1},
                 {"players": 2, "name": "<script>"}):
        r = client.post("/house/games", json=body)
        assert r.status_code == 422 and r.json["type"] == "/problems/validation", (body, r.json)
    assert client.get("/games").json["items"] == []
    r = client.post("/house/games", json={"players": 2},
                    headers={"Authorization": "Bearer not-a-token"})
    assert r.status_code == 401


def test_a_restart_keeps_the_accounts_and_retires_the_old_tokens(key_prefix) -> None:

    store = Store(connect(REDIS_URL), key_prefix)
    first = house.ensure_accounts(store)
    second = house.ensure_accounts(store)
    assert {k: v[0] for k, v in first.items()} == {k: v[0] for k, v in second.items()}
    for key in first:
        assert store.bot_for_token(second[key][1]) == second[key][0]
        assert store.r.get(f"{key_prefix}token:{house.token_hash(first[key][1])}") is None


# --- the house's CPU budget (service.arena.accounts.house_cpu) -------------------------------


class _Fake:
    def __init__(self, name: str) -> None:
        self.name = name
        self.calls = 0

    def choose(self, view, legal):
        self.calls += 1
        return legal[-1] if self.name == "search" else legal[0]


def test_the_search_falls_back_to_the_heuristic_past_each_budget_and_says_why() -> None:
    """Per game (its search seconds), per owner played against (its seconds in the last
    minute) and under load (the process above its share of a core): past any, the
    heuristic decides, and each decision is counted by strategy and reason."""
    from service.arena.accounts.house_cpu import Budgeted, Load, Tally

    clock = [1000.0]
    cpu = [0.0]
    load_cpu = [0.0]
    search, heuristic = _Fake("search"), _Fake("heuristic")
    tally = Tally()
    load = Load(cpu=lambda: load_cpu[0], clock=lambda: clock[0])

    def spend(seconds: float):
        def choose(view, legal):
            cpu[0] += seconds
            return legal[-1]
        return choose

    search.choose = spend(2.0)  # every search decision costs 2 s of CPU
    b = Budgeted(search, heuristic, lambda view: view.get("owner"), tally,
                 {"ARENA_HOUSE_GAME_CPU": 5.0, "ARENA_HOUSE_OWNER_CPU": 7.0,
                  "ARENA_HOUSE_CPU_SHARE": 0.5},
                 load=load, clock=lambda: clock[0], cpu=lambda: cpu[0])
    legal = ["a", "b"]
    g1 = {"id": "g1", "owner": "o1"}
    assert [b.choose(g1, legal) for _ in range(4)] == ["b", "b", "b", "a"]  # 6 s >= 5
    assert b.choose(g1, ["only"]) == "only"  # a forced move is no decision
    g2 = {"id": "g2", "owner": "o1"}
    assert b.choose(g2, legal) == "b"  # another game: the owner has had 6 s of 7
    assert b.choose(g2, legal) == "a"  # now 8: the owner's minute is spent
    clock[0] += 61  # a minute on: the owner has its budget again
    assert b.choose(g2, legal) == "b"
    # under load: the process used 0.75 of a core over the last 4 s (above its 0.5)
    clock[0] += 2
    load.cores()
    clock[0] += 2
    load_cpu[0] += 3.0
    assert b.choose({"id": "g3", "owner": "o2"}, legal) == "a"
    counts = tally.take()
    assert counts == {("search", ""): 5, ("heuristic", "game"): 1, ("heuristic", "owner"): 1,
                      ("heuristic", "load"): 1}
    assert tally.take() == {}


def test_the_house_decisions_are_counted_in_the_metrics(app, client, key_prefix,
                                                        redis_client) -> None:
    from service.arena.accounts import house
    from service.arena.accounts.house_cpu import Tally
    from service.storage.store import Store

    tally = Tally()
    for _ in range(3):
        tally.add("search")
    tally.add("heuristic", "load")
    store = Store(redis_client, key_prefix)
    house.beat(store, tally)
    house.beat(store, tally)  # nothing new: nothing added
    text = client.get("/metrics").get_data(as_text=True)
    assert 'allfours_house_decisions_total{reason="",strategy="search"} 3.0' in text
    assert 'allfours_house_decisions_total{reason="load",strategy="heuristic"} 1.0' in text
    assert "allfours_redis_memory_alarm" in text
