"""``ArenaClient`` against the real service (gunicorn + Redis), and its retry policy
against a scripted local HTTP server.

The dropped-connection test is the one that matters most: a proxy forwards an action to
the service and cuts the connection after the service has applied it; the client must
retry with the same Idempotency-Key and the action must be applied exactly once.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import random
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from clients.api import (
    ENDPOINTS,
    NETWORK_PROBLEM,
    ArenaClient,
    ArenaError,
    BotCreated,
    GameSummary,
    RetryPolicy,
    View,
)
from service.storage.embedded import free_port
from tests.contract import CONTRACT, load_yaml

EXPECTED_S = 25  # seconds, the whole module: the order workers take it in (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]


def play_out(clients: dict[str, ArenaClient], game_id: str, rng: random.Random,
             limit: int = 3000) -> int:
    """Play a game to the end, each bot's client acting on its turn; returns actions."""
    spectator = ArenaClient(next(iter(clients.values())).base_url)
    for n in range(limit):
        view = spectator.game(game_id)
        if view.finished:
            return n
        bot_id = view.raw["seats"][view.turn]["bot_id"]
        mine = clients[bot_id].game(game_id)
        assert mine.your_turn and mine.legal_actions
        clients[bot_id].act(game_id, rng.choice(mine.legal_actions), version=mine.version)
    raise AssertionError("the game did not finish")


def two_bots(url: str) -> tuple[ArenaClient, ArenaClient, GameSummary]:
    a, b = ArenaClient(url), ArenaClient(url)
    a.register("alice")
    b.register("bob", owner=a.token)  # alice's owner: seated at once
    game = a.create_game(2, seats=[a.me().id, b.me().id], seed=11, variants={"target": 3})
    return a, b, game


def in_turn(a: ArenaClient, b: ArenaClient, game_id: str) -> tuple[ArenaClient, View]:
    for c in (a, b):
        v = c.game(game_id)
        if v.your_turn:
            return c, v
    raise AssertionError("nobody is in turn")


# --- the endpoint table is the contract -------------------------------------------------


def test_the_endpoint_table_is_exactly_the_contract() -> None:
    spec = load_yaml((ROOT / "openapi.yaml").read_text())
    ops = {
        op["operationId"]: (method.upper(), path)
        for path, item in spec["paths"].items()
        for method, op in item.items()
        if isinstance(op, dict) and "operationId" in op
    }
    assert {k: (e.method, e.path) for k, e in ENDPOINTS.items()} == ops
    for name, ep in ENDPOINTS.items():
        # only POSTs without an Idempotency-Key are unsafe to repeat after a lost answer
        # (and DELETE, whose repeat is a 404); joining/leaving the ladder and a repeated
        # tournament cancel, pause, resume, start, entry or withdrawal answer as they are
        # (an exclusion's repeat is a 404: the entrant is gone); a repeated PUT
        # of a callback URL answers with the newest secret, the one in force; a repeated
        # policy PUT, suspension or lifting answers as it is now; asking again for an
        # analysis queues nothing more
        assert ep.safe == (ep.method == "GET" or name in (
            "joinSeat", "act", "requestAnalysis",
            "joinLadder", "leaveLadder", "verifyCallback",
            "cancelTournament", "pauseTournament",
            "resumeTournament",
            "withdrawEntrant",
            "enterTournament", "startTournament",
            "setCallback", "setPolicy", "suspendBot",
            "liftBotSuspension", "suspendOwner",
            "liftOwnerSuspension", "retireBot", "revokeToken", "revokeMyToken"))


# --- every method against the live service ----------------------------------------------


def test_every_method_against_the_live_service(live_url: str) -> None:
    anon = ArenaClient(live_url)
    assert anon.healthz().status == "ok" and anon.readyz().status == "ok"

    a, b = ArenaClient(live_url), ArenaClient(live_url)
    alice = a.register("alice")
    assert isinstance(alice, BotCreated) and a.token == alice.token
    assert "token" not in repr(alice) and alice.token not in repr(a)
    bob = b.register("bob")
    assert a.me().id == alice.id and b.me().name == "bob"
    assert anon.bot(bob.id).name == "bob"

    # an open seat, then joined (twice: the second is a no-op)
    game = a.create_game(2, seed=5, variants={"target": 3})
    assert game.status == "waiting" and game.seats[1].bot_id is None
    assert game.seats[0].bot_id == alice.id and game.variants["target"] == 3
    assert game.id in {g.id for g in anon.games(status="waiting", limit=100).items}
    joined = b.join(game.id, 1)
    assert joined.seat == 1 and joined.status == "active" and joined.hand
    assert b.join(game.id, 1).version == joined.version

    # paging: iter_games follows next_cursor
    a.create_game(2)
    page = anon.games(limit=1)
    assert len(page.items) == 1 and page.next_cursor is not None
    all_ids = [g.id for g in anon.iter_games(page_size=1)]
    assert game.id in all_ids and len(all_ids) == len(set(all_ids))

    # turns: exactly one of the two has this game pending
    pending = {c: c.my_turns(timeout=0) for c in (a, b)}
    assert sorted(len(t.games) for t in pending.values()) == [0, 1]
    actor = next(c for c, t in pending.items() if t.games)
    other = a if actor is b else b
    assert pending[other].timed_out and pending[actor].games == [game.id]

    answer = actor.wait_turn(game.id, timeout=5)
    assert not answer.timed_out and answer.view.your_turn and answer.view.legal_actions
    quiet = other.wait_turn(game.id, timeout=0.2)
    assert quiet.timed_out and not quiet.view.your_turn and quiet.view.legal_actions == []
    spectator = anon.game(game.id)
    assert spectator.seat is None and spectator.hand is None
    assert actor.game(game.id, seat=answer.view.seat).seat == answer.view.seat

    # the long-poll wakes when the other side acts
    woke: dict[str, Any] = {}
    waiter = threading.Thread(
        target=lambda: woke.setdefault("a", other.wait_turn(game.id, timeout=10,
                                                            after=answer.view.version)))
    waiter.start()
    time.sleep(0.2)
    before = actor.record(game.id)
    after = actor.act(game.id, answer.view.legal_actions[0], version=answer.view.version)
    waiter.join(10)
    assert woke["a"].view.version >= after.version > answer.view.version
    assert not before.complete and actor.record(game.id).actions[-1:] == [
        answer.view.legal_actions[0]]

    # the SSE stream, cut after three events and resumed with Last-Event-ID
    first = []
    for event in anon.events(game.id):
        first.append(event)
        if len(first) == 3:
            break
    rest_iter = anon.events(game.id, last_event_id=first[-1].id)
    resumed = next(rest_iter)
    again = list(zip(range(4), anon.events(game.id)))[3][1]
    assert resumed == again and resumed.id != first[-1].id
    assert first[0].type and isinstance(first[0].data, dict)

    play_out({alice.id: a, bob.id: b}, game.id, random.Random(1))
    done = anon.game(game.id)
    assert done.finished and done.winner in (0, 1)
    record = anon.record(game.id)
    assert record.complete and record.winner == done.winner and record.actions
    events = list(anon.events(game.id))
    assert events[-1].type == "game_over" and len({e.id for e in events}) == len(events)
    assert any(g.id == game.id for g in anon.games(status="finished", limit=100).items)

    # the bot's games, home: a page, and the NDJSON export with the full record
    mine = anon.bot_games(alice.id, rated=False)
    assert [g["id"] for g in mine["items"]] == [game.id] and mine["next_cursor"] is None
    exported = list(anon.export_games(alice.id, players=2))
    assert [g["id"] for g in exported] == [game.id]
    assert exported[0]["record"]["actions"] == record.actions
    assert list(anon.export_games(bob.id, rated=True)) == []
    # the live service is the session's: other modules' tournaments may be on the board
    assert all(r.bot_id not in (alice.id, bob.id) for r in anon.leaderboard())
    assert a.invitations() == []

    # tokens: rotate (the client keeps the new one), the owner's view, retirement
    old = a.token
    assert a.rotate_token() != old and a.me().id == alice.id
    assert [x["id"] for x in a.owner()["bots"]] == [alice.id]
    assert a.retire(alice.id)["retired"] is not None


# --- errors -----------------------------------------------------------------------------


def test_errors_carry_the_problem_body(live_url: str) -> None:
    a, b, game = two_bots(live_url)
    actor, view = in_turn(a, b, game.id)
    other = a if actor is b else b

    with pytest.raises(ArenaError) as info:
        other.act(game.id, view.legal_actions[0])
    e = info.value
    assert (e.status, e.kind, e.rule) == (409, "not-your-turn", "R23")
    assert e.type == "/problems/not-your-turn" and e.title and e.detail
    assert e.problem["instance"] == f"/games/{game.id}/actions"

    illegal = "run_pack" if "run_pack" not in view.legal_actions else "AS"
    with pytest.raises(ArenaError) as info:
        actor.act(game.id, illegal)
    assert info.value.kind in ("illegal-action", "validation") and info.value.status in (409, 422)

    with pytest.raises(ArenaError) as info:
        actor.act(game.id, view.legal_actions[0], version=view.version + 5)
    assert info.value.kind == "version-conflict"
    assert info.value.current_version == view.version

    with pytest.raises(ArenaError) as info:
        actor.act(game.id, view.legal_actions[0], if_match=view.version + 5)
    assert info.value.kind == "precondition-failed" and info.value.status == 412

    with pytest.raises(ArenaError) as info:
        actor.game("0" * 12)
    assert (info.value.status, info.value.kind) == (404, "not-found")

    with pytest.raises(ArenaError) as info:
        ArenaClient(live_url, token="nope").me()
    assert (info.value.status, info.value.kind) == (401, "unauthorized")

    with pytest.raises(ArenaError) as info:
        actor.create_game(3)
    assert info.value.kind == "validation" and "players" in info.value.errors

    with pytest.raises(ArenaError) as info:
        b.join(game.id, 0)
    assert info.value.kind == "seat-taken"

    # the same key with another body is refused, not applied
    key = "k-" + game.id
    actor.act(game.id, view.legal_actions[0], version=view.version, idempotency_key=key)
    with pytest.raises(ArenaError) as info:
        actor.act(game.id, view.legal_actions[-1], idempotency_key=key)
    assert info.value.kind in ("idempotency-key-reused", "not-your-turn")


# --- THE dropped connection ---------------------------------------------------------------


def test_a_dropped_answer_is_retried_with_the_same_key_and_applied_once(
    live_url: str, proxy
) -> None:
    a, b, game = two_bots(live_url)
    actor, view = in_turn(a, b, game.id)
    through = ArenaClient(proxy.url, token=actor.token,
                          retry=RetryPolicy(backoff=0.05))
    before = actor.record(game.id)

    proxy.drop_next_action.set()
    answer = through.act(game.id, view.legal_actions[0], version=view.version)

    # the first answer was lost after the service acted; the retry got the same answer
    assert proxy.dropped == 1
    heads = proxy.action_heads()
    assert len(heads) == 2, heads
    keys = [_header(h, "Idempotency-Key") for h in heads]
    assert keys[0] and keys[0] == keys[1]
    # applied exactly once: one more action in the record, one version step
    after = actor.record(game.id)
    assert after.actions == [*before.actions, view.legal_actions[0]]
    now = actor.game(game.id)
    assert answer.version == view.version + 1 == now.version - (now.version - answer.version)
    assert a.game(game.id).version == answer.version
    assert answer.raw["ply"] == view.raw["ply"] + 1

    # and the game goes on normally through the proxy afterwards
    nxt_client, nxt = in_turn(a, b, game.id)
    via = ArenaClient(proxy.url, token=nxt_client.token)
    assert via.act(game.id, nxt.legal_actions[0], version=nxt.version).version == nxt.version + 1


def test_without_the_key_a_dropped_answer_would_be_a_conflict_not_a_repeat(
    live_url: str, proxy
) -> None:
    """The control: a naive retry (new key, same version) is refused by the version check;
    our client's retry is answered as the first try was. Either way nothing applies twice,
    but only the key gives the bot its answer back."""
    a, b, game = two_bots(live_url)
    actor, view = in_turn(a, b, game.id)
    through = ArenaClient(proxy.url, token=actor.token, retry=RetryPolicy(attempts=1))
    proxy.drop_next_action.set()
    with pytest.raises(ArenaError) as info:
        through.act(game.id, view.legal_actions[0], version=view.version)
    assert info.value.type == NETWORK_PROBLEM and info.value.status == 0
    with pytest.raises(ArenaError) as info:
        actor.act(game.id, view.legal_actions[0], version=view.version)
    assert info.value.kind in ("version-conflict", "not-your-turn")
    key = _header(proxy.action_heads()[0], "Idempotency-Key")
    replay = actor.act(game.id, view.legal_actions[0], version=view.version,
                       idempotency_key=key)
    assert replay.version == view.version + 1
    assert len(actor.record(game.id).actions) == view.raw["ply"] + 1


def _header(head: str, name: str) -> str | None:
    for line in head.split("\r\n")[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == name.lower():
            return v.strip()
    return None


# --- the retry policy, against a scripted server -------------------------------------------


class Script:
    """A local HTTP server answering from a script of (status, headers, body, delay)."""

    def __init__(self, answers: list[tuple[int, dict[str, str], Any, float]]) -> None:
        self.answers = list(answers)
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        script = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                script.seen.append((self.command, self.path, dict(self.headers)))
                status, headers, body, delay = script.answers.pop(0)
                time.sleep(delay)
                data = json.dumps(body).encode()
                self.send_response(status)
                ctype = "application/problem+json" if status >= 400 else "application/json"
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                with contextlib.suppress(OSError):
                    self.wfile.write(data)

            do_GET = do_POST = _any

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        CONTRACT.fake(self.url)  # it answers what each test needs, not the contract

    def close(self) -> None:
        CONTRACT.real(self.url)
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def script() -> Iterator[Any]:
    made: list[Script] = []

    def make(*answers: tuple[int, dict[str, str], Any, float]) -> Script:
        made.append(Script(list(answers)))
        return made[-1]

    yield make
    for s in made:
        s.close()


OK_HEALTH = (200, {}, {"status": "ok"}, 0.0)


def problem(status: int, kind: str) -> dict[str, Any]:
    return {"type": f"/problems/{kind}", "title": kind, "status": status}


def recording_client(url: str, **kw: Any) -> tuple[ArenaClient, list[float]]:
    pauses: list[float] = []
    return ArenaClient(url, sleep=pauses.append, **kw), pauses


def sleeping_client(url: str, **kw: Any) -> tuple[ArenaClient, list[float]]:
    """A client whose pauses are slept in full and recorded: a test asserts which pauses
    were taken, not how long the machine took to send its calls."""
    pauses: list[float] = []

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        time.sleep(seconds)

    return ArenaClient(url, sleep=sleep, **kw), pauses


def test_429_is_retried_after_retry_after(script) -> None:
    s = script((429, {"Retry-After": "3"}, problem(429, "rate-limited"), 0.0), OK_HEALTH)
    client, pauses = recording_client(s.url)
    assert client.healthz().status == "ok"
    assert len(s.seen) == 2 and 3.0 in pauses


def test_503_is_retried_after_retry_after_and_the_wait_is_real(script) -> None:
    """The pause is the service's Retry-After, and a client's pauses are real sleeps
    unless it is given another way to pause (asked of the client, not of a clock)."""
    s = script((503, {"Retry-After": "1"}, problem(503, "service-unavailable"), 0.0),
               OK_HEALTH)
    client, pauses = recording_client(s.url)
    assert client.readyz().status == "ok"
    assert pauses == [1.0] and len(s.seen) == 2
    assert inspect.signature(ArenaClient).parameters["sleep"].default is time.sleep


def test_an_action_keeps_its_idempotency_key_on_every_retry(script) -> None:
    view = _view_body()
    s = script((503, {}, problem(503, "service-unavailable"), 0.0),
               (429, {"Retry-After": "0"}, problem(429, "rate-limited"), 0.0),
               (200, {}, view, 0.0),
               (200, {}, view, 0.0))
    client, pauses = recording_client(s.url, token="t")
    client.act("a" * 12, "AS", version=3)
    client.act("a" * 12, "AS", version=3)
    keys = [h["Idempotency-Key"] for _, _, h in s.seen]
    assert len(keys) == 4 and keys[0] == keys[1] == keys[2] != keys[3]
    assert all(h["Authorization"] == "Bearer t" for _, _, h in s.seen)
    assert len(pauses) == 2 and pauses[1] == 0.0


@pytest.mark.parametrize("status,kind", [(400, "bad-request"), (404, "not-found"),
                                         (409, "not-your-turn"), (422, "validation"),
                                         (500, "internal")])
def test_other_errors_are_never_retried(script, status: int, kind: str) -> None:
    s = script((status, {}, problem(status, kind), 0.0), OK_HEALTH)
    client, pauses = recording_client(s.url, token="t")
    with pytest.raises(ArenaError) as info:
        client.act("a" * 12, "AS")
    assert (info.value.status, info.value.kind) == (status, kind)
    assert len(s.seen) == 1 and pauses == []


def test_retries_give_up_with_the_last_problem(script) -> None:
    s = script(*[(503, {"Retry-After": "0"}, problem(503, "service-unavailable"), 0.0)] * 3)
    client, _pauses = recording_client(s.url, retry=RetryPolicy(attempts=3))
    with pytest.raises(ArenaError) as info:
        client.healthz()
    assert info.value.status == 503 and info.value.retry_after == 0.0 and len(s.seen) == 3


def test_a_429_holds_back_the_next_call_to_that_endpoint(script) -> None:
    s = script((429, {"Retry-After": "0.3"}, problem(429, "rate-limited"), 0.0), OK_HEALTH,
               OK_HEALTH)
    client, pauses = sleeping_client(s.url)
    client.healthz()
    assert pauses == [0.3]  # the retry's, slept in full
    client.healthz()  # the hold is over by now: no extra wait
    assert pauses == [0.3]


def test_read_timeouts_are_retried_only_where_a_repeat_is_safe(script) -> None:
    view = _view_body()
    slow = (200, {}, view, 1.0)
    s = script(slow, (200, {}, view, 0.0))
    client, pauses = recording_client(s.url, token="t", timeout=0.3)
    client.act("a" * 12, "AS")  # the action timed out, then was retried with its key
    assert len(s.seen) == 2 and len(pauses) == 1
    s2 = script((201, {}, {}, 1.0), (201, {}, {}, 0.0))
    client2, _ = recording_client(s2.url, token="t", timeout=0.3)
    with pytest.raises(ArenaError) as info:
        client2.create_game(2)  # no key: the game may exist already, so no blind repeat
    assert info.value.type == NETWORK_PROBLEM and len(s2.seen) == 1


def test_a_refused_connection_is_retried_even_for_unsafe_calls() -> None:
    port = free_port()
    client, pauses = recording_client(f"http://127.0.0.1:{port}", token="t",
                                      retry=RetryPolicy(attempts=3))
    with pytest.raises(ArenaError) as info:
        client.create_game(2)
    assert info.value.type == NETWORK_PROBLEM and len(pauses) == 2
    assert isinstance(info.value.__cause__, Exception)


def _view_body() -> dict[str, Any]:
    return {"id": "a" * 12, "version": 4, "status": "active", "players": 2, "seat": 0,
            "team": 0, "your_turn": False, "legal_actions": [], "phase": "play", "turn": 1,
            "scores": [0, 0], "winner": None, "hand": ["2C"]}


def test_act_with_wait_plays_a_whole_game_one_request_per_move(live_url: str) -> None:
    """Two bots play out a game against the live service with ``act(..., wait=...)``
    only: each answer is the actor's view on its next turn (or the end)."""
    a, b = ArenaClient(live_url), ArenaClient(live_url)
    alice = a.register("alice-w")
    bob = b.register("bob-w", owner=alice.token)  # one owner's bots: seated at once
    game = a.create_game(2, seats=[alice.id, bob.id], seed=21, variants={"target": 3})
    rng = random.Random(9)
    views = {c: c.wait_turn(game.id, timeout=0).view for c in (a, b)}
    results: list[Any] = []

    def play(c: ArenaClient) -> None:
        view = views[c]
        while not view.finished:
            if not view.your_turn:
                view = c.wait_turn(game.id, timeout=10).view
                continue
            view = c.act(game.id, rng.choice(view.legal_actions), version=view.version,
                         wait=10)
        results.append(view)

    threads = [threading.Thread(target=play, args=(c,)) for c in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    done = all(v.finished for v in results) and len(results) == 2
    assert done and results[0].winner is not None
    assert len(a.record(game.id).actions) == results[0].version - 1  # created at 1


# --- pacing by the RateLimit fields -------------------------------------------


def fields(left: int, reset: int) -> dict[str, str]:
    return {"RateLimit-Policy": '"default";q=2;w=5', "RateLimit": f'"default";r={left};t={reset}'}


def test_a_spent_budget_is_waited_out_before_the_next_request(script) -> None:
    s = script((200, fields(1, 2), {"status": "ok"}, 0.0),
               (200, fields(0, 2), {"status": "ok"}, 0.0), OK_HEALTH, OK_HEALTH)
    client, pauses = recording_client(s.url)
    client.healthz()
    client.healthz()
    assert pauses == [] and client.budget[0] == 0
    client.healthz()  # nothing left: wait for the window, then send
    assert len(pauses) == 1 and 1.5 < pauses[0] <= 2.0
    assert len(s.seen) == 3
    client.healthz()  # a new window, as yet unannounced: no wait
    assert len(pauses) == 1


def test_a_429_holds_back_every_call_until_retry_after(script) -> None:
    s = script((429, {"Retry-After": "0.4"}, problem(429, "rate-limited"), 0.0), OK_HEALTH,
               OK_HEALTH)
    client, pauses = sleeping_client(s.url)
    client.healthz()  # retried after 0.4 s
    assert pauses == [0.4] and client.rate_limited == 1
    client.readyz()  # another endpoint, after the hold: at once
    assert pauses == [0.4]
