"""Whole games through HTTP only, bots choosing from legal_actions."""

from __future__ import annotations

import random

import pytest

from service.engine import build_record, parse_action


@pytest.mark.parametrize("players,seed", [(2, 1), (4, 2), (4, 3)])
def test_full_game_over_http(api, players, seed):
    game_id, tokens = api.table(players, seed)
    played = api.play_out(game_id, tokens, random.Random(seed))
    final = api.view(game_id).json
    assert final["status"] == "finished" and final["phase"] == "over"
    expected = build_record(players, seed, None, [parse_action(a) for a in played])
    assert final["scores"] == expected["scores"]
    assert final["winner"] == expected["winner"]
    record = api.c.get(f"/games/{game_id}/record").json
    assert record["complete"] is True
    assert record["actions"] == played
    assert record["seed"] == seed


def test_every_version_says_when_it_was_made(api):
    """``updated_at``: the commit time of the version a view shows — set on create, join
    and every action, the same in the action's answer, a later read and a retry's answer,
    and later for every later version."""
    import time

    bots = [api.bot(f"u{i}") for i in range(2)]
    before = time.time()
    game = api.game(bots[0][1], 2, seats=[bots[0][0], None], seed=8)
    assert before <= game["updated_at"] <= time.time()
    gid = game["id"]
    joined = api.c.post(f"/games/{gid}/seats/1", headers=api.auth(bots[1][1])).json
    assert joined["version"] == 2 and joined["updated_at"] > game["updated_at"]
    last = joined["updated_at"]
    for _ in range(6):
        spectator = api.view(gid).json
        assert spectator["updated_at"] == last
        token = bots[spectator["turn"]][1]
        legal = api.view(gid, token).json["legal_actions"]
        key = {"Idempotency-Key": f"k{spectator['version']}"}
        before = time.time()
        answer = api.act(gid, token, legal[0], headers=key).json
        assert before <= answer["updated_at"] <= time.time()
        assert answer["updated_at"] > last
        assert api.view(gid, token).json["updated_at"] == answer["updated_at"]
        again = api.act(gid, token, legal[0], headers=key).json
        assert again["updated_at"] == answer["updated_at"]
        last = answer["updated_at"]
