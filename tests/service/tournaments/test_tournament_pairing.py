"""Byes are credited only for rounds played, and Swiss pairs
with as few rematches as possible (then the longest-ago ones) once a rematch is forced."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from typing import Any

from service.arena.tournaments.pairing import swiss_pairs
from tests.service.conftest import settle
from tests.service.tournaments.test_tournaments import create, play_turns, register, run_to_end


def standings(client: Any, tid: str) -> dict[str, Any]:
    r = client.get(f"/tournaments/{tid}/standings")
    assert r.status_code == 200, r.json
    return r.json


# --- a bye counts once its round is complete -----------------------------------------


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
        if not play_turns(client, bots, rng):
            settle(client)  # the round closes in the after-finish loop
    assert st["rounds_done"] == 1
    got = {row["bot_id"]: row["byes"] for row in st["items"]}
    assert got == {b: int(b == byes[0]) for b in bots}  # round 1's bye only
    row = next(r for r in st["items"] if r["bot_id"] == byes[0])
    assert row["score"] == 1.0 and row["played"] == 0


# --- Swiss with forced rematches ------------------------------------------------------


def simulate_swiss(n: int, rounds: int, seed: int) -> list[tuple[list[tuple[str, str]], list[str]]]:
    """A Swiss of ``n`` entrants over ``rounds`` rounds, paired by ``swiss_pairs`` as the
    service pairs it (standings by match score, then a random tiebreak; every pair's
    meeting rounds), each pairing's winner drawn at random."""
    rng = random.Random(seed)
    ids = [f"e{i}" for i in range(n)]
    score = dict.fromkeys(ids, 0.0)
    byes: Counter[str] = Counter()
    met: dict[frozenset[str], list[int]] = {}
    order = {b: rng.random() for b in ids}
    out = []
    for rnd in range(1, rounds + 1):
        ranked = sorted(ids, key=lambda b: (-score[b], order[b]))
        pairs, bye = swiss_pairs(ranked, dict(met), dict(byes))
        assert sorted([*itertools.chain(*pairs), *bye]) == sorted(ids)
        for b in bye:
            byes[b] += 1
            score[b] += 1
        for a, b in pairs:
            met.setdefault(frozenset((a, b)), []).append(rnd)
            score[rng.choice((a, b))] += 1
        out.append((pairs, bye))
    return out


def meetings(rounds: list[tuple[list[tuple[str, str]], list[str]]]) -> dict[frozenset, list[int]]:
    met: dict[frozenset, list[int]] = {}
    for k, (pairs, _) in enumerate(rounds, 1):
        for a, b in pairs:
            met.setdefault(frozenset((a, b)), []).append(k)
    return met


def test_five_entrants_seven_rounds_meet_no_more_often_than_needed():
    """5 entrants, 7 rounds — 14 meetings over 10 pairs, so no pair
    needs to meet more than twice, and none ever needs to meet in back-to-back rounds."""
    worst = []
    for seed in range(300):
        met = meetings(simulate_swiss(5, 7, seed))
        most = max(len(r) for r in met.values())
        again = [(sorted(p), r) for p, r in met.items()
                 if any(b - a == 1 for a, b in itertools.pairwise(r))]
        if most > 2 or again:
            worst.append((seed, most, again))
    assert not worst, f"{len(worst)} of 300 runs; first: {worst[:3]}"


def _cost(pairs, met):
    """(rematches, their (meetings, last round) worst first) of one round's pairs."""
    hist = [(len(met[frozenset(p)]), max(met[frozenset(p)])) for p in pairs
            if frozenset(p) in met]
    return len(hist), sorted(hist, reverse=True)


def _all_pairings(pool):
    if not pool:
        yield []
        return
    first, rest = pool[0], pool[1:]
    for i, other in enumerate(rest):
        for sub in _all_pairings(rest[:i] + rest[i + 1:]):
            yield [(first, other), *sub]


def test_a_forced_rematch_round_has_as_few_rematches_as_any_pairing():
    """Against every possible pairing (and every allowed bye: the fewest byes), for random
    histories of up to 8 entrants: as few rematches, then the least recent ones."""
    rng = random.Random(16)
    forced = 0
    for _ in range(400):
        n = rng.randint(3, 8)
        ids = [f"e{i}" for i in range(n)]
        met: dict[frozenset[str], list[int]] = {}
        played = rng.randint(n - 1, 2 * n)
        for rnd in range(1, played + 1):
            rng.shuffle(ids)
            for k in range(0, n - 1, 2):
                met.setdefault(frozenset(ids[k:k + 2]), []).append(rnd)
        byes = {b: rng.randint(0, 1) for b in ids} if n % 2 else {}
        ranked = sorted(ids)
        pairs, bye = swiss_pairs(ranked, met, byes)
        fewest = min(byes.get(b, 0) for b in ids)
        options = []
        for out in [b for b in ids if byes.get(b, 0) == fewest] if n % 2 else [None]:
            pool = [b for b in ranked if b != out]
            options += [_cost(p, met) for p in _all_pairings(pool)]
        best = min(options)
        forced += best[0] > 0
        assert len(bye) == n % 2 and (not bye or byes[bye[0]] == fewest)
        assert _cost(pairs, met) == best, (ranked, met, byes, pairs, bye)
    assert forced > 100  # the cases that matter were met


def test_a_swiss_of_more_rounds_than_opponents_warns_and_pairs_as_well_as_it_can(client):
    """The same tournament through the service: 5 entrants, 7 Swiss rounds (accepted,
    with a warning), played to the end; no pair meets a third time or in back-to-back
    rounds. A Swiss of n - 1 rounds gets no warning."""
    bots = register(client, 5)
    fine = create(client, bots, format="swiss", rounds=4, games_per_pairing=1)
    assert fine["warnings"] == []
    t = create(client, bots, format="swiss", rounds=7, games_per_pairing=1, seed=7,
               variants={"target": 3})
    assert len(t["warnings"]) == 1 and "7 Swiss rounds for 5 entrants" in t["warnings"][0]
    listed = client.get("/tournaments").json["items"]
    assert {x["id"]: x["warnings"] for x in listed}[t["id"]] == t["warnings"]
    t = run_to_end(client, t["id"], bots, seed=9)
    met: dict[frozenset, list[int]] = {}
    for rnd in t["rounds"]:
        for g in rnd["games"]:
            met.setdefault(frozenset(g["teams"]), []).append(rnd["round"])
    assert sum(len(r) for r in met.values()) == 14 and len(met) == 10  # everyone met
    assert max(len(r) for r in met.values()) == 2, met
    assert not [r for r in met.values() if any(b - a == 1 for a, b in itertools.pairwise(r))]
