"""Idempotent retries, long-poll wake-ups and SSE resumption."""

from __future__ import annotations

import threading
import time
import types

from service.arena.games import waiting
from service.engine import new_game, redact_event
from service.storage import wakeups

# How long a test waits for a long-poll or a waiting action that a wake-up should answer.
# With the wait's own clock stopped (``stop_poll_clock``) nothing but a wake-up answers
# it, so running out of this means "never woken", never "slow machine"
PATIENCE_S = 120


def stop_poll_clock(monkeypatch) -> None:
    """Stop the clock this process's long-polls and waiting actions measure their wait
    by: a wait then never runs out, it ends only when something wakes it, so an answer
    says it was woken whatever the machine's load made the wait. (A wait left over when
    the test ends runs out once the clock is back.)"""
    monkeypatch.setattr(waiting, "time", types.SimpleNamespace(monotonic=lambda: 0.0))


def record_waits(monkeypatch) -> list[float]:
    """From now on, the timeout of every wait this process's waiters begin (on their
    game's or bot's channel): a request that answered at once began none."""
    began: list[float] = []
    wait = wakeups.Waiter.wait

    def recorded(self, timeout: float) -> list:
        began.append(timeout)
        return wait(self, timeout)

    monkeypatch.setattr(wakeups.Waiter, "wait", recorded)
    return began


def test_same_key_applies_once_with_identical_body(api):
    game_id, tokens = api.table(4, 5)
    v = api.view(game_id).json
    t = tokens[v["turn"]]
    h = {"Idempotency-Key": "k-1"}
    first = api.act(game_id, t, "beg", headers=h)
    assert first.status_code == 200
    second = api.act(game_id, t, "beg", headers=h)
    assert second.status_code == 200
    assert second.get_data() == first.get_data()
    assert api.view(game_id).json["version"] == v["version"] + 1
    # The game moves on; the retry still gets the first answer, byte for byte.
    dealer = api.view(game_id).json["turn"]
    assert api.act(game_id, tokens[dealer], "run_pack").status_code == 200
    third = api.act(game_id, t, "beg", headers=h)
    assert third.get_data() == first.get_data()
    assert api.view(game_id).json["version"] == v["version"] + 2


def test_same_key_other_body_is_a_problem(api):
    game_id, tokens = api.table(2, 8)
    v = api.view(game_id).json
    t = tokens[v["turn"]]
    assert api.act(game_id, t, "stand", headers={"Idempotency-Key": "x"}).status_code == 200
    r = api.act(game_id, t, "beg", headers={"Idempotency-Key": "x"})
    assert r.status_code == 422
    assert r.json["type"] == "/problems/idempotency-key-reused"


def test_concurrent_retries_with_one_key_apply_once(app, api):
    game_id, tokens = api.table(4, 9)
    v = api.view(game_id).json
    t = tokens[v["turn"]]
    bodies = []

    def go():
        c = app.test_client()
        r = c.post(f"/games/{game_id}/actions", json={"action": "stand"},
                   headers={"Authorization": f"Bearer {t}", "Idempotency-Key": "same"})
        bodies.append((r.status_code, r.get_data()))

    threads = [threading.Thread(target=go) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert {s for s, _ in bodies} == {200}
    assert len({b for _, b in bodies}) == 1
    assert api.view(game_id).json["version"] == v["version"] + 1


def test_long_poll_wakes_promptly(app, api, monkeypatch):
    """Woken by the action, not by the poll's timeout: with the poll's clock stopped
    only a wake-up can answer it."""
    game_id, tokens = api.table(4, 21)
    v = api.view(game_id).json
    beggar, dealer = v["turn"], v["dealer"]
    answer = {}
    stop_poll_clock(monkeypatch)

    def wait():
        c = app.test_client()
        r = c.get(f"/games/{game_id}/turn", query_string={"timeout": 30},
                  headers={"Authorization": f"Bearer {tokens[dealer]}"})
        answer.update(r.json)

    th = threading.Thread(target=wait, daemon=True)
    th.start()
    time.sleep(0.3)
    assert not answer  # still waiting: not the dealer's turn
    assert api.act(game_id, tokens[beggar], "beg").status_code == 200
    th.join(PATIENCE_S)
    assert not th.is_alive(), "the long-poll was not woken by the action"
    assert answer["timed_out"] is False
    assert answer["view"]["your_turn"] is True
    assert answer["view"]["legal_actions"] == ["give_one", "run_pack"]


def test_long_poll_after_version_and_timeout(api, monkeypatch):
    game_id, tokens = api.table(2, 4)
    v = api.view(game_id).json
    began = record_waits(monkeypatch)
    r = api.c.get(f"/games/{game_id}/turn", query_string={"after": v["version"] - 1})
    assert r.json["timed_out"] is False and began == []  # past it already: at once
    other = tokens[1 - v["turn"]]
    r = api.c.get(f"/games/{game_id}/turn", query_string={"timeout": 0.3},
                  headers=api.auth(other))
    # not its turn: it waited on the game (no clock read here), and its time ran out
    assert r.json["timed_out"] is True and began and max(began) <= 0.3


def test_bot_turns_long_poll(app, api):
    b0, t0 = api.bot("solo")
    b1, t1 = api.bot("duo")
    game = api.game(t0, 2, seats=[b0, b1], seed=3)
    turn_bot = [t0, t1][api.view(game["id"]).json["turn"]]
    r = api.c.get("/bots/me/turns", query_string={"timeout": 0}, headers=api.auth(turn_bot))
    assert r.json == {"timed_out": False, "games": [game["id"]], "invitations": []}
    other = t1 if turn_bot == t0 else t0
    got: dict = {}
    th = _bot_turns_in_thread(app, other, got)
    assert api.act(game["id"], turn_bot, "beg").status_code == 200
    th.join(35)
    assert got == {"timed_out": False, "games": [game["id"]], "invitations": []}


def _bot_turns_in_thread(app, token, got):
    """``GET /bots/me/turns`` (30 s) for ``token`` in a thread, answer into ``got``;
    returns once it has had time to start waiting."""
    def wait():
        c = app.test_client()
        got.update(c.get("/bots/me/turns", query_string={"timeout": 30},
                         headers={"Authorization": f"Bearer {token}"}).json)

    th = threading.Thread(target=wait, daemon=True)
    th.start()
    time.sleep(0.2)
    return th


def test_bot_turns_wake_with_the_game_watched_here_too(app, api):
    """A commit that wakes this process's own waiters skips Redis's echo of it: the bot
    whose turn the game became must be woken with them, not by that echo."""
    b0, t0 = api.bot("solo")
    b1, t1 = api.bot("duo")
    game = api.game(t0, 2, seats=[b0, b1], seed=3)
    gid = game["id"]
    first = api.view(gid).json
    turn_bot, other = ([t0, t1] if first["turn"] == 0 else [t1, t0])
    watched = {}

    def watch():  # a spectator long-polls the game: a game-channel waiter in this process
        c = app.test_client()
        watched.update(c.get(f"/games/{gid}/turn",
                             query_string={"after": first["version"], "timeout": 30}).json)

    spectator = threading.Thread(target=watch)
    spectator.start()
    got: dict = {}
    waiting = _bot_turns_in_thread(app, other, got)
    assert api.act(gid, turn_bot, "beg").status_code == 200
    waiting.join(35)
    spectator.join(35)
    assert got == {"timed_out": False, "games": [gid], "invitations": []}
    assert watched["view"]["version"] == first["version"] + 1


def test_a_new_game_wakes_the_bot_whose_turn_it_is(app, api, monkeypatch):
    """Woken, not answered by the poll's timeout: its clock is stopped."""
    b0, t0 = api.bot("host")
    b1, t1 = api.bot("guest")
    got: dict = {}
    stop_poll_clock(monkeypatch)
    poll = _bot_turns_in_thread(app, t1, got)
    for seed in range(50):  # a seed that makes the guest (seat 1) the beggar
        game = api.game(t0, 2, seats=[b0, b1], seed=seed)
        if api.view(game["id"]).json["turn"] == 1:
            break
    poll.join(PATIENCE_S)
    assert not poll.is_alive(), "the new game's first turn did not wake the bot"
    assert got == {"timed_out": False, "games": [game["id"]], "invitations": []}


def _parse_sse(chunks):
    events, comments = [], []
    for chunk in chunks:
        text = chunk.decode() if isinstance(chunk, bytes) else chunk
        for block in text.split("\n\n"):
            if not block.strip():
                continue
            if block.startswith(":"):
                comments.append(block)
                continue
            fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
            if "id" in fields:
                events.append(fields)
    return events, comments


def _read(resp, n):
    """Pull chunks from a streamed test response until ``n`` events have come."""
    got = []
    it = iter(resp.response)
    while len(_parse_sse(got)[0]) < n:
        got.append(next(it))
    return got, it


def test_sse_redacted_resume_and_keepalive(key_prefix, api):
    import json

    from service.http.app import create_app
    from tests.conftest import REDIS_URL

    app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                      "ARENA_RATE_LIMIT": 0, "ARENA_SSE_KEEPALIVE": 0.2})
    c = app.test_client()
    api.c = c
    game_id, tokens = api.table(4, 33)
    seat = api.view(game_id).json["turn"]
    _, start_events = new_game(4, 33)
    expected = [redact_event(e, seat) for e in start_events]
    resp = c.get(f"/games/{game_id}/events", headers=api.auth(tokens[seat]), buffered=False)
    assert resp.mimetype == "text/event-stream"
    chunks, it = _read(resp, len(expected))
    events, _ = _parse_sse(chunks)
    assert [json.loads(e["data"]) for e in events] == expected
    assert [e["id"] for e in events] == [f"0.{i}" for i in range(len(expected))]
    # Nothing happens: keep-alive comments come.
    comments = []
    while not comments:
        comments = _parse_sse([next(it)])[1]
    assert comments[0] == ": keep-alive"
    # An action arrives on the open stream.
    assert api.act(game_id, tokens[seat], "stand").status_code == 200
    more = []
    while not _parse_sse(more)[0]:
        more.append(next(it))
    new, _ = _parse_sse(more)
    assert new[0]["id"] == "1.0" and new[0]["event"] == "stand"
    resp.close()
    # Resume from the middle: exactly the rest, nothing twice.
    resp = c.get(f"/games/{game_id}/events",
                 headers={**api.auth(tokens[seat]), "Last-Event-ID": "0.1"}, buffered=False)
    chunks, it = _read(resp, len(expected) - 2 + 1)
    events, _ = _parse_sse(chunks)
    assert [e["id"] for e in events][: len(expected) - 2] == [
        f"0.{i}" for i in range(2, len(expected))
    ]
    resp.close()


def test_sse_finished_game_ends_with_game_over(api):
    import random

    game_id, tokens = api.table(2, 12)
    api.play_out(game_id, tokens, random.Random(1))
    resp = api.c.get(f"/games/{game_id}/events")
    events, _ = _parse_sse([resp.get_data()])
    assert events[-1]["event"] == "game_over"
    ids = [tuple(map(int, e["id"].split("."))) for e in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


# --- ?wait for a bot holding two seats ------------------------------------------


def _partner_table(api, seed: int, target: int = 14):
    """A 4-player game where bot X holds seats 1 and 3 (a team) and bot Y seats 0 and 2:
    (game id, X's token, Y's token)."""
    x, tx = api.bot("x")
    y, ty = api.bot("y")
    game = api.game(ty, 4, seats=[y, x, y, x], seed=seed, variants={"target": target})
    return game["id"], tx, ty


def _play_until(api, game_id, token_of, rng, done):
    """Random legal moves (each seat's holder acting) until ``done(spectator view)``."""
    for _ in range(2000):
        s = api.view(game_id).json
        if done(s):
            return s
        assert s["status"] == "active"
        w = api.view(game_id, token_of(s["turn"]), seat=s["turn"]).json
        r = api.act(game_id, token_of(s["turn"]), rng.choice(w["legal_actions"]),
                    seat=s["turn"], version=w["version"])
        assert r.status_code == 200, r.json
    raise AssertionError("never got there")


def test_act_wait_with_a_seat_wakes_for_the_bots_other_seat(app, api, monkeypatch):
    """A bot holding seats 1 and 3 plays seat 1's card with ``"seat": 1`` and
    ``?wait=30``; the opponent at seat 2 plays, and seat 3 is in turn: the waiting action
    answers then, with seat 3's view (``seat`` 3, ``your_turn``). (Waiting for seat 1
    only would run the wait out, and a wait that runs out answers with the game as it
    is then: the wait's clock is stopped, so only the wake-up can answer it.)"""
    import random

    game_id, tx, ty = _partner_table(api, seed=17)
    rng = random.Random(5)
    s = _play_until(api, game_id, lambda seat: tx if seat % 2 else ty, rng,
                    lambda s: s["phase"] == "play" and s["turn"] == 1
                    and len(s["trick"]["cards"]) <= 1)
    w = api.view(game_id, tx, seat=1).json
    answer: dict = {}
    stop_poll_clock(monkeypatch)

    def act_and_wait():
        c = app.test_client()
        r = c.post(f"/games/{game_id}/actions", query_string={"wait": 30},
                   json={"action": w["legal_actions"][0], "version": w["version"], "seat": 1},
                   headers={"Authorization": f"Bearer {tx}"})
        answer.update(status=r.status_code, view=r.json)

    th = threading.Thread(target=act_and_wait, daemon=True)
    th.start()
    deadline = time.monotonic() + 10
    while api.view(game_id).json["version"] == s["version"]:  # seat 1's card applied
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert api.view(game_id).json["turn"] == 2
    w2 = api.view(game_id, ty, seat=2).json
    assert api.act(game_id, ty, w2["legal_actions"][0], seat=2,
                   version=w2["version"]).status_code == 200
    th.join(PATIENCE_S)
    assert not th.is_alive(), "the waiting action did not answer when seat 3 came into turn"
    view = answer["view"]
    assert answer["status"] == 200
    assert view["seat"] == 3 and view["turn"] == 3 and view["your_turn"] is True
    assert view["version"] == w["version"] + 2 and view["legal_actions"]


def test_act_wait_with_two_seats_always_answers_on_the_bots_turn(app, api):
    """A whole game: the bot of seats 1 and 3 plays each move with its ``seat`` and
    ``?wait=30`` (the next request is sent from the answer alone), while the other bot
    plays seats 0 and 2 from its own loop. Every answer is the game's end or the bot's
    turn, at whichever of its seats (the view of that seat): including an answer at once
    when its own card leaves its partner seat in turn (a trick won by seat 3)."""
    import random

    game_id, tx, ty = _partner_table(api, seed=23, target=7)
    stop = threading.Event()
    errors: list = []

    def other_bot():  # seats 0 and 2: long-poll its turn, play, repeat
        c = app.test_client()
        rng = random.Random(9)
        h = {"Authorization": f"Bearer {ty}"}
        while not stop.is_set():
            r = c.get(f"/games/{game_id}/turn", query_string={"timeout": 2}, headers=h)
            v = r.json["view"]
            if v["status"] == "finished":
                return
            if not v["your_turn"]:
                continue
            a = c.post(f"/games/{game_id}/actions", headers=h,
                       json={"action": rng.choice(v["legal_actions"]), "seat": v["seat"],
                             "version": v["version"]})
            if a.status_code != 200:
                errors.append(a.json)

    th = threading.Thread(target=other_bot)
    th.start()
    try:
        rng = random.Random(2)
        r = api.c.get(f"/games/{game_id}/turn", query_string={"timeout": 30},
                      headers=api.auth(tx))
        view = r.json["view"]
        moves = 0
        while view["status"] != "finished":
            assert view["your_turn"] and view["seat"] in (1, 3) and view["turn"] == view["seat"]
            r = api.c.post(f"/games/{game_id}/actions", query_string={"wait": 30},
                           json={"action": rng.choice(view["legal_actions"]),
                                 "seat": view["seat"], "version": view["version"]},
                           headers=api.auth(tx))
            assert r.status_code == 200, r.json
            view = r.json
            moves += 1
        assert moves > 20
    finally:
        stop.set()
        th.join(10)
    assert not errors


def test_act_wait_wakes_for_the_other_seat_across_processes():
    """The same under gunicorn with two worker processes: each request on a connection
    of its own, so the waiting action and the move that ends its wait are served by
    whichever worker takes them, the wake-up crossing through Redis pub/sub. A wait that
    hears nothing runs out with the view right after its own action (seat 1's, one
    version on), so the answer shows whether the wake-up crossed, whenever it came."""
    import json
    import random
    import urllib.request

    from tests.service.conftest import gunicorn

    def call(url: str, method: str, path: str, body: dict | None = None,
             token: str | None = None) -> tuple[int, dict]:
        req = urllib.request.Request(url + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None)
        req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())

    with gunicorn(ARENA_RATE_LIMIT="0") as (url, _proc):
        _, x = call(url, "POST", "/bots", {"name": "x"})
        _, y = call(url, "POST", "/bots", {"name": "y"}, x["token"])
        _, game = call(url, "POST", "/games", {"players": 4, "seed": 17,
                                               "seats": [y["id"], x["id"], y["id"], x["id"]]},
                       y["token"])
        gid = game["id"]
        rng = random.Random(5)
        tok = {0: y["token"], 1: x["token"], 2: y["token"], 3: x["token"]}
        for _ in range(2000):  # to seat 1's turn early in a trick: 1, then 2, then 3 play
            s = call(url, "GET", f"/games/{gid}")[1]
            if s["phase"] == "play" and s["turn"] == 1 and len(s["trick"]["cards"]) <= 1:
                break
            w = call(url, "GET", f"/games/{gid}?seat={s['turn']}", token=tok[s["turn"]])[1]
            call(url, "POST", f"/games/{gid}/actions", {
                "action": rng.choice(w["legal_actions"]), "seat": s["turn"],
                "version": w["version"]}, tok[s["turn"]])
        w = call(url, "GET", f"/games/{gid}?seat=1", token=x["token"])[1]
        answer: dict = {}

        def act_and_wait() -> None:
            answer["status"], answer["view"] = call(
                url, "POST", f"/games/{gid}/actions?wait=30",
                {"action": w["legal_actions"][0], "seat": 1, "version": w["version"]},
                x["token"])

        th = threading.Thread(target=act_and_wait, daemon=True)
        th.start()
        deadline = time.monotonic() + 20
        while call(url, "GET", f"/games/{gid}")[1]["version"] == w["version"]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        w2 = call(url, "GET", f"/games/{gid}?seat=2", token=y["token"])[1]
        assert w2["your_turn"]
        call(url, "POST", f"/games/{gid}/actions",
             {"action": w2["legal_actions"][0], "seat": 2, "version": w2["version"]},
             y["token"])
        th.join(PATIENCE_S)  # beyond the wait's own: woken or run out, it has answered
        assert not th.is_alive(), "the waiting action hung"
    assert answer["status"] == 200
    view = answer["view"]
    assert view["seat"] == 3 and view["your_turn"] is True and view["version"] == w["version"] + 2
