"""Idempotency-Key: its scope is (bot, game), and the retry memory lives with the game.

Remembered per bot only, the same key and body sent to a second game would answer with
the first game's view and apply nothing — a bot keying its moves ``move-<version>`` would
lose moves silently. Remembered one key per action for a day, the memory would fill Redis
in a long run; it is one hash per game holding each bot's latest keyed action, dropped a
grace period after the game ends.
"""

from __future__ import annotations

import random
import time
from typing import Any

import pytest
import redis

from service.http.app import create_app
from service.storage.embedded import EmbeddedRedis
from tests.conftest import REDIS_URL
from tests.contract import load_yaml
from tests.service.conftest import ADMIN_TOKEN, Api
from tests.service.games.test_retries_and_waiting import (
    PATIENCE_S,
    record_waits,
    stop_poll_clock,
)


def twin_games(api: Api, seed: int, **extra: Any) -> tuple[str, str, list[str]]:
    """Two 2-player games with the same seats and seed (so the same position at the same
    version); returns (first id, second id, token per seat)."""
    (a, ta), (b, tb) = api.bot("a"), api.bot("b")
    first = api.game(ta, 2, seats=[a, b], seed=seed, **extra)["id"]
    second = api.game(ta, 2, seats=[a, b], seed=seed, **extra)["id"]
    return first, second, [ta, tb]


def keyed_move(api: Api, game_id: str, tokens: list[str], rng: random.Random,
               key: str | None = None) -> tuple[Any, dict[str, Any]]:
    """The seat in turn plays a random legal action with ``Idempotency-Key: move-<version>``
    (or ``key``); returns (response, the request: token, action, version, headers)."""
    seat = api.view(game_id).json["turn"]
    mine = api.view(game_id, tokens[seat]).json
    sent = {"token": tokens[seat], "action": rng.choice(mine["legal_actions"]),
            "version": mine["version"],
            "headers": {"Idempotency-Key": key or f"move-{mine['version']}"}}
    return send(api, game_id, sent), sent


def send(api: Api, game_id: str, sent: dict[str, Any]) -> Any:
    """Send a request again (without ``version`` when it is None)."""
    body = {"version": sent["version"]} if sent["version"] is not None else {}
    return api.act(game_id, sent["token"], sent["action"], headers=sent["headers"], **body)


def version(api: Api, game_id: str) -> int:
    return api.view(game_id).json["version"]


# --- scope: (bot, game) -------------------------------------------------------------------


def test_the_same_key_and_body_in_another_game_is_another_request(api):
    first, second, tokens = twin_games(api, seed=8)
    start = version(api, first)
    one, sent = keyed_move(api, first, tokens, random.Random(1))
    assert one.status_code == 200 and one.json["id"] == first
    two = send(api, second, sent)  # same bot, same key, same body, other game
    assert two.status_code == 200, two.json
    assert two.json["id"] == second and two.json["version"] == start + 1
    assert two.headers["ETag"] == f'"{start + 1}"'
    assert version(api, second) == start + 1  # applied there, not answered from the first
    assert version(api, first) == start + 1
    # each game's retry answers its own first answer, byte for byte
    assert send(api, first, sent).get_data() == one.get_data()
    assert send(api, second, sent).get_data() == two.get_data()
    assert version(api, first) == version(api, second) == start + 1


def test_version_keyed_moves_in_two_games_at_once_lose_nothing(api):
    """A bot that keys its moves ``move-<version>`` plays two games move for move: every
    move applies in its own game (before the fix the second game's moves were answered
    from the first game's memory and never applied)."""
    first, second, tokens = twin_games(api, seed=5, variants={"target": 3})
    rng = {first: random.Random(3), second: random.Random(3)}
    moves = {first: 0, second: 0}
    for _ in range(400):
        live = [g for g in (first, second) if api.view(g).json["status"] != "finished"]
        if not live:
            break
        for game_id in live:
            before = version(api, game_id)
            r, _ = keyed_move(api, game_id, tokens, rng[game_id])
            assert r.status_code == 200, r.json
            assert r.json["id"] == game_id and r.json["version"] == before + 1
            assert version(api, game_id) == before + 1
            moves[game_id] += 1
    else:
        raise AssertionError("the games did not finish")
    assert moves[first] == moves[second] > 0


def test_the_same_key_with_another_version_or_if_match_is_refused(api):
    game_id, _, tokens = twin_games(api, seed=8)
    r, sent = keyed_move(api, game_id, tokens, random.Random(2), key="mine")
    assert r.status_code == 200
    now = version(api, game_id)
    for other in ({**sent, "version": sent["version"] + 1},
                  {**sent, "version": None,
                   "headers": {**sent["headers"], "If-Match": f'"{sent["version"]}"'}}):
        again = send(api, game_id, other)
        assert again.status_code == 422, again.json
        assert again.json["type"] == "/problems/idempotency-key-reused"
        assert version(api, game_id) == now  # nothing applied
    assert send(api, game_id, sent).status_code == 200  # the same request still replays
    assert version(api, game_id) == now


# --- memory kept with the game ------------------------------------------------------------


def game_keys(redis_client, prefix: str, game_id: str) -> dict[str, int]:
    """Every Redis key under ``prefix`` that names the game: name -> TTL (-1: none)."""
    return {k.decode(): redis_client.ttl(k)
            for k in redis_client.scan_iter(match=f"{prefix}*{game_id}*", count=1000)}


def test_retry_memory_is_one_hash_per_game_bounded_and_dropped_after_the_game(
    api, app, redis_client, key_prefix
):
    game_id, _, tokens = twin_games(api, seed=4, variants={"target": 3})
    rng = random.Random(9)
    grace = app.config.get("ARENA_RETRY_GRACE", 600)
    store = app.extensions["arena"].store
    memory, game_key = store.retry_key(game_id), store.game_key(game_id)
    moves = 0
    while api.view(game_id).json["status"] != "finished":
        r, _ = keyed_move(api, game_id, tokens, rng)
        assert r.status_code == 200, r.json
        moves += 1
        keys = game_keys(redis_client, key_prefix, game_id)
        assert set(keys) <= {game_key, memory}, keys
        assert redis_client.hlen(memory) <= 2  # one record per bot: its latest keyed move
        if r.json["status"] != "finished":  # kept as long as the live game is (its idle
            idle = app.config["ARENA_IDLE_GAME_TTL"]  # expiry, counted from each move)
            assert idle - 5 <= keys[memory] <= idle and keys[game_key] >= keys[memory]
    assert moves > 10
    assert not list(redis_client.scan_iter(match=f"{key_prefix}idem:*"))  # no per-action key
    # finished: the memory goes a grace period after the end, the (casual) game is kept
    # for its retention
    assert 0 < redis_client.ttl(memory) <= grace
    retention = app.config["ARENA_GAME_RETENTION"]
    assert grace < retention - 5 <= redis_client.ttl(game_key) <= retention


@pytest.fixture
def short_grace_api(key_prefix):
    app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                      "ARENA_RATE_LIMIT": 0, "ARENA_ADMIN_TOKEN": ADMIN_TOKEN,
                      "ARENA_RETRY_GRACE": 1, "TESTING": True})
    return Api(app.test_client())


def play_to_the_end(api: Api, game_id: str, tokens: list[str], rng: random.Random
                    ) -> list[tuple[Any, dict[str, Any]]]:
    moves = []
    while api.view(game_id).json["status"] != "finished":
        r, sent = keyed_move(api, game_id, tokens, rng)
        assert r.status_code == 200, r.json
        moves.append((r, sent))
    return moves


def test_retries_of_a_finished_game_during_and_after_the_grace(
    short_grace_api, redis_client, key_prefix
):
    api = short_grace_api
    game_id, _, tokens = twin_games(api, seed=6, variants={"target": 3})
    moves = play_to_the_end(api, game_id, tokens, random.Random(4))
    (last, last_sent), (_, earlier_sent) = moves[-1], next(
        m for m in reversed(moves) if m[1]["token"] != moves[-1][1]["token"])
    final = version(api, game_id)
    # during the grace: both bots' latest moves replay their first answers
    during = send(api, game_id, last_sent)
    assert during.get_data() == last.get_data() and _replays(during)
    # ... but only under their own key: the same last move under another key (a second
    # process of the same bot) is another request, refused, never told it applied
    other_key = {**last_sent, "headers": {"Idempotency-Key": "another-process"}}
    refused = send(api, game_id, other_key)
    assert refused.status_code == 409, refused.json
    assert version(api, game_id) == final
    memory = api.c.application.extensions["arena"].store.retry_key(game_id)
    deadline = time.monotonic() + 5
    while redis_client.exists(memory):
        assert time.monotonic() < deadline, "the retry memory outlived its grace"
        time.sleep(0.1)
    # after it: the game's last move is still answered as it was first answered ...
    again = send(api, game_id, last_sent)
    assert again.status_code == 200 and again.get_data() == last.get_data()
    assert again.headers["Idempotent-Replayed"] == "true"
    # ... and any other action meets a finished game: refused, nothing applied
    other = send(api, game_id, earlier_sent)
    assert other.status_code == 409, other.json
    assert other.json["type"] == "/problems/version-conflict"
    assert version(api, game_id) == final


# --- across a Redis restart, and a full Redis -------------------------------------------


@pytest.fixture
def embedded(tmp_path):
    """A private embedded server (as ``allfours serve`` runs it), restartable on its data."""
    servers: list[EmbeddedRedis] = []

    def start(port: int | None = None, **kw: Any) -> EmbeddedRedis:
        server = EmbeddedRedis(tmp_path / "data", port=port, **kw)
        servers.append(server)
        server.start()
        return server

    yield start
    for server in servers:
        server.stop()


def app_on(url: str) -> tuple[Any, Api]:
    app = create_app({"REDIS_URL": url, "ARENA_KEY_PREFIX": "t:", "ARENA_RATE_LIMIT": 0,
                      "TESTING": True})
    return app, Api(app.test_client())


def until_answered(call: Any, seconds: float = 10) -> Any:
    """A client's retries while the service reconnects: 503 + Retry-After, then an answer."""
    deadline = time.monotonic() + seconds
    while True:
        r = call()
        if r.status_code != 503:
            return r
        assert r.headers["Retry-After"] and time.monotonic() < deadline, r.json
        time.sleep(0.1)


def test_a_retry_gets_its_first_answer_across_a_redis_restart(embedded):
    server = embedded()
    app, api = app_on(server.url)
    try:
        game_id, _, tokens = twin_games(api, seed=8)
        first, sent = keyed_move(api, game_id, tokens, random.Random(1))
        assert first.status_code == 200
        port = server.port
        server.stop()  # SIGTERM: valkey flushes its append-only file
        embedded(port=port)
        again = until_answered(lambda: send(api, game_id, sent))
        assert again.status_code == 200 and again.get_data() == first.get_data()
        assert version(api, game_id) == first.json["version"]  # applied once
    finally:
        app.extensions["arena"].wakeups.close()


def test_the_embedded_server_never_evicts_and_a_full_one_answers_503(embedded):
    server = embedded()
    r = redis.Redis.from_url(server.url)
    assert r.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
    cap = r.config_get("maxmemory")["maxmemory"]
    assert int(cap) >= 64 << 20
    app, api = app_on(server.url)
    try:
        game_id, _, tokens = twin_games(api, seed=8)
        start, keys = version(api, game_id), r.dbsize()
        r.config_set("maxmemory", 1)  # full: every write is refused
        full, sent = keyed_move(api, game_id, tokens, random.Random(1))
        assert full.status_code == 503, full.json
        assert full.json["type"] == "/problems/service-unavailable"
        assert full.headers["Retry-After"]
        assert version(api, game_id) == start and r.dbsize() == keys  # reads go on; no eviction
        r.config_set("maxmemory", cap)
        assert send(api, game_id, sent).status_code == 200  # the bot's retry, once there is room
        assert version(api, game_id) == start + 1
    finally:
        app.extensions["arena"].wakeups.close()


def test_the_embedded_memory_cap_is_configurable(embedded, monkeypatch):
    monkeypatch.setenv("ARENA_REDIS_MAXMEMORY", "100mb")
    server = embedded()
    assert redis.Redis.from_url(server.url).config_get("maxmemory") == {
        "maxmemory": str(100 << 20)}


# --- the one text, and each of its promises -----------------------------------


def _words(text: str) -> str:
    """``text`` with its Markdown line breaks and indents as single spaces."""
    import re

    return re.sub(r"\s+", " ", text).strip()


def test_one_text_on_retries_in_openapi_and_bots_md():
    """The header's description, the act operation's and docs/bots.md's section say the
    same thing in the same words, so that they cannot come to disagree."""
    from pathlib import Path

    from service.http.games.routes import IDEMPOTENCY_TEXT

    root = Path(__file__).resolve().parents[3]
    text = _words(IDEMPOTENCY_TEXT)
    bots = (root / "docs" / "bots.md").read_text()
    start = bots.index("### Idempotency\n")
    section = bots[start:bots.index("\n#", start + 1)]
    assert text in _words(section)
    spec = load_yaml((root / "openapi.yaml").read_text())
    act = spec["paths"]["/games/{game_id}/actions"]["post"]
    params = [spec["components"]["parameters"][p["$ref"].rsplit("/", 1)[1]] if "$ref" in p
              else p for p in act["parameters"]]  # header parameters are components
    header = next(p for p in params if p["name"] == "Idempotency-Key")
    assert _words(header["description"]) == text
    assert text in _words(act["description"])
    assert "Idempotent-Replayed" in act["responses"]["200"]["headers"]


def _replays(r: Any) -> bool:
    return r.headers.get("Idempotent-Replayed") == "true"


def test_a_retry_without_wait_is_the_first_body_but_time_left_and_says_replayed(api):
    """With a move limit the first answer has a deadline: the retry's body is the same,
    ``deadline`` included, but ``time_left`` (counted again); the first answer says
    nothing of a replay, the retry says ``Idempotent-Replayed: true``; nothing applied."""
    (a, ta), (b, tb) = api.bot("a"), api.bot("b")
    game_id = api.game(ta, 2, seats=[a, b], seed=4, move_limit=20)["id"]
    tokens = [ta, tb]
    first, sent = keyed_move(api, game_id, tokens, random.Random(1))
    assert first.status_code == 200 and not _replays(first)
    assert first.json["deadline"] is not None
    time.sleep(0.05)
    again = send(api, game_id, sent)
    assert again.status_code == 200 and _replays(again)
    assert again.json == {**first.json, "time_left": again.json["time_left"]}
    assert again.json["time_left"] <= first.json["time_left"]
    assert version(api, game_id) == first.json["version"]


def _wait_send(api: Api, game_id: str, sent: dict[str, Any], wait: float) -> Any:
    return api.c.post(f"/games/{game_id}/actions", query_string={"wait": wait},
                      json={"action": sent["action"], "version": sent["version"]},
                      headers={**api.auth(sent["token"]), **sent["headers"]})


def test_a_retry_with_wait_waits_as_the_first_request_did(app, api, monkeypatch):
    """``?wait`` on a retry: nothing is applied again, and the answer is what a waiting
    action answers — when nobody moves within the wait, the view right after the action
    (the body a retry without ``?wait`` gets); the view at the bot's next turn when the
    other seat moves during the wait; at once when it is the bot's turn already."""
    import threading

    (a, ta), (b, tb) = api.bot("a"), api.bot("b")
    game_id = api.game(ta, 2, seats=[a, b], seed=9)["id"]
    tokens = [ta, tb]
    beggar = api.view(game_id).json["turn"]
    mine = api.view(game_id, tokens[beggar]).json
    assert mine["legal_actions"] == ["stand", "beg"]  # R8: the beggar decides first
    # the beggar begs: the dealer (the other seat) decides next
    sent = {"token": tokens[beggar], "action": "beg", "version": mine["version"],
            "headers": {"Idempotency-Key": "wait-1"}}
    first = _wait_send(api, game_id, sent, 0.3)  # nobody moves: waits its 0.3 s out
    assert first.status_code == 200 and not _replays(first)
    assert first.json["your_turn"] is False and first.json["version"] == sent["version"] + 1
    plain = send(api, game_id, sent)  # the retry without ?wait: the view after the action
    assert _replays(plain) and plain.get_data() == first.get_data()
    began = record_waits(monkeypatch)
    again = _wait_send(api, game_id, sent, 0.3)
    assert began and _replays(again)  # it waited (on the game), as the first did
    assert again.get_data() == first.get_data()
    # a retry waiting while the dealer gives one (R9): answered at the beggar's turn, woken
    # by the move (the wait's clock is stopped from here on: only a wake-up ends a wait)
    stop_poll_clock(monkeypatch)
    got: dict[str, Any] = {}

    def retry() -> None:
        r = _wait_send(Api(app.test_client()), game_id, sent, 20)
        got.update(status=r.status_code, view=r.json, replayed=_replays(r))

    th = threading.Thread(target=retry, daemon=True)
    th.start()
    time.sleep(0.3)
    assert not got  # still waiting
    assert api.act(game_id, tokens[1 - beggar], "give_one",
                   version=sent["version"] + 1).status_code == 200
    th.join(PATIENCE_S)
    assert not th.is_alive(), "the dealer's move did not wake the waiting retry"
    now = api.view(game_id, sent["token"]).json
    now.pop("callback_failure", None)  # the GET view's own field (webhook bots)
    assert now["your_turn"] is True and now["version"] == sent["version"] + 2
    assert got["status"] == 200 and got["replayed"]
    assert got["view"] == {**now, "time_left": got["view"]["time_left"]}
    # and now that it is the bot's turn, a retry answers at once with that turn's view:
    # without waiting at all (a retry that waited would never answer, where a slow one
    # still does)
    answered: dict[str, Any] = {}
    th = threading.Thread(daemon=True, target=lambda: answered.setdefault(
        "r", _wait_send(Api(app.test_client()), game_id, sent, 20)))
    th.start()
    th.join(PATIENCE_S)
    assert not th.is_alive(), "the retry waited, though it is the bot's turn"
    at_once = answered["r"]
    assert _replays(at_once)
    assert at_once.json == {**now, "time_left": at_once.json["time_left"]}
    assert version(api, game_id) == sent["version"] + 2  # two moves, none twice


def test_one_key_per_bot_and_game_whichever_seat_an_older_key_is_a_new_request(api):
    """A bot holding seats 1 and 3 keys seat 1's move, then seat 3's: only the latest is
    remembered. Its retry replays; the older key sent again is judged afresh, and its
    ``version`` refuses it (409 version-conflict): never applied twice."""
    x, tx = api.bot("x")
    y, ty = api.bot("y")
    game_id = api.game(ty, 4, seats=[y, x, y, x], seed=12)["id"]
    rng = random.Random(8)
    keyed: dict[int, tuple[Any, dict[str, Any]]] = {}
    while len(keyed) < 2:
        s = api.view(game_id).json
        assert s["status"] == "active"
        token = tx if s["turn"] % 2 else ty
        w = api.view(game_id, token, seat=s["turn"]).json
        sent = {"token": token, "action": rng.choice(w["legal_actions"]),
                "version": w["version"], "headers": {"Idempotency-Key": f"m-{w['version']}"}}
        body = {"version": w["version"], "seat": s["turn"]}
        r = api.act(game_id, token, sent["action"], headers=sent["headers"], **body)
        assert r.status_code == 200
        if token == tx and s["turn"] not in keyed:
            keyed[s["turn"]] = (r, {**sent, "seat": s["turn"]})
    (_, older_sent), (newer, newer_sent) = sorted(
        keyed.values(), key=lambda m: m[1]["version"])
    now = version(api, game_id)

    def resend(m: dict[str, Any]) -> Any:
        return api.act(game_id, tx, m["action"], headers=m["headers"], version=m["version"],
                       seat=m["seat"])

    r = resend(newer_sent)
    assert r.status_code == 200 and _replays(r) and r.get_data() == newer.get_data()
    r = resend(older_sent)
    assert r.status_code == 409 and r.json["type"] == "/problems/version-conflict"
    assert version(api, game_id) == now


def test_a_refused_action_is_not_remembered(api):
    """A key first sent with a refused action (409) is free: the same key with the right
    action applies it, as a first request (no ``Idempotent-Replayed``)."""
    game_id, _, tokens = twin_games(api, seed=3)
    seat = api.view(game_id).json["turn"]
    mine = api.view(game_id, tokens[seat]).json
    key = {"Idempotency-Key": "k"}
    stale = api.act(game_id, tokens[seat], mine["legal_actions"][0], headers=key,
                    version=mine["version"] + 1)
    assert stale.status_code == 409
    r = api.act(game_id, tokens[seat], mine["legal_actions"][0], headers=key,
                version=mine["version"])
    assert r.status_code == 200 and not _replays(r)
    assert version(api, game_id) == mine["version"] + 1
