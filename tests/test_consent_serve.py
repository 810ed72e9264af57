"""The forced-seating attack (games naming a victim that never agreed), replayed against
``allfours serve`` with real bots.

A victim plays a tournament with the bundled runner (``clients.runner.BotRunner``, which
accepts no invitations by default) while an attacker creates 150 games naming it, half
of them ``[V, V]``, half ``[attacker, V]``, each with a 0.5 s move limit. Before consent
this disqualified the victim in 12 s. Now: every one of those games waits for the
victim's acceptance, the victim is seated in none, they are cancelled when their
invitations expire, and the victim's tournament result equals a control run's (the same
tournament, seed and strategies on a fresh service, without the attack).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import requests

from clients.api import ArenaClient
from clients.runner import BotRunner
from tests.test_serve import Serve, kill_leftovers, wait_for

EXPECTED_S = 25  # seconds, the whole module: the order workers take it in (tests/conftest.py)

ADMIN = "consent-admin"
SETTINGS = {"format": "round_robin", "games_per_pairing": 2, "parallel": 2, "seed": 23,
            "variants": {"target": 5}, "move_limit": 20}


def run_tournament(tmp_path: Path, attack: bool) -> dict[str, Any]:
    """A tournament of a victim and an honest bot (heuristic runners) on a fresh
    ``allfours serve``; with ``attack``, 150 games naming the victim meanwhile. Returns
    the victim's standings row and, with the attack, what became of the games."""
    service = Serve(tmp_path, tmp_path / f"data-{attack}", ARENA_HOUSE_BOTS="0",
                    ARENA_ADMIN_TOKEN=ADMIN, ARENA_RATE_LIMIT="0",
                    ARENA_INVITATION_TTL="3", ARENA_INVITATIONS_PER_BOT="200",
                    # the caps per inviter would refuse most of the attack
                    # before consent is tried; this replays consent alone
                    ARENA_INVITATIONS_PER_INVITER="0",
                    ARENA_INVITATIONS_PER_INVITER_NETWORK="0",
                    ARENA_DECLINES_BEFORE_WAIT="0")
    try:
        service.wait_healthy("/readyz")
        base = service.url("")
        victim, honest = ArenaClient(base), ArenaClient(base)
        v = victim.register("victim")
        h = honest.register("honest")
        runners = [BotRunner(c, "heuristic", max_games=2, poll_timeout=2, act_wait=2)
                   for c in (victim, honest)]
        threads = [threading.Thread(target=r.run, daemon=True) for r in runners]
        for t in threads:
            t.start()
        t = victim.create_tournament([v.id, h.id], admin_token=ADMIN, **SETTINGS)
        made: list[dict[str, Any]] = []
        if attack:
            s = requests.Session()
            x = s.post(base + "/bots", json={"name": "attacker"}, timeout=30).json()
            s.headers["Authorization"] = f"Bearer {x['token']}"
            for i in range(150):
                seats = [v.id, v.id] if i % 2 else [x["id"], v.id]
                r = s.post(base + "/games", timeout=30,
                           json={"players": 2, "seats": seats, "move_limit": 0.5})
                assert r.status_code == 201, r.text
                made.append(r.json())
        for th in threads:
            th.join(300)
        assert not any(th.is_alive() for th in threads), "the runners did not finish"
        standings = requests.get(f"{base}/tournaments/{t.id}/standings", timeout=30).json()
        row = next(r for r in standings["items"] if r["bot_id"] == v.id)
        out: dict[str, Any] = {"row": row, "victim": v.id}
        if attack:
            def all_cancelled() -> bool:
                games = [requests.get(f"{base}/games/{g['id']}", timeout=30).json()
                         for g in made]
                out["games"] = games
                return all(g["status"] == "finished" for g in games)

            wait_for(all_cancelled, 60, "the attack's games to be cancelled")
        return out
    finally:
        service.stop()
        kill_leftovers(service.seen)


def test_games_naming_a_victim_leave_its_tournament_result_as_the_control_runs(
        tmp_path: Path) -> None:
    control = run_tournament(tmp_path, attack=False)
    attacked = run_tournament(tmp_path, attack=True)
    keys = ("played", "won", "lost", "timeouts", "forfeits", "points_for", "points_against")
    assert {k: attacked["row"][k] for k in keys} == {k: control["row"][k] for k in keys}
    assert attacked["row"]["timeouts"] == 0 and attacked["row"]["forfeits"] == 0
    victim = attacked["victim"]
    for g in attacked["games"]:
        assert victim not in [s["bot_id"] for s in g["seats"]]
        assert g["winner"] is None and g["ply"] == 0  # never played
