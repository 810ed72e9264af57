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
