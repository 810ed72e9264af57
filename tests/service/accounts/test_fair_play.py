"""Duplicate-deal tournaments leak no hidden card to any entrant.

For every format (round robin, Swiss) and table size (2 and 4 players), whole tournaments
are played by bots over the HTTP API at uneven speeds (so one table of a deal finishes
while another still plays it, or has not started). At many moments while games are live,
everything each entrant can read is collected: with its token, its seat views, turn
answers, records and event streams of its games and the answers to its own actions;
without a token (so for everyone), every game's view, record, turn answer and event
stream, the game list, the tournament list, detail and standings, and the leaderboard.

From those answers the test builds what each entrant knows: which deal seeds (any
integer equal to a tournament game's seed) and which cards in which seat of which hand
of which deal (``(seed, hand, seat, card)``: a seat view's hand, a finished view's
``hands``, every trick card, a record's or an event's dealt, run and played cards). Then,
for every live game and every entrant seated in it, the ground truth read from the store
says what is hidden from that entrant: every card still in another seat's hand in the
current hand, and every card of a later hand. The entrant must know none of them, and
must not know the game's seed.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from service.engine.cards import CARD_NAMES, cards_of
from service.http.app import create_app
from tests.conftest import REDIS_URL
from tests.service.conftest import ADMIN_TOKEN
from tests.service.games.test_retries_and_waiting import _parse_sse
from tests.service.tournaments.test_tournaments import add_game

# a few long tests: pytest-xdist may run them on different workers (tests/conftest.py)
SPREAD_OVER_WORKERS = True
EXPECTED_S = 95  # seconds, the whole module: the order workers take it in (tests/conftest.py)

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


@pytest.fixture
def fair_app(key_prefix):
    # a short keep-alive: a live game's event stream is read up to its first keep-alive
    return create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                       "ARENA_RATE_LIMIT": 0, "ARENA_ADMIN_TOKEN": ADMIN_TOKEN,
                       "ARENA_SSE_KEEPALIVE": 0.01, "TESTING": True})


class Knowledge:
    """What one reader has learnt: deal seeds, and (seed, hand, seat, card) facts."""

    def __init__(self) -> None:
        self.seeds: set[int] = set()
        self.cards: set[tuple[int, int, int, str]] = set()

    def __ior__(self, other: Knowledge) -> Knowledge:
        self.seeds |= other.seeds
        self.cards |= other.cards
        return self


def learn(k: Knowledge, payload: Any, seed: int | None, all_seeds: set[int]) -> None:
    """Add to ``k`` what ``payload`` (an answer about the game dealt from ``seed``, or
    None for an answer about no single game) tells."""
    stack = [payload]
    while stack:  # a seed anywhere, under any name
        x = stack.pop()
        if isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
        elif isinstance(x, int) and not isinstance(x, bool) and x in all_seeds:
            k.seeds.add(x)
    if seed is None or not isinstance(payload, dict):
        return

    def add(hand: int, seat: int, cards: Any) -> None:
        for c in cards or ():
            if c is not None:
                k.cards.add((seed, hand, seat, c))

    if "hand_number" in payload and "phase" in payload:  # a view
        h = payload["hand_number"]
        if payload.get("seat") is not None:
            add(h, payload["seat"], payload.get("hand"))
        for s, cards in enumerate(payload.get("hands") or []):
            add(h, s, cards)
        for trick in [*payload["tricks"], payload["trick"]]:
            for c in trick["cards"]:
                add(h, c["seat"], [c["card"]])
    if "complete" in payload and "hands" in payload:  # a record
        for hand in payload["hands"]:
            h = hand["hand"]
            for deal in hand["deals"]:
                for s, cards in enumerate(deal["cards"]):
                    add(h, s, cards)
                for run in deal["runs"]:
                    for s, cards in enumerate(run):
                        add(h, s, cards)
            for trick in [*hand["tricks"], {"cards": hand.get("current_trick", [])}]:
                for c in trick["cards"]:
                    add(h, c["seat"], [c["card"]])


def learn_events(k: Knowledge, events: list[dict[str, Any]], seed: int, all_seeds: set[int]
                 ) -> None:
    hand = 0
    for e in events:
        learn(k, e, None, all_seeds)
        kind = e["type"]
        if kind == "deal":
            hand = e["hand"]
        if kind in ("deal", "run_deal"):
            for s, cards in enumerate(e["cards"]):
                for c in cards or ():
                    if c is not None:
                        k.cards.add((seed, hand, s, c))
        elif kind == "card_played":
            k.cards.add((seed, hand, e["seat"], e["card"]))


def read_stream(client: Any, gid: str, headers: dict[str, str], query: dict[str, Any]
                ) -> list[dict[str, Any]]:
    """The events a stream sends before its first keep-alive (or its end)."""
    resp = client.get(f"/games/{gid}/events", headers=headers, query_string=query,
                      buffered=False)
    if resp.status_code != 200:
        body = resp.get_data()
        resp.close()
        return [json.loads(body)] if body else []
    chunks = []
    for chunk in resp.response:
        if chunk.startswith(b":"):
            break
        chunks.append(chunk)
    resp.close()
    events, _ = _parse_sse(chunks)
    return [json.loads(e["data"]) for e in events]


class Tournament:
    """One tournament played by in-test bots, with everything each entrant reads kept."""

    def __init__(self, app: Any, n: int, seed: int, **settings: Any) -> None:
        self.app = app
        self.c = app.test_client()
        self.store = app.extensions["arena"].store
        self.rng = random.Random(seed)
        self.bots: dict[str, str] = {}
        for i in range(n):
            r = self.c.post("/bots", json={"name": f"entrant-{i}"})
            self.bots[r.json["id"]] = r.json["token"]
        body = {"entrants": list(self.bots), "variants": {"target": 3}, "seed": seed,
                **settings}
        r = self.c.post("/tournaments", json=body, headers=ADMIN)
        assert r.status_code == 201, r.json
        self.id = r.json["id"]
        self.know = {b: Knowledge() for b in self.bots}
        self.public = Knowledge()
        self.moments = self.checked = 0
        self.all_seeds: set[int] = set()
        self.settled: set[str] = set()
        self.embargoes_met = 0
        # a pace per entrant: how likely it is to take a turn it has on each pass
        self.pace = {b: self.rng.choice((0.3, 0.6, 1.0)) for b in self.bots}

    def games(self) -> list[Any]:
        out = []
        for gid in self.store.r.zrange(f"{self.store.p}games:all", 0, -1):
            g = self.store.get_game(gid.decode())
            if g and (g.meta.get("tournament") or {}).get("id") == self.id:
                out.append(g)
        return out

    def play(self) -> int:
        moved = 0
        for bot, token in self.bots.items():
            if self.rng.random() > self.pace[bot]:
                continue
            turns = self.c.get("/bots/me/turns", query_string={"timeout": 0},
                               headers=auth(token)).json
            for gid in turns["games"]:
                v = self.c.get(f"/games/{gid}", headers=auth(token)).json
                if not v["your_turn"]:
                    continue
                action = self.rng.choice(v["legal_actions"])
                r = self.c.post(f"/games/{gid}/actions", headers=auth(token),
                                json={"action": action, "version": v["version"]})
                assert r.status_code in (200, 409), r.json
                seed = self.store.get_game(gid).meta["seed"]
                self.all_seeds.add(seed)
                learn(self.know[bot], r.json, seed, self.all_seeds)
                moved += r.status_code == 200
        return moved

    def read_everything(self, streams: bool) -> None:
        games = self.games()
        self.all_seeds |= {g.meta["seed"] for g in games}
        all_seeds = self.all_seeds
        pub = self.public
        c = self.c
        for path in ("/games?limit=100", "/games?status=finished&limit=100",
                     "/games?status=active&limit=100", "/tournaments",
                     f"/tournaments/{self.id}", f"/tournaments/{self.id}/standings",
                     "/leaderboard"):
            learn(pub, c.get(path).json, None, all_seeds)
        for g in games:
            if g.id in self.settled:
                continue  # over and public: read once, nothing more to learn
            seed = g.meta["seed"]
            learn(pub, c.get(f"/games/{g.id}").json, seed, all_seeds)
            answer = c.get(f"/games/{g.id}/record")
            record = answer.json
            learn(pub, record, seed, all_seeds)
            if g.status == "finished" and answer.status_code == 403:
                self.embargoes_met += 1  # over, but another table still plays its deal
            if record.get("complete"):
                self.settled.add(g.id)
            learn(pub, c.get(f"/games/{g.id}/turn", query_string={"timeout": 0}).json,
                  seed, all_seeds)
            if streams:
                learn_events(pub, read_stream(c, g.id, {}, {}), seed, all_seeds)
            for seat, bot in enumerate(g.seats):
                k, h = self.know[bot], auth(self.bots[bot])
                q = {"seat": seat}
                learn(k, c.get(f"/games/{g.id}", headers=h, query_string=q).json, seed,
                      all_seeds)
                learn(k, c.get(f"/games/{g.id}/record", headers=h, query_string=q).json,
                      seed, all_seeds)
                learn(k, c.get(f"/games/{g.id}/turn", headers=h,
                               query_string={**q, "timeout": 0}).json, seed, all_seeds)
                if streams:
                    learn_events(k, read_stream(c, g.id, h, q), seed, all_seeds)

    def check(self) -> None:
        """No entrant knows a card hidden from it in a live game it plays, nor its seed."""
        self.moments += 1
        for g in self.games():
            if g.status != "active":
                continue
            state, seed = g.state, g.meta["seed"]
            hand = state.hand_no + 1
            for bot in set(g.seats):
                k = Knowledge()
                k |= self.know[bot]
                k |= self.public
                mine = {s for s, b in enumerate(g.seats) if b == bot}
                assert seed not in k.seeds, (
                    f"{bot} knows the seed of live game {g.id}")
                hidden = {(seed, hand, s, CARD_NAMES[x]) for s in range(g.players)
                          if s not in mine for x in cards_of(state.hands[s])}
                leaked = hidden & k.cards
                assert not leaked, f"{bot} knows hidden cards of live game {g.id}: {leaked}"
                later = {f for f in k.cards if f[0] == seed and f[1] > hand}
                assert not later, f"{bot} knows cards of a later hand of {g.id}: {later}"
                self.checked += 1

    def run(self, max_passes: int = 3000, read_every: int = 4) -> dict[str, Any]:
        """Play to the end, reading everything and checking every ``read_every`` passes
        (never with 0)."""
        for i in range(max_passes):
            t = self.c.get(f"/tournaments/{self.id}").json
            if t["status"] == "finished":
                return t
            if read_every and i % read_every == 0:
                self.read_everything(streams=i % 12 == 0)
                self.check()
            self.play()
        raise AssertionError("the tournament did not finish")


CASES = [
    pytest.param("round_robin", 2, 4, {"parallel": 3}, id="round-robin-2p"),
    pytest.param("round_robin", 4, 4, {"parallel": 8}, id="round-robin-4p"),
    pytest.param("swiss", 2, 5, {"rounds": 2, "parallel": 2}, id="swiss-2p"),
    pytest.param("swiss", 4, 5, {"rounds": 2, "parallel": 2}, id="swiss-4p"),
]


@pytest.mark.parametrize(("fmt", "players", "n", "extra"), CASES)
def test_no_entrant_reads_a_card_hidden_from_it(fair_app, fmt, players, n, extra):
    tour = Tournament(fair_app, n, seed=17 + n + players, format=fmt, players=players,
                      games_per_pairing=2, **extra)
    t = tour.run()
    assert tour.moments >= 10 and tour.checked >= 30, (tour.moments, tour.checked)
    # the case the embargo is for came up: a table over while its deal was still played
    assert tour.embargoes_met > 0
    games = [g for r in t["rounds"] for g in r["games"]]
    assert all(g["status"] == "done" for g in games)
    # the duplicate deals were really played: every deal at two tables or more, by
    # different entrants, and no entrant saw any deal twice
    by_seed: dict[int, list[Any]] = {}
    for g in tour.games():
        by_seed.setdefault(g.meta["seed"], []).append(g)
    assert all(len(v) >= 2 for v in by_seed.values()), "every deal at several tables"
    for tables in by_seed.values():
        entrants = [b for g in tables for b in set(g.seats)]
        assert len(entrants) == len(set(entrants)), "an entrant saw a deal twice"
    # once it is all over, everything is public again — and the reading above is able to
    # see it: every seed, and every hand dealt, is now known to every reader
    tour.read_everything(streams=False)
    assert tour.public.seeds == {g.meta["seed"] for g in tour.games()}
    for g in tour.games():
        rec = tour.c.get(f"/games/{g.id}/record").json
        assert rec["complete"] and rec["seed"] == g.meta["seed"]
        dealt = {(rec["seed"], 1, s, c) for s, cards in enumerate(rec["hands"][0]["deals"][0]
                                                                   ["cards"]) for c in cards}
        assert dealt <= tour.public.cards


def recompute(c: Any, t: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], list[Any]]:
    """Standings rows and the ratings sequence rebuilt from the games' records alone (and
    the tournament's rounds, byes and recording order); OpenSkill taken straight from the
    openskill package."""
    from openskill.models import PlackettLuce

    model = PlackettLuce()
    rows: dict[str, dict[str, Any]] = {
        e["bot_id"]: {"score": 0.0, "matchpoints": 0.0, "comparisons": 0, "played": 0,
                      "won": 0, "lost": 0, "hands_won": 0, "points_for": 0,
                      "points_against": 0, "timeouts": 0, "byes": 0}
        for e in t["entrants"]}
    rating = {b: model.rating() for b in rows}
    # the leaderboard's: the k-th game against the same opponent (each bot its own owner,
    # all within a day) moves it by 1/k of the full update (docs/ratings.md)
    board = {b: [model.rating().mu, model.rating().sigma] for b in rows}
    met: dict[tuple[str, str], int] = {}
    history = []
    for rnd in t["rounds"]:
        for b in rnd["byes"]:
            rows[b]["byes"] += 1
            rows[b]["score"] += 1
        records = {g["game_id"]: c.get(f"/games/{g['game_id']}/record").json
                   for g in rnd["games"]}
        matches: dict[frozenset[str], list[Any]] = {}
        same_cards: dict[int, list[Any]] = {}
        for g in rnd["games"]:
            rec = records[g["game_id"]]
            assert rec["complete"] and rec["seed"] == g["seed"]
            matches.setdefault(frozenset(g["teams"]), []).append((g, rec))
            same_cards.setdefault(rec["seed"], []).append((g, rec))
            for team, bot in enumerate(g["teams"]):
                add_game(rows[bot], rec, team)
                rows[bot]["lost"] += rec["winner"] != team
        # the deal numbers the tournament shows group exactly the games dealt alike
        assert sorted(sorted(g["slot"] for g, _ in v) for v in same_cards.values()) == sorted(
            sorted(g["slot"] for g in rnd["games"] if g["deal"] == d)
            for d in {g["deal"] for g in rnd["games"]})
        for pair, games in matches.items():
            key = {b: [0, 0] for b in pair}
            for g, rec in games:
                for team, bot in enumerate(g["teams"]):
                    key[bot][0] += rec["winner"] == team
                    key[bot][1] += rec["scores"][team]
            a, b = sorted(pair)
            if key[a] == key[b]:
                rows[a]["score"] += 0.5
                rows[b]["score"] += 0.5
            else:
                rows[a if key[a] > key[b] else b]["score"] += 1
        for tables in same_cards.values():
            for team in (0, 1):
                for g, rec in tables:
                    mine = rec["scores"][team] - rec["scores"][1 - team]
                    for g2, rec2 in tables:
                        if g2 is g:
                            continue
                        theirs = rec2["scores"][team] - rec2["scores"][1 - team]
                        row = rows[g["teams"][team]]
                        row["comparisons"] += 1
                        row["matchpoints"] += 1 if mine > theirs else 0.5 if mine == theirs else 0
        for g in sorted(rnd["games"], key=lambda g: g["recorded"]):
            rec = records[g["game_id"]]
            w, lo = g["teams"][rec["winner"]], g["teams"][1 - rec["winner"]]
            [[rw], [rl]] = model.rate([[rating[w]], [rating[lo]]], ranks=[0, 1])
            rating[w], rating[lo] = rw, rl
            bw, bl = (model.rating(mu=board[x][0], sigma=board[x][1]) for x in (w, lo))
            [[fw], [fl]] = model.rate([[bw], [bl]], ranks=[0, 1])
            for bot, other, full in ((w, lo, fw), (lo, w, fl)):
                k = met[bot, other] = met.get((bot, other), 0) + 1
                board[bot] = [board[bot][0] + (full.mu - board[bot][0]) / k,
                              board[bot][1] + (full.sigma - board[bot][1]) / k]
        history.append({b: (r.mu, r.sigma) for b, r in rating.items()})
    for b, row in rows.items():
        row["mu"], row["sigma"] = rating[b].mu, rating[b].sigma
        row["board_mu"], row["board_sigma"] = board[b]
    return rows, history


@pytest.mark.parametrize(("fmt", "players", "n", "extra"), [
    pytest.param("round_robin", 2, 5, {"parallel": 4}, id="round-robin-2p"),
    pytest.param("swiss", 4, 6, {"rounds": 3, "parallel": 3}, id="swiss-4p"),
])
def test_ratings_and_standings_match_a_recomputation(fair_app, fmt, players, n, extra):
    tour = Tournament(fair_app, n, seed=5 * n, format=fmt, players=players,
                      games_per_pairing=2, **extra)
    t = tour.run(read_every=0)
    c = tour.c
    games = [g for r in t["rounds"] for g in r["games"]]
    # every result recorded once, in an order that completes each round before the next
    assert sorted(g["recorded"] for g in games) == list(range(1, len(games) + 1))
    ends = [max(g["recorded"] for g in r["games"]) for r in t["rounds"]]
    starts = [min(g["recorded"] for g in r["games"]) for r in t["rounds"]]
    assert all(e < s for e, s in zip(ends, starts[1:]))
    want, history = recompute(c, t)
    st = c.get(f"/tournaments/{tour.id}/standings").json
    for row in st["items"]:
        w = want[row["bot_id"]]
        for k in ("score", "matchpoints", "comparisons", "played", "won", "lost",
                  "hands_won", "points_for", "points_against", "timeouts", "byes"):
            assert row[k] == w[k], (k, row, w)
        assert row["rating"]["mu"] == pytest.approx(w["mu"], abs=1e-4)
        assert row["rating"]["sigma"] == pytest.approx(w["sigma"], abs=1e-4)
        assert row["rating"]["ordinal"] == pytest.approx(w["mu"] - 3 * w["sigma"], abs=1e-3)
    # the ranking: score, matchpoints, games won, point difference, ordinal, bot id
    order = sorted(st["items"], key=lambda r: (
        -r["score"], -r["matchpoints"], -r["won"], -(r["points_for"] - r["points_against"]),
        -r["rating"]["ordinal"], r["bot_id"]))
    assert [r["bot_id"] for r in st["items"]] == [r["bot_id"] for r in order]
    assert [r["rank"] for r in st["items"]] == list(range(1, n + 1))
    assert sum(r["comparisons"] for r in st["items"]) > 0
    # the rating after every round, and the leaderboard (this test's games only)
    assert len(st["history"]) == len(history) == len(t["rounds"])
    for shown, mine in zip(st["history"], history):
        for point in shown["ratings"]:
            mu, sigma = mine[point["bot_id"]]
            assert point["mu"] == pytest.approx(mu, abs=1e-4)
            assert point["sigma"] == pytest.approx(sigma, abs=1e-4)
    board = {r["bot_id"]: r for r in c.get("/leaderboard").json["items"]}
    for b, w in want.items():
        assert board[b]["mu"] == pytest.approx(w["board_mu"], abs=1e-4)
        assert board[b]["sigma"] == pytest.approx(w["board_sigma"], abs=1e-4)
        assert board[b]["games"] == w["played"] and board[b]["wins"] == w["won"]
