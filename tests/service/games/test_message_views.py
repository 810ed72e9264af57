"""A waiter answers from the game-channel message (no Redis read): the view it renders
from the message must be byte for byte the view rendered from the game read from Redis."""

from __future__ import annotations

import random
import time

import pytest

from service.arena.games.waiting import game_from_message
from service.jsonio import dumps
from service.storage.wakeups import game_message


def _messages(pubsub, want: int) -> list[bytes]:
    out: list[bytes] = []
    deadline = time.monotonic() + 5
    while len(out) < want and time.monotonic() < deadline:
        m = pubsub.get_message(timeout=0.2)
        if m is not None and m["type"] in ("message", "smessage"):
            out.append(m["data"])
    return out


@pytest.mark.parametrize("players,move_limit", [(2, None), (4, None), (4, 30)])
def test_view_from_message_is_the_view_from_redis(app, api, players, move_limit, monkeypatch):
    arena = app.extensions["arena"]
    store = arena.store
    rng = random.Random(players * 100 + (move_limit or 0))
    bots = [api.bot(f"m{i}") for i in range(players)]
    extra = {"move_limit": move_limit} if move_limit else {}
    game = api.game(bots[0][1], players, seats=[b for b, _ in bots],
                    seed=rng.getrandbits(40), **extra)
    gid = game["id"]
    channel = store.game_channel(gid)
    if store.publish == "SPUBLISH":  # a cluster: the channel of the game's shard, on its node
        pubsub = store.r.get_node_from_key(channel).redis_connection.pubsub()
        pubsub.ssubscribe(channel)
    else:
        pubsub = store.r.pubsub()
        pubsub.subscribe(channel)
    _messages(pubsub, 0)
    pubsub.get_message(timeout=1)  # the subscribe confirmation
    meta = store.get_game(gid).meta
    compared = 0
    for _ in range(400):
        spectator = api.view(gid).json
        if spectator["status"] == "finished":
            break
        seat = spectator["turn"]
        mine = api.view(gid, bots[seat][1]).json
        r = api.act(gid, bots[seat][1], rng.choice(mine["legal_actions"]))
        assert r.status_code == 200, r.json
        (data,) = _messages(pubsub, 1)
        msg = game_message(data)
        assert msg is not None and msg.state_json is not None
        from_msg = game_from_message(gid, meta, msg)
        from_redis = store.get_game(gid)
        assert from_redis.version == msg.version
        now = time.time()
        monkeypatch.setattr(time, "time", lambda now=now: now)
        try:
            for viewer in [None, *(b for b, _ in bots)]:
                assert dumps(arena.view(from_msg, viewer, None)) == \
                    dumps(arena.view(from_redis, viewer, None))
        finally:
            monkeypatch.undo()
        compared += 1
    assert spectator["status"] == "finished" or compared >= 100
    pubsub.close()


def test_old_and_stateless_messages_parse():
    assert game_message(b"12:3") == (12, 3, None, None, None, None, None)
    assert game_message(b"12:") == (12, None, None, None, None, None, None)
    assert game_message(b"12") == (12, None, None, None, None, None, None)
    assert game_message(b"12:3:ab12") == (12, 3, None, None, None, None, "ab12")
    m = game_message(b'13:1::active:1700000000.500:1699999990.123456:{"a":":"}')
    # only the header is decoded: the state JSON stays as it came (bytes here)
    assert m == (13, 1, "active", 1700000000.5, b'{"a":":"}', 1699999990.123456, None)
    assert game_message(b"13:::finished::1.5:{}") == (13, None, "finished", None, b"{}", 1.5,
                                                      None)
    assert game_message('13:1:cd34:active::2:{"a":":"}') == \
        (13, 1, "active", None, '{"a":":"}', 2.0, "cd34")
    assert game_message(m) is m
    assert game_message(b"x:1") is None
    assert game_message(None) is None
    # a writer's older format, or a message cut short: unreadable, so the waiter re-reads
    # the game (always safe)
    assert game_message(b'13:1:active::1.5:{"a":":"}') is None
    assert game_message(b"13:1::active::1.5:") is None
