"""``GET /tournaments/{id}/export`` and ``/export.csv`` (its
own operation, so a generated client reads it as text): the results as JSON and as CSV
tables from the API, matching the detail and the standings field by field, and keeping
the duplicate-deal embargo exactly as the detail does."""

from __future__ import annotations

import csv
import io
import random
from typing import Any

from tests.service.tournaments.test_tournaments import (
    all_games,
    create,
    play_game_at_random,
    register,
    run_to_end,
)


def rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def cell(value: Any) -> str:
    return "" if value is None else str(value)


def test_a_finished_tournaments_export_matches_its_detail_and_standings(client):
    bots = register(client, 5)  # odd: a bye each round; duplicate deals
    t = create(client, bots, format="round_robin", games_per_pairing=2, seed=7)
    t = run_to_end(client, t["id"], bots)
    st = client.get(f"/tournaments/{t['id']}/standings").json
    r = client.get(f"/tournaments/{t['id']}/export")
    assert r.status_code == 200 and r.mimetype == "application/json"
    ex = r.json
    for k in ("id", "name", "status", "created", "finished", "settings", "entrants",
              "warnings", "progress"):
        assert ex[k] == t[k], k
    assert ex["settings"]["seed"] == 7
    assert ex["standings"] == st["items"] and ex["history"] == st["history"]
    games = [{"round": rnd["round"], **g, "record": f"/games/{g['game_id']}/record"}
             for rnd in t["rounds"] for g in rnd["games"]]
    assert ex["games"] == games and len(games) == 20
    assert [g["slot"] for g in ex["games"]] == list(range(20))
    assert all(g["seed"] is not None and g["rating"] for g in ex["games"])
    assert ex["byes"] == [{"round": rnd["round"], "bot_id": b}
                          for rnd in t["rounds"] for b in rnd["byes"]]
    assert len(ex["byes"]) == 5
    rec = client.get(ex["games"][0]["record"]).json  # the link leads to the record
    assert rec["complete"] and rec["seed"] == ex["games"][0]["seed"]

    # CSV: one row per entrant, per game, per entrant and round, equal to the JSON
    r = client.get(f"/tournaments/{t['id']}/export.csv")  # default: standings
    assert r.status_code == 200 and r.mimetype == "text/csv"
    assert r.headers["Content-Disposition"] == \
        f'attachment; filename="tournament-{t["id"]}-standings.csv"'
    table = rows(r.get_data(as_text=True))
    assert len(table) == 5
    for row, want in zip(table, st["items"], strict=True):
        for k in ("rank", "bot_id", "bot_name", "score", "matchpoints", "played", "won",
                  "points_for", "points_against", "timeouts", "byes"):
            assert row[k] == cell(want[k]), k
        assert float(row["ordinal"]) == want["rating"]["ordinal"]
    table = rows(client.get(f"/tournaments/{t['id']}/export.csv?table=games").text)
    assert len(table) == 20
    for row, g in zip(table, ex["games"], strict=True):
        assert [row["teams_0"], row["teams_1"]] == g["teams"]
        assert [int(row["scores_0"]), int(row["scores_1"])] == g["scores"]
        assert int(row["seed"]) == g["seed"] and row["winner"] == g["winner"]
        assert int(row["recorded"]) == g["recorded"] and row["record"] == g["record"]
        assert float(row["mu_after_1"]) == g["rating"][1]["after"]["mu"]
    table = rows(client.get(f"/tournaments/{t['id']}/export.csv?table=ratings").text)
    assert len(table) == 5 * len(st["history"])
    last = {row["bot_id"]: row for row in table if row["round"] == str(len(st["history"]))}
    for want in st["items"]:
        assert float(last[want["bot_id"]]["mu"]) == want["rating"]["mu"]
    # the old way, kept: ?format=csv, or an Accept that prefers text/csv without format,
    # is redirected (307) to the same table of /export.csv
    for query, headers in (("format=csv&table=games", {}),
                           ("table=games", {"Accept": "text/csv, application/json;q=0.5"})):
        r = client.get(f"/tournaments/{t['id']}/export?{query}", headers=headers)
        assert r.status_code == 307, query
        assert r.headers["Location"] == f"/tournaments/{t['id']}/export.csv?table=games"
        r = client.get(f"/tournaments/{t['id']}/export?{query}", headers=headers,
                       follow_redirects=True)
        assert r.mimetype == "text/csv" and len(rows(r.text)) == 20


def test_a_live_duplicate_tournaments_export_keeps_the_embargo(client):
    """One table of a shared deal has finished, the other has not moved: the export, JSON
    and CSV, shows neither's seed nor result, like the detail."""
    bots = register(client, 4)
    t = create(client, bots, format="swiss", rounds=1, games_per_pairing=1, seed=4,
               variants={"target": 3})
    one, two = all_games(t)
    assert one["deal"] == two["deal"]
    play_game_at_random(client, bots, one["game_id"], random.Random(2))
    detail = client.get(f"/tournaments/{t['id']}").json
    ex = client.get(f"/tournaments/{t['id']}/export").json
    assert ex["games"] == [{"round": 1, **g, "record": f"/games/{g['game_id']}/record"}
                           for g in all_games(detail)]
    for g in ex["games"]:
        assert g["status"] == "live" and g["seed"] is None and g["scores"] is None
        assert g["winner"] is None and g["rating"] is None and g["recorded"] is None
    assert "seed" not in ex["settings"] and ex["history"] == []
    assert all(row["played"] == 0 for row in ex["standings"])
    table = rows(client.get(f"/tournaments/{t['id']}/export.csv?table=games").text)
    assert len(table) == 2
    for row in table:
        assert row["seed"] == row["winner"] == row["scores_0"] == row["recorded"] == ""
    assert client.get(ex["games"][0]["record"]).status_code == 403  # embargoed


def test_export_of_an_unknown_tournament_is_404_and_bad_queries_422(client):
    r = client.get("/tournaments/0123456789ab/export")
    assert r.status_code == 404 and r.json["type"] == "/problems/not-found"
    r = client.get("/tournaments/0123456789ab/export.csv")
    assert r.status_code == 404 and r.json["type"] == "/problems/not-found"
    r = client.get("/tournaments/0123456789ab/export?format=csv", follow_redirects=True)
    assert r.status_code == 404
    t = create(client, register(client, 2), format="round_robin")
    # a table chosen with json is ignored (the contract cannot tie one parameter to another)
    as_json = client.get(f"/tournaments/{t['id']}/export?format=json&table=games")
    assert as_json.status_code == 200 and as_json.mimetype == "application/json"
    for q in ("format=xml", "format=csv&table=hands", "x=1"):
        r = client.get(f"/tournaments/{t['id']}/export?{q}")
        assert r.status_code == 422 and r.json["type"] == "/problems/validation", q
    for q in ("table=hands", "format=csv", "x=1"):
        r = client.get(f"/tournaments/{t['id']}/export.csv?{q}")
        assert r.status_code == 422 and r.json["type"] == "/problems/validation", q
    r = client.get(f"/tournaments/{t['id']}/export", headers={"Accept": "text/plain"})
    assert r.status_code == 406
    r = client.get(f"/tournaments/{t['id']}/export.csv", headers={"Accept": "text/plain"})
    assert r.status_code == 406
