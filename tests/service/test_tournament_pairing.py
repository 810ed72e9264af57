"""Issue 16, defects 2 and 3: byes are credited only for rounds played, and Swiss pairs
with as few rematches as possible (then the longest-ago ones) once a rematch is forced."""

from __future__ import annotations

import random
from typing import Any

from tests.service.test_tournaments import create, play_turns, register


def standings(client: Any, tid: str) -> dict[str, Any]:
    r = client.get(f"/tournaments/{tid}/standings")
    assert r.status_code == 200, r.json
    return r.json


# --- defect 2: a bye counts once its round is complete -----------------------------------------


def test_odd_round_robin_credits_no_bye_before_its_round_is_played(client):
    bots = register(client, 3)  # odd: one bye a round, each entrant's in a different round
    t = create(client, bots, format="round_robin", games_per_pairing=1, seed=3,
               variants={"target": 5})
    st = standings(client, t["id"])
    assert st["rounds_done"] == 0
    assert [(row["byes"], row["score"]) for row in st["items"]] == [(0, 0.0)] * 3
    byes = [r["byes"][0] for r in t["rounds"]]
    assert sorted(byes) == sorted(bots)  # each entrant sits out once, in its own round
    rng = random.Random(4)
    for _ in range(2000):  # play until round 1 is complete (round 2 then starts at once)
        st = standings(client, t["id"])
        if st["rounds_done"] >= 1:
            break
        assert play_turns(client, bots, rng) > 0
    assert st["rounds_done"] == 1
    got = {row["bot_id"]: row["byes"] for row in st["items"]}
    assert got == {b: int(b == byes[0]) for b in bots}  # round 1's bye only
    row = next(r for r in st["items"] if r["bot_id"] == byes[0])
    assert row["score"] == 1.0 and row["played"] == 0
