"""A game's event feed (``service.arena.games.fanout.Feed``) takes each move from the
message its commit publishes (the state after it) without reading Redis, and makes the
very events a replay of the action log makes: ids, order, content and each audience's
redaction (R7: a spectator sees no hidden card). A message it cannot take a move from (a
version skipped, a change without a state, a reset) is left to the read it falls back to.
Real Redis, the Flask test client."""

from __future__ import annotations

import random
from typing import Any

from service import jsonio
from service.arena.games.fanout import Feed
from service.storage.wakeups import GameMessage


def message(game: Any) -> GameMessage:
    """The message an action's commit publishes for ``game`` (as read now)."""
    turn = game.state.turn if game.status == "active" else None
    return GameMessage(game.version, turn, game.status, game.deadline, game.state_json,
                       game.updated)


def play_one(api: Any, game_id: str, tokens: list[str], rng: random.Random) -> bool:
    """One random legal action by the seat in turn; False once the game is over."""
    spectator = api.view(game_id).json
    if spectator["status"] == "finished":
        return False
    seat = spectator["turn"]
    view = api.view(game_id, tokens[seat]).json
    r = api.act(game_id, tokens[seat], rng.choice(view["legal_actions"]),
                version=view["version"])
    assert r.status_code == 200, r.json
    return True


def test_every_move_comes_from_its_message_with_the_events_a_replay_makes(app, api,
                                                                          monkeypatch):
    arena = app.extensions["arena"]
    game_id, tokens = api.table(2, seed=11)
    feed = Feed(arena, arena.get(game_id))
    feed._advance()  # the one read: the game as it starts
    reads: list[Any] = []
    real = arena.store.r.hmget
    monkeypatch.setattr(arena.store.r, "hmget", lambda *a: reads.append(a) or real(*a))
    rng = random.Random(11)
    moves = 0
    while play_one(api, game_id, tokens, rng):
        moves += 1
        game = arena.get(game_id)
        if game.status == "finished":  # the ending: its reason is read with the log
            assert not feed._from_messages([message(game)], None)
            assert reads == []
            feed._advance()
            assert len(reads) == 1
        else:
            assert feed._from_messages([message(game)], None)
    assert moves > 20 and feed.over
    assert len(reads) == 1  # no read for any move but the last

    fresh = Feed(arena, arena.get(game_id))
    fresh._advance()  # the whole log, replayed
    assert feed.keys == fresh.keys
    assert feed.events == fresh.events
    assert feed.events[-1][2]["type"] == "game_over"
    for audience in (None, 0, 1):  # spectators, each seat: the same bytes as a replay's
        assert feed.chunk(audience, 0, len(feed.events)) == fresh.chunk(audience, 0,
                                                                         len(fresh.events))
    deals = [e for _, _, e in feed.events if e["type"] in ("deal", "run_deal")]
    assert deals
    spectators = feed.chunk(None, 0, len(feed.events)).decode()
    assert '"cards":[null' in spectators.replace(" ", "")  # R7: hidden from spectators


def test_a_message_it_cannot_take_a_move_from_is_left_to_a_read(app, api):
    arena = app.extensions["arena"]
    game_id, tokens = api.table(2, seed=12)
    feed = Feed(arena, arena.get(game_id))
    feed._advance()
    start = list(feed.events)
    rng = random.Random(12)
    play_one(api, game_id, tokens, rng)
    one = arena.get(game_id)
    play_one(api, game_id, tokens, rng)
    two = arena.get(game_id)

    assert not feed._from_messages([message(two)], None)  # a version skipped
    assert not feed._from_messages([None], None)  # a reset: something may be missed
    stateless = message(one)._replace(state_json=None, status=None)
    assert not feed._from_messages([stateless], None)  # a change without its state
    assert not feed._from_messages([message(one)._replace(state_json=two.state_json)],
                                   None)  # a state two actions on
    forged = jsonio.loads(one.state_json)
    forged["scores"] = [9, 9]
    wrong = message(one)._replace(state_json=jsonio.dumps(forged))
    assert not feed._from_messages([wrong], None)  # no legal action gives that state
    assert not feed._from_messages([message(one)._replace(state_json="{")], None)
    assert feed.events == start and feed.version == one.version - 1  # nothing taken

    assert feed._from_messages([message(two), message(one)], None)  # both, in order
    fresh = Feed(arena, arena.get(game_id))
    fresh._advance()
    assert feed.events == fresh.events and feed.version == two.version
