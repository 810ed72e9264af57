"""POST /house/games: a person against the house bots (issue 15), over a real Redis.

The house process is stood in for by what it leaves in Redis (its accounts and its
"alive" key, written by ``service.arena.house`` itself); the end-to-end runs with the real
process are in tests/test_serve.py and tests/web/test_person.py.
"""

from __future__ import annotations

from service.arena import house
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
