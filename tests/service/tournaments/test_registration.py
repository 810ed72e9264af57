"""Tournaments any owner organizes and bots enter by themselves (real Redis, the app over
its test client): registration and the start at ``starts_at`` by the clock's pass, the
private code, cancellation short of entrants (entrants told), the organizer's authority,
each entry condition's own problem type, the quotas, house bots filling up, the schedule
made once per slot, and an arena with a late entrant."""

from __future__ import annotations

import itertools
import json
import random
import threading
import time
from typing import Any

import pytest

from service.arena.tournaments.schedule import Schedule, parse
from service.http.app import create_app
from service.http.tournaments.schemas import TournamentCreate
from tests.conftest import REDIS_URL
from tests.service.conftest import ADMIN_TOKEN
from tests.service.games.test_retries_and_waiting import PATIENCE_S, stop_poll_clock
from tests.service.tournaments.test_tournaments import auth, play_turns

EXPECTED_S = 30
ADMIN = auth(ADMIN_TOKEN)
FAST = {"target": 4}  # more than a kick can score (R6): a game is live once started


@pytest.fixture
def app(key_prefix):
    return create_app(
        {"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix, "ARENA_RATE_LIMIT": 0,
         "ARENA_ADMIN_TOKEN": ADMIN_TOKEN, "ARENA_OWNERS_PER_NETWORK": 0, "TESTING": True,
         "ARENA_TOURNAMENTS_PER_OWNER_DAY": 4, "ARENA_TOURNAMENTS_OPEN_PER_OWNER": 3,
         "ARENA_TOURNAMENT_ENTRIES_PER_BOT": 2, "ARENA_TOURNAMENT_GAMES_PER_OWNER": 100,
         "ARENA_TOURNAMENT_SCHEDULE": "[]"})


def owner(client: Any, name: str = "bot") -> tuple[str, str]:
    """A bot of a new owner: (id, token)."""
    r = client.post("/bots", json={"name": name})
    assert r.status_code == 201, r.json
    return r.json["id"], r.json["token"]


def second_bot(client: Any, token: str, name: str = "bot2") -> tuple[str, str]:
    r = client.post("/bots", json={"name": name}, headers=auth(token))
    assert r.status_code == 201
    return r.json["id"], r.json["token"]


def organize(client: Any, token: str, status: int = 201, **body: Any) -> dict[str, Any]:
    r = client.post("/tournaments", headers=auth(token), json={
        "format": "swiss", "registration": "open", "variants": FAST, "max_entrants": 8,
        **body})
    assert r.status_code == status, r.json
    return r.json


def enter(client: Any, tid: str, token: str, **body: Any) -> Any:
    return client.post(f"/tournaments/{tid}/entrants", headers=auth(token), json=body)


def problem(r: Any, status: int, kind: str) -> None:
    assert r.status_code == status, r.json
    assert r.content_type == "application/problem+json"
    assert r.json["type"] == f"/problems/{kind}", r.json


def registration(app: Any) -> Any:
    return app.extensions["registration"]


def run(client: Any, app: Any, tid: str, bots: dict[str, str]) -> dict[str, Any]:
    rng = random.Random(3)
    for _ in range(3000):
        t = client.get(f"/tournaments/{tid}").json
        if t["status"] in ("finished", "cancelled"):
            return t
        if not play_turns(client, bots, rng):
            app.extensions["tournaments"].advance_all()  # the sweeper's pass
            time.sleep(0.02)
    raise AssertionError("tournament did not finish")


# --- organizers and entrants -----------------------------------------------------------------


def test_bots_of_two_owners_enter_an_open_tournament_it_starts_on_time_and_they_hear_it(
        app, client):
    org, org_token = owner(client, "organizer")
    a, a_token = owner(client, "alpha")
    b, b_token = owner(client, "beta")
    t = organize(client, org_token, starts_at=time.time() + 30, rounds=2,
                 games_per_pairing=1)
    assert t["status"] == "registering" and t["organizer"] is not None
    assert t["registration"]["conditions"]["validated"] is True  # open: validated bots
    assert t["registration"]["conditions"]["one_per_owner"] is True
    for fmt in ("knockout", "round_robin", "arena"):  # every format, before its start
        extra = {"duration": 60} if fmt == "arena" else {}
        other = client.post("/tournaments", headers=ADMIN, json={
            "format": fmt, "registration": "open", **extra}).json["id"]
        for path in ("", "/standings", "/export", "/export.csv"):
            assert client.get(f"/tournaments/{other}{path}").status_code == 200, (fmt, path)
        assert client.post(f"/tournaments/{other}/cancel", headers=ADMIN).status_code == 200
        assert client.get(f"/tournaments/{other}/standings").status_code == 200
    for path in ("", "/standings", "/export", "/export.csv"):  # readable before the start
        assert client.get(f"/tournaments/{t['id']}{path}").status_code == 200, path
    found = client.get("/tournaments", query_string={"status": "registering"}).json
    assert [x["id"] for x in found["items"]] == [t["id"]]
    assert client.get("/tournaments", query_string={"status": "registering",
                                                    "players": 4}).json["items"] == []
    for token in (a_token, b_token, org_token):
        r = enter(client, t["id"], token)
        assert r.status_code == 201, r.json
    assert enter(client, t["id"], a_token).status_code == 201  # a repeat: as it is
    assert client.get(f"/tournaments/{t['id']}").json["entrant_count"] == 3
    # before starts_at the clock's pass starts nothing
    assert registration(app).start_due() == 0
    r = app.extensions["arena"].store.r
    key = app.extensions["tournaments"].key(t["id"])
    assert 86400 < r.ttl(key) <= 86400 + 31  # never started: removed a day after starts_at
    assert registration(app).start_due(now=time.time() + 31) == 1
    assert r.ttl(key) == -1  # started: its standings are a result, kept
    assert registration(app).start_due(now=time.time() + 31) == 0  # once
    t = client.get(f"/tournaments/{t['id']}").json
    assert t["status"] == "running" and t["progress"]["games_live"] == 1 and t["rated"]
    turns = client.get("/bots/me/turns", query_string={"timeout": 0},
                       headers=auth(a_token)).json
    assert [n["event"] for n in turns["tournaments"]] == ["starting"]
    assert turns["tournaments"][0]["tournament_id"] == t["id"]
    done = run(client, app, t["id"], {a: a_token, b: b_token, org: org_token})
    assert done["status"] == "finished"
    rows = client.get(f"/tournaments/{t['id']}/standings").json["items"]
    assert {r["bot_id"] for r in rows} == {a, b, org}
    turns = client.get("/bots/me/turns", query_string={"timeout": 0},
                       headers=auth(b_token)).json
    assert [n["event"] for n in turns["tournaments"]] == ["starting", "finished"]


def test_a_notice_ends_the_turn_long_poll(app, client, monkeypatch):
    """Woken by the notice: the poll's clock is stopped, so it cannot run out (one that
    ran out would list the notice all the same)."""
    _org, org_token = owner(client)
    _a, a_token = owner(client)
    t = organize(client, org_token)
    for token in (org_token, a_token):
        assert enter(client, t["id"], token).status_code == 201
    got: dict[str, Any] = {}
    stop_poll_clock(monkeypatch)

    def poll() -> None:
        got["answer"] = app.test_client().get(
            "/bots/me/turns", query_string={"timeout": 10}, headers=auth(a_token)).json

    waiter = threading.Thread(target=poll, daemon=True)
    waiter.start()
    time.sleep(0.5)
    client.post(f"/tournaments/{t['id']}/start", headers=auth(org_token))
    waiter.join(PATIENCE_S)
    assert not waiter.is_alive(), "the tournament's start did not wake the poll"
    assert got["answer"]["tournaments"][0]["event"] == "starting"


def test_a_private_tournament_refuses_a_wrong_code(client):
    _, org_token = owner(client)
    _, a_token = owner(client)
    t = organize(client, org_token, registration="private")
    code = t["code"]
    assert "code" not in client.get(f"/tournaments/{t['id']}").json  # shown only once
    problem(enter(client, t["id"], a_token), 403, "entry-code")
    problem(enter(client, t["id"], a_token, code=code + "x"), 403, "entry-code")
    assert enter(client, t["id"], a_token, code=code).status_code == 201


def test_short_of_entrants_it_is_cancelled_with_the_reason_and_entrants_are_told(
        app, client):
    _, org_token = owner(client)
    _a, a_token = owner(client)
    t = organize(client, org_token, starts_at=time.time() + 5, min_entrants=3,
                 house_fill=False)
    assert enter(client, t["id"], a_token).status_code == 201
    assert registration(app).start_due(now=time.time() + 6) == 0
    t = client.get(f"/tournaments/{t['id']}").json
    assert t["status"] == "cancelled" and "fewer than its minimum of 3" in t["reason"]
    notes = client.get("/bots/me/turns", query_string={"timeout": 0},
                       headers=auth(a_token)).json["tournaments"]
    assert notes[0]["event"] == "cancelled" and "minimum" in notes[0]["reason"]
    problem(enter(client, t["id"], owner(client)[1]), 409, "entry-closed")


def test_house_bots_fill_an_open_tournament_up_to_its_minimum(app, client):
    store = app.extensions["arena"].store
    # the house accounts as the house process makes them (without its runners)
    from service.arena.accounts import house
    house.ensure_accounts(store)
    house.beat(store)
    listed = client.get("/house").json
    assert listed["playing"] and {i["strategy"] for i in listed["items"]} == {
        "random", "heuristic", "search"}
    _, org_token = owner(client)
    a, a_token = owner(client)
    t = organize(client, org_token, starts_at=time.time() + 5, min_entrants=4,
                 conditions={"validated": False})
    assert enter(client, t["id"], a_token).status_code == 201
    assert registration(app).start_due(now=time.time() + 6) == 1
    t = client.get(f"/tournaments/{t['id']}").json
    ids = [e["bot_id"] for e in t["entrants"]]
    house_ids = {i["bot_id"] for i in listed["items"]}
    assert t["status"] == "running" and len(ids) == 4 and a in ids
    assert len(set(ids) & house_ids) == 3


def test_an_organizer_controls_its_own_tournament_and_nobody_elses(client):
    _, org_token = owner(client)
    _, org2_bot_token = second_bot(client, org_token)  # the same owner, another bot
    _, stranger_token = owner(client)
    a, a_token = owner(client)
    t = organize(client, org_token)
    assert enter(client, t["id"], a_token).status_code == 201
    base = f"/tournaments/{t['id']}"
    for path, body in (("start", {}), ("pause", {}), ("resume", {}), ("cancel", {}),
                       (f"entrants/{a}/exclude", {"reason": "no"})):
        problem(client.post(f"{base}/{path}", json=body, headers=auth(stranger_token)),
                403, "not-organizer")
    problem(client.post(f"{base}/pause", json={}, headers=auth(org_token)), 409,
            "not-started")
    r = client.post(f"{base}/entrants/{a}/exclude", json={"reason": "plays too slowly"},
                    headers=auth(org2_bot_token))
    assert r.status_code == 200 and r.json["excluded"][0]["reason"] == "plays too slowly"
    problem(enter(client, t["id"], a_token), 409, "entry-closed")
    r = client.post(f"{base}/cancel", json={"reason": "rain"}, headers=ADMIN)  # overrides
    assert r.json["status"] == "cancelled" and r.json["reason"] == "rain"
    # the service's own tournaments are the admin's alone
    r = client.post("/tournaments", headers=ADMIN, json={"format": "swiss",
                                                          "registration": "open"})
    problem(client.post(f"/tournaments/{r.json['id']}/cancel", json={},
                        headers=auth(org_token)), 403, "not-organizer")


def test_an_excluded_entrant_of_a_running_tournament_forfeits_with_the_reason_shown(
        client):
    a, a_token = owner(client)
    b, _ = second_bot(client, a_token)
    c, _ = second_bot(client, a_token, "third")
    r = client.post("/tournaments", headers=auth(a_token), json={
        "format": "round_robin", "entrants": [a, b, c], "variants": FAST})
    assert r.status_code == 201 and r.json["rated"] is False  # one owner's: unrated
    tid = r.json["id"]
    r = client.post(f"/tournaments/{tid}/entrants/{c}/exclude",
                    json={"reason": "crashed twice"}, headers=auth(a_token))
    row = next(e for e in r.json["entrants"] if e["bot_id"] == c)
    assert row["status"] == "excluded" and row["note"] == "crashed twice"


def test_only_the_organizers_own_bots_are_named_and_no_seed_for_others_to_enter(client):
    a, a_token = owner(client)
    b, _ = owner(client)
    r = client.post("/tournaments", headers=auth(a_token), json={
        "format": "swiss", "entrants": [a, b]})
    problem(r, 403, "forbidden-entrant")
    r = client.post("/tournaments", headers=auth(a_token), json={
        "format": "swiss", "registration": "open", "seed": 7})
    problem(r, 422, "validation")
    assert "seed" in r.json["errors"]


# --- entry conditions, each with its own problem ----------------------------------------------


def test_each_entry_condition_refuses_with_its_own_problem_type(app, client):
    store = app.extensions["arena"].store
    _, org_token = owner(client)
    a, a_token = owner(client)
    store.r.set(f"{store.p}house:alive", "1", ex=60)  # validation is possible here
    t = organize(client, org_token)
    problem(enter(client, t["id"], a_token), 403, "entry-not-validated")
    store.r.hset(store.keys.bot(a), "validated", "g1")
    assert enter(client, t["id"], a_token).status_code == 201
    _, a2_token = second_bot(client, a_token)
    store.r.hset(store.keys.bot(_), "validated", "g2")
    problem(enter(client, t["id"], a2_token), 409, "entry-one-per-owner")

    t = organize(client, org_token, conditions={"min_rated_games": 5, "validated": False})
    problem(enter(client, t["id"], a_token), 403, "entry-rated-games")
    t = organize(client, org_token, conditions={"rating_min": 10.0, "validated": False})
    problem(enter(client, t["id"], a_token), 403, "entry-rating-band")
    assert store.r.delete(f"{store.p}house:alive")

    full = organize(client, owner(client)[1], max_entrants=2, house_fill=False)
    for _i in range(2):
        assert enter(client, full["id"], owner(client)[1]).status_code == 201
    problem(enter(client, full["id"], a_token), 409, "tournament-full")
    # the bot's open entries: ARENA_TOURNAMENT_ENTRIES_PER_BOT (2 here)
    assert enter(client, organize(client, owner(client)[1])["id"],
                 a_token).status_code == 201  # its second
    other_org = owner(client)[1]
    problem(enter(client, organize(client, other_org)["id"], a_token), 429, "entry-quota")
    # a running round robin takes no entries
    x, x_token = owner(client)
    y, _ = second_bot(client, x_token)
    r = client.post("/tournaments", headers=auth(x_token), json={
        "format": "round_robin", "entrants": [x, y], "variants": FAST})
    problem(enter(client, r.json["id"], owner(client)[1]), 409, "entry-closed")


# --- quotas -------------------------------------------------------------------------------------


def test_the_quotas_on_tournaments_an_owner_organizes(client):
    _, token = owner(client)
    made = [organize(client, token)["id"] for _ in range(3)]  # open at once: 3
    problem(client.post("/tournaments", headers=auth(token), json={
        "format": "swiss", "registration": "open", "max_entrants": 8}), 429, "tournament-quota")
    client.post(f"/tournaments/{made[0]}/cancel", json={}, headers=auth(token))
    organize(client, token)  # the fourth today
    client.post(f"/tournaments/{made[1]}/cancel", json={}, headers=auth(token))
    r = client.post("/tournaments", headers=auth(token),
                    json={"format": "swiss", "registration": "open", "max_entrants": 8})
    problem(r, 429, "tournament-quota")  # a day's: 4
    assert "today" in r.json["detail"] and int(r.headers["Retry-After"]) > 0
    _, token2 = owner(client)
    r = client.post("/tournaments", headers=auth(token2), json={
        "format": "round_robin", "registration": "open", "max_entrants": 12})
    problem(r, 422, "validation")  # 66 x 2 games > ARENA_TOURNAMENT_GAMES_PER_OWNER (100)
    assert "max_entrants" in r.json["errors"]


# --- the schedule ------------------------------------------------------------------------------


def test_the_schedule_makes_one_tournament_per_slot_whatever_the_number_of_workers(app):
    entries = parse([{"name": "minutely", "every": 60, "ahead": 120,
                      "tournament": {"format": "swiss", "registration": "open",
                                     "rounds": 2, "min_entrants": 2}}],
                    lambda b: TournamentCreate().load(b))
    workers = [Schedule(registration(app), entries) for _ in range(4)]
    made: list[int] = []
    now = (int(time.time()) // 60 + 10) * 60 + 30  # half a minute into a future minute
    threads = [threading.Thread(target=lambda w=w: made.append(w.ensure(now=now)))
               for w in workers]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sum(made) == 2  # the slots starting 30 s and 90 s on (120 s ahead)
    listing = workers[0].listing(now=now)[0]
    assert listing["next_start"] == now + 30 and listing["next_tournament"]
    assert workers[1].ensure(now=now + 1) == 0


# --- the arena ---------------------------------------------------------------------------------


def test_an_arena_pairs_free_entrants_takes_a_late_one_and_ends_on_its_clock(
        app, client, monkeypatch):
    from service.arena.tournaments import arena_format
    monkeypatch.setattr(arena_format, "REMATCH_AFTER_S", 1e9)  # the strict rule alone
    a, a_token = owner(client, "a")
    b, b_token = owner(client, "b")
    c, c_token = owner(client, "c")
    t = organize(client, a_token, format="arena", duration=300, conditions={
        "validated": False})
    tid = t["id"]
    for token in (a_token, b_token):
        assert enter(client, tid, token).status_code == 201
    client.post(f"/tournaments/{tid}/start", headers=auth(a_token))
    t = client.get(f"/tournaments/{tid}").json
    assert t["status"] == "running" and t["progress"]["games_live"] == 1
    assert t["ends_at"] >= time.time() + 2
    # a late entrant: paired as soon as another entrant is free
    assert enter(client, tid, c_token).status_code == 201
    bots = {a: a_token, b: b_token, c: c_token}
    rng = random.Random(5)
    tours = app.extensions["tournaments"]
    ended = False
    while client.get(f"/tournaments/{tid}").json["status"] == "running":
        play_turns(client, bots, rng)
        doc = tours.doc(tid)
        games = [s for s in doc["rounds"][0]["slots"]]
        if not ended and sum(s["status"] == "done" for s in games) >= 4:
            # the clock runs out now (not after however long a loaded machine takes to
            # play four games): nobody is paired again, the games under way finish
            doc["ends_at"] = int(time.time()) - 1
            tours.r.set(tours.key(tid), json.dumps(doc))
            ended, paired = True, len(games)
        tours.advance(tid)
    assert len(tours.doc(tid)["rounds"][0]["slots"]) == paired  # none after the clock
    t = client.get(f"/tournaments/{tid}").json
    games = [g for r in t["rounds"] for g in r["games"]]
    assert t["status"] == "finished" and len(games) >= 4
    assert any(c in g["teams"] for g in games)
    for bot in bots:  # no immediate rematch: three entrants were in from the 2nd game on
        met = [next(x for x in g["teams"] if x != bot) for g in games[1:] if bot in g["teams"]]
        assert all(x != y for x, y in itertools.pairwise(met)), (bot, met, [
            (g["slot"], g["teams"], g["status"], g["winner"]) for g in games])
    rows = client.get(f"/tournaments/{tid}/standings").json["items"]
    assert {r["bot_id"] for r in rows} == {a, b, c}
    wins = {r["bot_id"]: r["won"] for r in rows}
    for r in rows:  # 2 a win, 4 once two in a row came first
        assert r["score"] >= 2 * wins[r["bot_id"]]
    assert [r["rank"] for r in rows] == [1, 2, 3]


def test_arena_entrants_that_met_last_meet_again_only_once_both_have_waited():
    from service.arena.tournaments.arena_format import pairs_for

    last = {"a": "b", "b": "a", "c": "d", "d": "c"}
    assert pairs_for(["a", "b"], {"a", "b"}, last, alone=False) == []
    assert pairs_for(["a", "b"], {"a", "b"}, last, alone=False, patient={"a"}) == []
    assert pairs_for(["a", "b"], {"a", "b"}, last, alone=False,
                     patient={"a", "b"}) == [("a", "b")]
    assert pairs_for(["a", "b"], {"a", "b"}, last, alone=True) == [("a", "b")]
    # four free: nobody meets its last opponent
    assert pairs_for(["a", "b", "c", "d"], {"a", "b", "c", "d"}, last,
                     alone=False) == [("a", "c"), ("b", "d")]


def test_an_entrant_leaving_as_the_tournament_starts_withdraws_and_stays_an_entrant(
        app, client, monkeypatch):
    """The leave read the tournament as registering, and it started before the leave's
    transaction: the entrant is not taken off a tournament whose games name it, it
    withdraws (its games forfeited, ``withdrawn`` in the standings)."""
    _, org_token = owner(client)
    a, a_token = owner(client)
    _b, b_token = owner(client)
    t = organize(client, org_token, conditions={"validated": False}, rounds=1,
                 games_per_pairing=1)
    for token in (a_token, b_token):
        assert enter(client, t["id"], token).status_code == 201
    reg = registration(app)
    seen_before_start = reg.t.doc(t["id"])
    assert seen_before_start["status"] == "registering"
    started = client.post(f"/tournaments/{t['id']}/start", headers=auth(org_token)).json
    assert started["status"] == "running"
    real_doc = reg.t.doc
    stale = iter([seen_before_start])
    monkeypatch.setattr(reg.t, "doc", lambda tid: next(stale, None) or real_doc(tid))
    r = client.post(f"/tournaments/{t['id']}/entrants/{a}/withdraw", headers=auth(a_token))
    assert r.status_code == 200, r.json
    monkeypatch.undo()
    t = client.get(f"/tournaments/{t['id']}").json
    row = next((e for e in t["entrants"] if e["bot_id"] == a), None)
    assert row is not None and row["status"] == "withdrawn", t["entrants"]
    games = [g for rnd in t["rounds"] for g in rnd["games"] if a in g["teams"]]
    assert games and all(a in (g["forfeit"] or ()) for g in games), games


def test_an_organizer_sees_no_more_of_a_live_hand_than_a_spectator(app, client):
    _, org_token = owner(client)
    _a, a_token = owner(client)
    _b, b_token = owner(client)
    t = organize(client, org_token, conditions={"validated": False}, rounds=1,
                 games_per_pairing=1, variants={"target": 11})
    for token in (a_token, b_token):
        assert enter(client, t["id"], token).status_code == 201
    t = client.post(f"/tournaments/{t['id']}/start", headers=auth(org_token)).json
    gid = next(g["game_id"] for r in t["rounds"] for g in r["games"] if g["game_id"])
    seat_view = client.get(f"/games/{gid}", headers=auth(a_token)).json
    assert seat_view.get("hand")  # a seat sees its own cards
    as_organizer = client.get(f"/games/{gid}", headers=auth(org_token)).json
    as_spectator = client.get(f"/games/{gid}").json
    assert as_organizer == as_spectator and not as_organizer.get("hand")
    assert "seed" not in client.get(f"/tournaments/{t['id']}", headers=auth(org_token)
                                    ).json["settings"]  # the seed fixes every card
    r = client.get(f"/games/{gid}/record", headers=auth(org_token))
    assert r.json == client.get(f"/games/{gid}/record").json


def test_a_tournaments_event_stream_tells_entries_its_start_games_and_end(app, client):
    from service.arena.tournaments import stream

    _, org_token = owner(client)
    _a, a_token = owner(client)
    _b, b_token = owner(client)
    # to 11: no first kick can end the game at once (R22), so it is live when looked at
    t = organize(client, org_token, conditions={"validated": False}, rounds=1,
                 games_per_pairing=1, variants={"target": 11})
    frames = stream.events(app.extensions["tournaments"], t["id"], poll_s=0.01,
                           keepalive_s=60)

    def next_events() -> list[tuple[str, dict]]:
        out = []
        while True:
            chunk = next(frames).decode()
            if chunk.startswith("retry") or chunk.startswith(":"):
                continue
            lines = dict(line.split(": ", 1) for line in chunk.strip().split("\n"))
            out.append((lines["event"], json.loads(lines["data"])))
            return out

    assert next_events()[0][0] == "snapshot"
    for token in (a_token, b_token):
        assert enter(client, t["id"], token).status_code == 201
    kind, data = next_events()[0]
    assert kind == "entrants" and data["entrant_count"] == 2
    client.post(f"/tournaments/{t['id']}/start", headers=auth(org_token))
    seen = [next_events()[0] for _ in range(3)]
    assert [k for k, _ in seen] == ["status", "round", "game"]
    assert seen[0][1] == {"status": "running", "was": "registering", "reason": None}
    assert seen[2][1]["status"] == "live" and "scores" in seen[2][1]
    client.post(f"/tournaments/{t['id']}/cancel", json={"reason": "rain"},
                headers=auth(org_token))
    rest = []
    for chunk in frames:
        text = chunk.decode()
        if text.startswith("id:"):
            rest.append(dict(line.split(": ", 1) for line in text.strip().split("\n")))
    kinds = [r["event"] for r in rest]
    assert "standings" in kinds and {"status": "cancelled", "was": "running",
                                     "reason": "rain"} in [json.loads(r["data"]) for r in rest
                                                           if r["event"] == "status"]
