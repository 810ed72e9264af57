"""Consent to play, owners and suspension, over a real Redis and the real app.

- forced seating: games naming a victim seat it in none it did not accept; accepting
  starts the game, declining or letting it expire cancels it and takes it out of the
  waiting index;
- policies (nobody, a list), the house bots' per-challenger limit;
- owners: registration with and without an owner credential, admission modes, the
  per-network limit on new owners; one owner's bots never meet on a ladder;
- suspension: a suspended bot cannot act, register or accept, is withdrawn from a live
  tournament (its game forfeited); lifting restores access.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from service.http.app import create_app
from tests.conftest import REDIS_URL
from tests.service.accounts.test_house import house_up
from tests.service.conftest import ADMIN_TOKEN, Api, settle

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def make_app(key_prefix: str, **settings: Any) -> Any:
    return create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                       "ARENA_RATE_LIMIT": 0, "ARENA_ADMIN_TOKEN": ADMIN_TOKEN,
                       "ARENA_OWNERS_PER_NETWORK": 0, "TESTING": True, **settings})


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def waiting_ids(client: Any) -> set[str]:
    """Every game in the waiting index (all pages)."""
    out: set[str] = set()
    q: dict[str, Any] = {"status": "waiting", "limit": 100}
    while True:
        page = client.get("/games", query_string=q).json
        out.update(g["id"] for g in page["items"])
        if page["next_cursor"] is None:
            return out
        q["cursor"] = page["next_cursor"]


# --- forced seating ---------------------------------------------------------------------------


def test_150_games_naming_a_victim_seat_it_in_none_it_did_not_accept(key_prefix) -> None:
    app = make_app(key_prefix, ARENA_INVITATIONS_PER_BOT=200, ARENA_INVITATIONS_PER_INVITER=0,
                   ARENA_INVITATIONS_PER_INVITER_NETWORK=0)
    c = app.test_client()
    api = Api(c, one_owner=False)
    victim, v_token = api.bot("victim")
    attacker, a_token = api.bot("attacker")
    made = []
    for i in range(150):
        seats = [victim, victim] if i % 2 else [attacker, victim]
        r = c.post("/games", json={"players": 2, "seats": seats, "move_limit": 60},
                   headers=auth(a_token))
        assert r.status_code == 201, r.json
        assert r.json["status"] == "waiting"
        assert victim not in [s["bot_id"] for s in r.json["seats"]]
        assert victim in r.json["invited"] and r.json["invitation_expires"]
        made.append(r.json["id"])
    # nothing of the victim's: no turn, no seat; only invitations
    turns = c.get("/bots/me/turns", query_string={"timeout": 0}, headers=auth(v_token)).json
    assert turns["games"] == [] and turns["invitations_pending"] == 150
    listed = c.get("/bots/me/invitations", headers=auth(v_token)).json["invitations"]
    assert sorted(i["game_id"] for i in listed) == sorted(made)
    assert all(i["from_bot"] == attacker and i["status"] == "pending" for i in listed)
    store = app.extensions["arena"].store
    for gid in made:
        game = store.get_game(gid)
        assert victim not in game.seats and game.status == "waiting"
    # the victim's action anywhere is refused: it holds no seat
    r = c.post(f"/games/{made[1]}/actions", json={"action": "stand"}, headers=auth(v_token))
    assert r.status_code in (403, 409)
    # nobody else may take a seat held for the victim
    _third, t_token = api.bot("third")
    r = c.post(f"/games/{made[0]}/seats/1", headers=auth(t_token))
    assert r.status_code == 409 and r.json["type"] == "/problems/seat-taken"

    invitations = {i["game_id"]: i for i in listed}
    # accept: the game starts, with the victim in the seats held for it
    accepted = c.post(f"/invitations/{invitations[made[0]]['id']}/accept",
                      headers=auth(v_token))
    assert accepted.status_code == 200, accepted.json
    assert accepted.json["status"] == "accepted" and accepted.json["seats"] == [1]
    g = c.get(f"/games/{made[0]}").json
    assert g["status"] == "active" and [s["bot_id"] for s in g["seats"]] == [attacker, victim]
    # a [V, V] game: one acceptance takes both seats
    both = c.post(f"/invitations/{invitations[made[1]]['id']}/accept", headers=auth(v_token))
    assert both.status_code == 200 and both.json["seats"] == [0, 1]
    assert c.get(f"/games/{made[1]}").json["status"] == "active"
    # a second answer to the same invitation: it is gone
    again = c.post(f"/invitations/{invitations[made[0]]['id']}/accept", headers=auth(v_token))
    assert again.status_code == 404
    # decline: the game is over, cancelled, out of the waiting index
    declined = c.post(f"/invitations/{invitations[made[2]]['id']}/decline",
                      headers=auth(v_token))
    assert declined.status_code == 200 and declined.json["status"] == "declined"
    summary = c.get("/games", query_string={"status": "finished"}).json["items"]
    gone = next(s for s in summary if s["id"] == made[2])
    assert gone["cancelled"] == "declined" and gone["winner"] is None
    assert made[2] not in waiting_ids(c)
    # someone else's invitation cannot be answered by another bot
    r = c.post(f"/invitations/{invitations[made[3]]['id']}/accept", headers=auth(t_token))
    assert r.status_code == 404
    # expiry: the sweeper's pass cancels every game still waiting for the victim
    arena = app.extensions["arena"]
    later = time.time() + arena.invitations.ttl + 1
    cancelled = arena.invitations.expire_due(now=later, limit=500)
    assert cancelled == 147
    assert waiting_ids(c) == set()
    left = c.get("/bots/me/turns", query_string={"timeout": 0}, headers=auth(v_token)).json
    assert left["invitations"] == [] and sorted(left["games"]) != []  # its accepted games
    assert set(left["games"]) <= {made[0], made[1]}
    over = store.get_game(made[5])
    assert over.status == "finished" and over.meta["cancelled"]["reason"] == "expired"
    assert victim not in over.seats
    # nothing of the invitations is left in Redis
    r = store.r
    assert r.zcard(arena.invitations.due_key) == 0
    assert list(r.scan_iter(match=f"{key_prefix}invitation:*")) == []


def test_an_expired_invitation_cannot_be_accepted(key_prefix) -> None:
    app = make_app(key_prefix)
    c = app.test_client()
    api = Api(c, one_owner=False)
    a, a_token = api.bot("a")
    v, v_token = api.bot("v")
    g = c.post("/games", json={"players": 2, "seats": [a, v]}, headers=auth(a_token)).json
    inv = c.get("/bots/me/invitations", headers=auth(v_token)).json["invitations"][0]
    arena = app.extensions["arena"]
    with pytest.raises(Exception) as refused:
        arena.invitations.accept(inv["id"], v, now=time.time() + arena.invitations.ttl + 1)
    assert "expired" in str(refused.value)
    assert c.get(f"/games/{g['id']}").json["status"] == "finished"
    assert g["id"] not in waiting_ids(c)


def test_own_bots_are_seated_at_once_and_joining_a_held_seat_is_accepting(key_prefix) -> None:
    app = make_app(key_prefix)
    c = app.test_client()
    api = Api(c)
    a, a_token = api.bot("a")
    b, _ = api.bot("b")  # a's owner
    g = c.post("/games", json={"players": 2, "seats": [a, b]}, headers=auth(a_token)).json
    assert g["status"] == "active" and g["invited"] == [None, None]
    v, v_token = api.bot("v", new_owner=True)
    g = c.post("/games", json={"players": 2, "seats": [a, v]}, headers=auth(a_token)).json
    assert g["status"] == "waiting" and g["invited"] == [None, v]
    joined = c.post(f"/games/{g['id']}/seats/1", headers=auth(v_token))
    assert joined.status_code == 200 and joined.json["status"] == "active"
    assert c.get("/bots/me/invitations", headers=auth(v_token)).json["invitations"] == []


def test_a_long_poll_wakes_on_a_new_invitation(key_prefix) -> None:
    app = make_app(key_prefix)
    c = app.test_client()
    api = Api(c, one_owner=False)
    a, a_token = api.bot("a")
    v, v_token = api.bot("v")
    answers: list[Any] = []

    def poll() -> None:
        answers.append(app.test_client().get("/bots/me/turns", query_string={"timeout": 30},
                                             headers=auth(v_token)).json)

    t = threading.Thread(target=poll)
    t.start()
    time.sleep(0.5)  # the poll is waiting (a late start only means it answers at once)
    g = c.post("/games", json={"players": 2, "seats": [a, v]}, headers=auth(a_token)).json
    t.join(40)
    assert answers and answers[0]["timed_out"] is False
    assert [i["game_id"] for i in answers[0]["invitations"]] == [g["id"]]
    # an old invitation does not answer the next poll at once: only a newer one does
    first = answers[0]["invitations"][0]
    again = c.get("/bots/me/turns", query_string={"timeout": 0.5}, headers=auth(v_token)).json
    assert again["timed_out"] is True and again["invitations"][0]["id"] == first["id"]
    newer = c.get("/bots/me/turns", headers=auth(v_token),
                  query_string={"timeout": 5, "invitations_after": first["created"] - 1}).json
    assert newer["timed_out"] is False


# --- policies and the house -------------------------------------------------------------------


def test_policies_nobody_and_a_list(key_prefix) -> None:
    app = make_app(key_prefix)
    c = app.test_client()
    api = Api(c, one_owner=False)
    a, a_token = api.bot("a")
    friend, f_token = api.bot("friend")
    v, v_token = api.bot("v")
    r = c.put("/bots/me/policy", json={"accept": "nobody"}, headers=auth(v_token))
    assert r.status_code == 200 and r.json == {"accept": "nobody", "from": []}
    before = waiting_ids(c)
    r = c.post("/games", json={"players": 2, "seats": [a, v]}, headers=auth(a_token))
    assert r.status_code == 403 and r.json["type"] == "/problems/invitation-refused"
    assert waiting_ids(c) == before  # refused: nothing created
    friend_owner = c.get("/bots/me", headers=auth(f_token)).json["owner"]
    r = c.put("/bots/me/policy", json={"accept": "list", "from": [friend_owner]},
              headers=auth(v_token))
    assert r.status_code == 200 and r.json["from"] == [friend_owner]
    assert c.get("/bots/me/policy", headers=auth(v_token)).json["accept"] == "list"
    r = c.post("/games", json={"players": 2, "seats": [a, v]}, headers=auth(a_token))
    assert r.status_code == 403
    r = c.post("/games", json={"players": 2, "seats": [friend, v]}, headers=auth(f_token))
    assert r.status_code == 201 and r.json["invited"] == [None, v]
    r = c.put("/bots/me/policy", json={"accept": "sometimes"}, headers=auth(v_token))
    assert r.status_code == 422


def test_house_bots_accept_within_the_per_challenger_limit(key_prefix) -> None:
    accounts = house_up(key_prefix)
    app = make_app(key_prefix, ARENA_HOUSE_GAMES_PER_CHALLENGER=3)
    c = app.test_client()
    api = Api(c)
    me, token = api.bot("challenger")
    house_bot = accounts[("heuristic", "opponent")][0]
    for _ in range(3):
        r = c.post("/games", json={"players": 2, "seats": [me, house_bot]},
                   headers=auth(token))
        assert r.status_code == 201 and r.json["status"] == "active"
    r = c.post("/games", json={"players": 2, "seats": [me, house_bot]}, headers=auth(token))
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
    # the limit is the challenger's owner's: a second bot of it is refused too
    _, token2 = api.bot("second")
    r = c.post("/house/games", json={"players": 2}, headers=auth(token2))
    assert r.status_code == 429
    # another owner still plays the house
    other = Api(c, one_owner=False)
    o, o_token = other.bot("other")
    r = c.post("/games", json={"players": 2, "seats": [o, house_bot]}, headers=auth(o_token))
    assert r.status_code == 201
    # a stranger seating house bot against house bot is counted as well
    partner = accounts[("random", "partner")][0]
    for _ in range(2):
        r = c.post("/games", json={"players": 2, "seats": [house_bot, partner]},
                   headers=auth(o_token))
        assert r.status_code == 201
    r = c.post("/games", json={"players": 2, "seats": [house_bot, partner]},
               headers=auth(o_token))
    assert r.status_code == 429


# --- owners ---------------------------------------------------------------------------------


def test_registration_with_and_without_an_owner_credential(key_prefix) -> None:
    app = make_app(key_prefix)
    c = app.test_client()
    first = c.post("/bots", json={"name": "first"}).json
    second = c.post("/bots", json={"name": "second"}, headers=auth(first["token"])).json
    third = c.post("/bots", json={"name": "third"}).json
    assert first["owner"] == second["owner"] != third["owner"]
    assert c.get(f"/bots/{second['id']}").json["owner"] == first["owner"]
    r = c.post("/bots", json={"name": "x"}, headers=auth("not-a-token"))
    assert r.status_code == 401
    store = app.extensions["arena"].store
    record = store.r.hgetall(f"{key_prefix}owner:{first['owner']}")
    assert {b"bot:" + first["id"].encode(), b"bot:" + second["id"].encode()} <= set(record)
    assert record[b"network"] == b"127.0.0.0/24"
    ttl = store.r.ttl(f"{key_prefix}owner:{first['owner']}")
    assert 0 < ttl <= 604800  # expires with its never-played bots


def test_admission_invite_and_closed(key_prefix) -> None:
    c = make_app(key_prefix, ARENA_OWNER_ADMISSION="invite").test_client()
    r = c.post("/bots", json={"name": "newcomer"})
    assert r.status_code == 403 and r.json["type"] == "/problems/owner-admission"
    r = c.post("/bots", json={"name": "newcomer", "invitation": "made-up"})
    assert r.status_code == 403
    assert c.post("/owner-invitations").status_code == 401
    code = c.post("/owner-invitations", headers=ADMIN)
    assert code.status_code == 201 and code.json["expires"] > time.time()
    made = c.post("/bots", json={"name": "newcomer", "invitation": code.json["code"]})
    assert made.status_code == 201, made.json
    again = c.post("/bots", json={"name": "copycat", "invitation": code.json["code"]})
    assert again.status_code == 403  # single use
    more = c.post("/bots", json={"name": "second"}, headers=auth(made.json["token"]))
    assert more.status_code == 201 and more.json["owner"] == made.json["owner"]

    closed = make_app(key_prefix, ARENA_OWNER_ADMISSION="closed").test_client()
    r = closed.post("/bots", json={"name": "nobody-new"})
    assert r.status_code == 403 and r.json["type"] == "/problems/owner-admission"
    r = closed.post("/bots", json={"name": "existing"}, headers=auth(made.json["token"]))
    assert r.status_code == 201


def test_new_owners_are_limited_per_network(key_prefix) -> None:
    c = make_app(key_prefix, ARENA_OWNERS_PER_NETWORK=2).test_client()

    def register(address: str, token: str | None = None) -> Any:
        return c.post("/bots", json={"name": "n"}, environ_base={"REMOTE_ADDR": address},
                      headers=auth(token) if token else {})

    first = register("10.1.2.3")
    assert first.status_code == 201
    assert register("10.1.2.200").status_code == 201
    over = register("10.1.2.77")  # the same /24
    assert over.status_code == 429 and int(over.headers["Retry-After"]) >= 1
    assert register("10.1.3.1").status_code == 201  # another /24
    # a bot of an existing owner is no new owner: not counted
    assert register("10.1.2.5", first.json["token"]).status_code == 201
    assert register("2001:db8:1:2::1").status_code == 201
    assert register("2001:db8:1:2:ffff::9").status_code == 201
    assert register("2001:db8:1:2:abcd::1").status_code == 429  # the same /64
    assert register("2001:db8:1:3::1").status_code == 201

    proxied = make_app(key_prefix + "p:", ARENA_OWNERS_PER_NETWORK=1,
                       ARENA_TRUSTED_PROXIES=1).test_client()
    codes = [proxied.post("/bots", json={"name": "n"},
                          environ_base={"REMOTE_ADDR": "127.0.0.1"},
                          headers={"X-Forwarded-For": ip}).status_code
             for ip in ("192.0.2.1", "192.0.2.2", "198.51.100.1")]
    assert codes == [201, 429, 201]


def test_one_owners_bots_are_never_matched_on_a_ladder(key_prefix) -> None:
    quick = json.dumps({"quick": {"players": 2, "variants": {"target": 5}, "move_limit": 30}})
    app = make_app(key_prefix, ARENA_LADDERS=quick, ARENA_LADDER_REMATCH_WAIT=0.0)
    c = app.test_client()
    api = Api(c)
    lad = app.extensions["ladders"]
    bots = dict(api.bot(n) for n in ("a", "b", "c"))  # one owner
    for token in bots.values():
        assert c.post("/ladders/quick/entry", headers=auth(token)).status_code == 200
    assert lad.match_once("quick", now=time.time() + 3600) == []
    stranger, s_token = api.bot("stranger", new_owner=True)
    assert c.post("/ladders/quick/entry", headers=auth(s_token)).status_code == 200
    made = lad.match_once("quick", now=time.time() + 3600)
    assert len(made) == 1
    seats = set(c.get(f"/games/{made[0]}").json["seats"][i]["bot_id"] for i in (0, 1))
    assert stranger in seats and len(seats & set(bots)) == 1


# --- suspension -----------------------------------------------------------------------------


def test_a_suspended_bot_cannot_act_register_or_accept_and_lifting_restores(key_prefix) -> None:
    app = make_app(key_prefix)
    c = app.test_client()
    api = Api(c, one_owner=False)
    a, a_token = api.bot("a")
    v, v_token = api.bot("v")
    g = c.post("/games", json={"players": 2, "seats": [a, v]}, headers=auth(a_token)).json
    inv = c.get("/bots/me/invitations", headers=auth(v_token)).json["invitations"][0]
    assert c.post(f"/admin/bots/{v}/suspension", json={"reason": "x"}).status_code == 401
    r = c.post(f"/admin/bots/{v}/suspension", json={"reason": "threw games"}, headers=ADMIN)
    assert r.status_code == 200 and r.json["suspended"] == "threw games"
    for method, path, body in (("post", f"/invitations/{inv['id']}/accept", None),
                               ("post", "/bots", {"name": "sock-puppet"}),
                               ("post", "/games", {"players": 2}),
                               ("get", "/bots/me/turns", None)):
        r = getattr(c, method)(path, json=body, headers=auth(v_token),
                               query_string={"timeout": 0} if method == "get" else None)
        assert r.status_code == 403 and r.json["type"] == "/problems/suspended", path
        assert "threw games" in r.json["detail"]
    me = c.get("/bots/me", headers=auth(v_token))
    assert me.status_code == 200 and me.json["suspended"] == "threw games"
    assert c.get(f"/games/{g['id']}").json["status"] == "finished"  # its invitation: declined
    r = c.post("/games", json={"players": 2, "seats": [a, v]}, headers=auth(a_token))
    assert r.status_code == 403 and r.json["type"] == "/problems/invitation-refused"
    log = c.get("/admin/suspensions", headers=ADMIN).json["entries"]
    assert log[0]["act"] == "suspended" and log[0]["reason"] == "threw games"
    assert log[0]["bots"] == [v]
    r = c.delete(f"/admin/bots/{v}/suspension", headers=ADMIN)
    assert r.status_code == 200 and r.json["suspended"] is None
    assert c.post("/games", json={"players": 2}, headers=auth(v_token)).status_code == 201
    assert c.get("/admin/suspensions", headers=ADMIN).json["entries"][0]["act"] == "lifted"


def test_suspending_an_owner_suspends_every_bot_and_forbids_new_ones(key_prefix) -> None:
    app = make_app(key_prefix)
    c = app.test_client()
    api = Api(c)
    a, a_token = api.bot("a")
    b, b_token = api.bot("b")
    owner = c.get("/bots/me", headers=auth(a_token)).json["owner"]
    r = c.post(f"/admin/owners/{owner}/suspension", json={"reason": "a farm"}, headers=ADMIN)
    assert r.status_code == 200 and sorted(r.json["bots"]) == sorted([a, b])
    assert r.json["suspended"] == "a farm"
    store = app.extensions["arena"].store
    assert store.r.hget(f"{key_prefix}bot:{b}", "suspended") == b"a farm"
    r = c.post("/games", json={"players": 2}, headers=auth(b_token))
    assert r.status_code == 403 and r.json["type"] == "/problems/suspended"
    assert c.post("/admin/owners/nope/suspension", json={"reason": "x"},
                  headers=ADMIN).status_code == 404
    r = c.delete(f"/admin/owners/{owner}/suspension", headers=ADMIN)
    assert r.status_code == 200 and r.json["suspended"] is None
    assert c.post("/bots", json={"name": "c"}, headers=auth(a_token)).status_code == 201
    # a bot from before owners existed is its own owner: its id is the owner id
    legacy, legacy_token = store.create_bot("old-timer")
    r = c.post(f"/admin/owners/{legacy['id']}/suspension", json={"reason": "old tricks"},
               headers=ADMIN)
    assert r.status_code == 200 and r.json["bots"] == [legacy["id"]]
    r = c.post("/games", json={"players": 2}, headers=auth(legacy_token))
    assert r.status_code == 403 and r.json["type"] == "/problems/suspended"


def test_a_suspended_entrant_is_withdrawn_from_a_live_tournament(key_prefix) -> None:
    app = make_app(key_prefix)
    c = app.test_client()
    api = Api(c, one_owner=False)
    bots = dict(api.bot(n) for n in ("honest", "cheat"))
    ids = list(bots)
    t = c.post("/tournaments", headers=ADMIN, json={
        "entrants": ids, "format": "round_robin", "games_per_pairing": 2, "parallel": 1,
        "variants": {"target": 4}, "move_limit": 30}).json
    live = [gm for rnd in c.get(f"/tournaments/{t['id']}").json["rounds"]
            for gm in rnd["games"] if gm.get("game_id")]
    assert live, "the tournament's first game started"
    cheat = ids[1]
    r = c.post(f"/admin/bots/{cheat}/suspension", json={"reason": "cheating"}, headers=ADMIN)
    assert r.status_code == 200
    doc = c.get(f"/tournaments/{t['id']}").json
    status = {e["bot_id"]: e for e in doc["entrants"]}
    assert status[cheat]["status"] == "withdrawn", status[cheat]
    game = c.get(f"/games/{live[0]['game_id']}").json
    assert game["status"] == "finished"
    r = c.delete(f"/admin/bots/{cheat}/suspension", headers=ADMIN)
    assert r.status_code == 200
    status = {e["bot_id"]: e for e in c.get(f"/tournaments/{t['id']}").json["entrants"]}
    assert status[cheat]["status"] == "withdrawn"  # lifting restores access, not the games


def test_a_webhook_bot_gets_an_invitation_event_and_no_turn_before_accepting(key_prefix):
    """The invitation reaches a webhook bot as an ``invitation`` event (its body fits the
    contract's webhook); no turn of the game is delivered before it accepts."""
    from service.arena.webhooks.keys import notify_key
    from tests.service.webhooks.test_webhooks import ALLOWED, scripted_server

    app = make_app(key_prefix, ARENA_CALLBACK_NETWORKS=f"{ALLOWED}/32")
    c = app.test_client()
    api = Api(c, one_owner=False)
    a, a_token = api.bot("a")
    v, v_token = api.bot("hooked")
    url, seen, server = scripted_server(lambda m: (200, b"{}", 0.0))
    try:
        assert c.put("/bots/me/callback", json={"url": url},
                     headers=auth(v_token)).status_code == 200
        g = c.post("/games", json={"players": 2, "seats": [a, v], "move_limit": 30},
                   headers=auth(a_token)).json
        callbacks = app.extensions["callbacks"]  # no dispatcher runs in this process
        r = callbacks.store.r
        assert r.zrange(notify_key(key_prefix, v), 0, -1) == [f"invitation:{g['id']}".encode()]
        cfg = callbacks.config(v)
        assert callbacks.notify_due(v, cfg) == 1
        [message] = seen.messages("invitation")
        assert message["game_id"] == g["id"] and message["invitation"]["from_bot"] == a
        assert message["view"]["status"] == "waiting" and message["view"]["hand"] is None
        assert seen.messages("turn") == []
    finally:
        server.shutdown()
        server.server_close()


def test_a_suspended_bot_leaves_the_ladders(key_prefix) -> None:
    quick = json.dumps({"quick": {"players": 2, "variants": {"target": 5}, "move_limit": 30}})
    app = make_app(key_prefix, ARENA_LADDERS=quick)
    c = app.test_client()
    api = Api(c, one_owner=False)
    bot, token = api.bot("ladder-cheat")
    assert c.post("/ladders/quick/entry", headers=auth(token)).status_code == 200
    lad = app.extensions["ladders"]
    assert lad.entry("quick", bot)["state"] == "waiting"
    assert c.post(f"/admin/bots/{bot}/suspension", json={"reason": "thrown games"},
                  headers=ADMIN).status_code == 200
    assert lad.entry("quick", bot)["state"] == "off"
    r = c.post("/ladders/quick/entry", headers=auth(token))  # and cannot come back
    assert r.status_code == 403 and r.json["type"] == "/problems/suspended"


def test_a_suspended_bot_forfeits_its_live_ladder_game_at_once(key_prefix) -> None:
    """A suspension withdraws a bot from the ladders with its live game there
    forfeited (not played out by the clock): the game ends at once, a rated loss for the
    cheat and a rated win for its opponent, whatever the board said."""
    quick = json.dumps({"quick": {"players": 2, "variants": {"target": 5}, "move_limit": 30}})
    app = make_app(key_prefix, ARENA_LADDERS=quick)
    c = app.test_client()
    api = Api(c, one_owner=False)  # two owners: one owner's bots are never matched
    cheat, cheat_token = api.bot("ladder-cheat")
    honest, honest_token = api.bot("honest")
    for token in (cheat_token, honest_token):
        assert c.post("/ladders/quick/entry", headers=auth(token)).status_code == 200
    lad = app.extensions["ladders"]
    [gid] = lad.pass_once()
    assert c.get(f"/games/{gid}").json["status"] == "active"
    assert c.post(f"/admin/bots/{cheat}/suspension", json={"reason": "thrown games"},
                  headers=ADMIN).status_code == 200
    game = c.get(f"/games/{gid}").json
    assert game["status"] == "finished"
    settle(c)  # the ladder settles the game after it, off the request
    hist = {b: c.get(f"/ladders/quick/bots/{b}/history").json["items"] for b in (cheat, honest)}
    assert hist[cheat][0]["forfeit"] is True and hist[cheat][0]["won"] is False
    assert hist[honest][0]["won"] is True and hist[honest][0]["forfeit"] is False
    assert hist[cheat][0]["unrated"] is None  # a rated loss
    rows = {r["bot_id"]: r for r in c.get("/ladders/quick/standings").json["items"]}
    assert rows[honest]["wins"] == 1
    assert cheat not in rows  # a suspended bot is off the standings while suspended
    cheat_rating = json.loads(app.extensions["arena"].store.r.hget(
        lad.k_ratings("quick"), cheat))
    assert cheat_rating["games"] == 1 and cheat_rating["wins"] == 0
    assert rows[honest]["mu"] > cheat_rating["mu"]  # the loss moved both ratings
    assert lad.entry("quick", cheat)["state"] == "off"


def test_a_tournament_naming_a_suspended_bot_is_refused(key_prefix) -> None:
    """A suspended bot cannot be entered in a new tournament (403 suspended,
    naming it); nothing is created. Lifted, it can be entered again."""
    app = make_app(key_prefix)
    c = app.test_client()
    api = Api(c, one_owner=False)
    cheat, _ = api.bot("cheat")
    other, _ = api.bot("other")
    assert c.post(f"/admin/bots/{cheat}/suspension", json={"reason": "farming"},
                  headers=ADMIN).status_code == 200
    body = {"name": "t", "entrants": [cheat, other], "format": "round_robin", "players": 2}
    before = c.get("/tournaments").json["items"]
    r = c.post("/tournaments", json=body, headers=ADMIN)
    assert r.status_code == 403 and r.json["type"] == "/problems/suspended", r.json
    assert cheat in r.json["errors"]["entrants"][0]
    assert c.get("/tournaments").json["items"] == before
    # (the process that lifts it forgets its copy of the suspended set at once)
    assert c.delete(f"/admin/bots/{cheat}/suspension", headers=ADMIN).status_code == 200
    assert c.post("/tournaments", json=body, headers=ADMIN).status_code == 201


def test_a_bot_holds_at_most_its_cap_of_pending_invitations(key_prefix) -> None:
    """A flood of challenges cannot bury a bot: past
    ``ARENA_INVITATIONS_PER_BOT`` pending invitations the creator gets 429 with
    Retry-After and no game is made; an answered invitation frees a place."""
    app = make_app(key_prefix, ARENA_INVITATIONS_PER_BOT=2)
    c = app.test_client()
    api = Api(c, one_owner=False)
    victim, victim_token = api.bot("victim")
    _, flooder = api.bot("flooder")
    made = [c.post("/games", json={"players": 2, "seats": [None, victim]},
                   headers=auth(flooder)) for _ in range(3)]
    assert [r.status_code for r in made[:2]] == [201, 201]
    assert made[2].status_code == 429 and made[2].json["type"] == "/problems/rate-limited"
    assert int(made[2].headers["Retry-After"]) >= 1
    items = c.get("/bots/me/invitations", headers=auth(victim_token)).json["invitations"]
    assert len(items) == 2
    first = items[0]["id"]
    assert c.post(f"/invitations/{first}/decline", headers=auth(victim_token)).status_code == 200
    again = c.post("/games", json={"players": 2, "seats": [None, victim]},
                   headers=auth(flooder))
    assert again.status_code == 201, again.json


# --- fair to the invited and to other inviters ----------------------------------------------


def _challenge(c: Any, token: str, victim: str, addr: str = "127.0.0.1") -> Any:
    return c.post("/games", json={"players": 2, "seats": [None, victim]}, headers=auth(token),
                  environ_base={"REMOTE_ADDR": addr})


def test_one_inviter_and_one_network_hold_a_share_of_a_bots_invitations(key_prefix) -> None:
    """A squatter cannot fill a bot's list from one owner or one network: past
    ``ARENA_INVITATIONS_PER_INVITER`` pending from its owner, or
    ``ARENA_INVITATIONS_PER_INVITER_NETWORK`` from the owners made in its network, the
    creator gets 429 and no game; an owner from another network still gets through, and
    an answered invitation frees its place."""
    app = make_app(key_prefix, ARENA_INVITATIONS_PER_INVITER=2,
                   ARENA_INVITATIONS_PER_INVITER_NETWORK=3)
    c = app.test_client()
    api = Api(c, one_owner=False)
    victim, v_token = api.bot("victim")
    _, squatter = api.bot("squatter")
    _, second = api.bot("second")  # another owner made in the same network
    far = c.post("/bots", json={"name": "far"}, environ_base={"REMOTE_ADDR": "10.7.0.1"}).json
    assert [_challenge(c, squatter, victim).status_code for _ in range(2)] == [201, 201]
    refused = _challenge(c, squatter, victim)
    assert refused.status_code == 429 and "from your owner" in refused.json["detail"]
    assert int(refused.headers["Retry-After"]) >= 1
    assert _challenge(c, second, victim).status_code == 201  # the network's third
    refused = _challenge(c, second, victim)
    assert refused.status_code == 429 and "network" in refused.json["detail"]
    assert _challenge(c, far["token"], victim, "10.7.0.1").status_code == 201
    pending = c.get("/bots/me/invitations", headers=auth(v_token)).json["invitations"]
    assert len(pending) == 4
    mine = [i for i in pending if i["from_owner"] == pending[0]["from_owner"]]
    assert c.post(f"/invitations/{mine[0]['id']}/accept", headers=auth(v_token)
                  ).status_code == 200
    assert _challenge(c, squatter, victim).status_code == 201  # its place is free again


def test_an_owner_declined_n_times_waits(key_prefix, redis_client) -> None:
    """A bot that declines at once is not sent a new challenge a second: after
    ``ARENA_DECLINES_BEFORE_WAIT`` declines of one owner's invitations, that owner's next
    ones are refused (429, Retry-After within ``ARENA_DECLINE_MEMORY``) and nothing is
    made; other owners are not."""
    app = make_app(key_prefix, ARENA_DECLINES_BEFORE_WAIT=2, ARENA_DECLINE_MEMORY=600)
    c = app.test_client()
    api = Api(c, one_owner=False)
    victim, v_token = api.bot("victim")
    _, pest = api.bot("pest")
    _, polite = api.bot("polite")
    for _ in range(2):
        assert _challenge(c, pest, victim).status_code == 201
        inv = c.get("/bots/me/invitations", headers=auth(v_token)).json["invitations"][0]
        assert c.post(f"/invitations/{inv['id']}/decline", headers=auth(v_token)
                      ).status_code == 200
    games = len(waiting_ids(c))
    refused = _challenge(c, pest, victim)
    assert refused.status_code == 429 and "declined 2" in refused.json["detail"]
    assert 590 <= int(refused.headers["Retry-After"]) <= 600
    assert len(waiting_ids(c)) == games
    assert _challenge(c, polite, victim).status_code == 201


def test_the_turns_poll_carries_the_newest_invitations_and_the_count(key_prefix) -> None:
    """``GET /bots/me/turns`` holds at most ``ARENA_TURNS_INVITATIONS`` invitations, the
    newest, and ``invitations_pending`` says how many there are; ``GET
    /bots/me/invitations`` lists them all."""
    app = make_app(key_prefix, ARENA_TURNS_INVITATIONS=2)
    c = app.test_client()
    api = Api(c, one_owner=False)
    victim, v_token = api.bot("victim")
    made = []
    for i in range(4):
        _, t = api.bot(f"c{i}")
        made.append(_challenge(c, t, victim).json["id"])
        time.sleep(0.01)  # distinct creation times: "newest" is well defined
    turns = c.get("/bots/me/turns", query_string={"timeout": 0}, headers=auth(v_token)).json
    assert turns["invitations_pending"] == 4
    assert [i["game_id"] for i in turns["invitations"]] == made[2:]  # oldest first
    every = c.get("/bots/me/invitations", headers=auth(v_token)).json["invitations"]
    assert [i["game_id"] for i in every] == made
