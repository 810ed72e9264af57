"""Many threads acting on one game at once: each version accepts exactly one action, and
the game ends in the state a replay of the accepted actions gives."""

from __future__ import annotations

import random
import threading

from service.engine import parse_action, replay


def _race(app, game_id, token, bodies):
    out: list = [None] * len(bodies)
    barrier = threading.Barrier(len(bodies))

    def go(i):
        c = app.test_client()
        barrier.wait()
        r = c.post(f"/games/{game_id}/actions", json=bodies[i],
                   headers={"Authorization": f"Bearer {token}"})
        out[i] = (r.status_code, r.get_json(force=True), bodies[i]["action"])

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_one_action_per_version_under_contention(app, api):
    rng = random.Random(5)
    game_id, tokens = api.table(4, 55)
    accepted: list[str] = []
    for _ in range(40):
        v = api.view(game_id).json
        if v["status"] == "finished":
            break
        mine = api.view(game_id, tokens[v["turn"]]).json
        bodies = [{"action": rng.choice(mine["legal_actions"]), "version": v["version"]}
                  for _ in range(8)]
        results = _race(app, game_id, tokens[v["turn"]], bodies)
        wins = [r for r in results if r[0] == 200]
        assert len(wins) == 1, results
        losers = {(r[0], r[1]["type"]) for r in results if r[0] != 200}
        assert losers <= {(409, "/problems/version-conflict")}
        assert wins[0][1]["version"] == v["version"] + 1
        accepted.append(wins[0][2])
    expected, _ = replay(4, 55, None, [parse_action(a) for a in accepted])
    assert app.extensions["arena"].store.get_game(game_id).state == expected


def test_unversioned_races_lose_nothing(app, api):
    """Without a version each request is re-validated against the position it meets:
    some apply (each once), the rest are refused; the log is exactly the accepted ones."""
    rng = random.Random(6)
    game_id, tokens = api.table(2, 66)
    accepted: list[tuple[int, str]] = []
    for _ in range(30):
        v = api.view(game_id).json
        if v["status"] == "finished":
            break
        mine = api.view(game_id, tokens[v["turn"]]).json
        bodies = [{"action": rng.choice(mine["legal_actions"])} for _ in range(6)]
        for status, body, action in _race(app, game_id, tokens[v["turn"]], bodies):
            if status == 200:
                accepted.append((body["version"], action))
            else:
                assert status in (409, 422), body
    accepted.sort()
    versions = [ver for ver, _ in accepted]
    assert len(set(versions)) == len(versions)
    game = app.extensions["arena"].store.get_game(game_id)
    assert game.actions == [parse_action(a) for _, a in accepted]
    expected, _ = replay(2, 66, None, [parse_action(a) for _, a in accepted])
    assert game.state == expected
