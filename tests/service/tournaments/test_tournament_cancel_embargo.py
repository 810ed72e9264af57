"""The fair-play invariant of a cancel: a shared deal whose other table never
plays must not stay in ``{p}embargoed`` (its finished game would stay hidden for good).
Deterministic: one table of a deal played to its end by an in-test loop, the other still
pending (``parallel`` 1) when the organizer cancels."""

from __future__ import annotations

import random
from typing import Any

from tests.service.conftest import ADMIN_TOKEN, settle
from tests.service.tournaments.test_tournaments import ADMIN, auth, register

FAST = {"target": 3}


def play_out(client: Any, gid: str, tokens: list[str], rng: random.Random) -> None:
    """Random legal moves by whichever seat is in turn until the game is over."""
    for _ in range(2000):
        for token in tokens:
            view = client.get(f"/games/{gid}", headers=auth(token)).json
            if view["status"] == "finished":
                settle(client)
                return
            if view["your_turn"]:
                r = client.post(f"/games/{gid}/actions", headers=auth(token),
                                json={"action": rng.choice(view["legal_actions"]),
                                      "version": view["version"]})
                assert r.status_code == 200, r.json
    raise AssertionError("the game did not finish")


def test_cancel_lifts_the_embargo_of_a_deal_whose_other_table_never_played(
        client: Any, redis_client: Any, keys: Any) -> None:
    bots = register(client, 4)
    r = client.post("/tournaments", headers=ADMIN,
                    json={"entrants": list(bots), "format": "round_robin", "variants": FAST,
                          "games_per_pairing": 2, "parallel": 1, "seed": 11})
    assert r.status_code == 201, r.json
    t = r.json
    tid = t["id"]
    # round 1: table 0 plays deals 0 and 1, then table 1 plays them: one game at a time
    first, _, other_table, _ = t["rounds"][0]["games"]
    assert first["deal"] == other_table["deal"] and first["status"] == "live"
    assert other_table["status"] == "pending"
    deal = f"{tid}:1:{first['deal']}"
    assert redis_client.sismember(f"{keys.tours_prefix}embargoed", deal)
    play_out(client, first["game_id"], [bots[b] for b in first["teams"]], random.Random(1))
    # finished, but its deal is still to be played at the other table: hidden
    assert client.get(f"/games/{first['game_id']}/record").status_code == 403
    now = client.get(f"/tournaments/{tid}").json["rounds"][0]["games"]
    assert now[0]["scores"] is None and now[1]["status"] == "live"  # the next one started

    r = client.post(f"/tournaments/{tid}/cancel",
                    headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert r.status_code == 200, r.json
    t = r.json
    assert t["status"] == "cancelled"
    done, voided, never, _ = t["rounds"][0]["games"]
    assert done["status"] == "done" and done["scores"] is not None and done["seed"] is not None
    assert voided["status"] == "void" and voided["game_id"] and voided["scores"] is None
    view = client.get(f"/games/{voided['game_id']}").json  # public: nothing is live
    assert view["status"] == "finished" and view["winner"] is None
    assert never["status"] == "void" and never["game_id"] is None and never["scores"] is None
    assert all(g["status"] == "void" for r in t["rounds"][1:] for g in r["games"])
    members = {m.decode() for m in redis_client.smembers(f"{keys.tours_prefix}embargoed")}
    assert not {m for m in members if m.startswith(f"{tid}:")}, members
    rec = client.get(f"/games/{first['game_id']}/record")
    assert rec.status_code == 200 and rec.json["complete"] is True
    listed = client.get("/games").json["items"]
    assert next(g for g in listed if g["id"] == first["game_id"])["scores"] is not None
    # its result counts (a game played to its end); nothing else does
    rows = client.get(f"/tournaments/{tid}/standings").json["items"]
    assert sum(row["played"] for row in rows) == 2
    assert not redis_client.sismember(f"{keys.tours_prefix}tours:running", tid)
    assert len(client.get("/leaderboard").json["items"]) == 2
