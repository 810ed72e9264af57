"""Cancel, pause and resume, withdrawal,
the no-show rule, disqualification after N timeouts and forfeits, end to end: a real
``allfours serve`` (its own sweeper) on the test Redis under a key prefix of its own, and
real bots (``clients.runner.BotRunner``) playing over HTTP. The rules are in
``service/arena/tournaments/control.py``'s docstring."""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from clients.api import ArenaClient, ArenaError
from clients.runner import BotRunner
from service.storage.keys import Keys
from tests.conftest import REDIS_URL
from tests.test_serve import Serve, kill_leftovers
from tests.test_tournament_cli import run_tournament

EXPECTED_S = 70  # seconds, the whole module: the order workers take it in (tests/conftest.py)

LONG = {"target": 11}


def wait_until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``check`` until it is truthy (a readiness wait, not a timed assertion)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"gave up waiting for {what}")


def slow_random(delay: float, seed: int) -> Callable[[dict[str, Any], list[str]], str]:
    rng = random.Random(seed)

    def choose(view: dict[str, Any], legal: list[str]) -> str:
        time.sleep(delay)
        return rng.choice(legal)
    return choose


class Arena:
    """The served service, its admin token and registered bots."""

    def __init__(self, url: str, admin: str, forget_seed: Callable[[int], None]) -> None:
        self.url, self.admin, self.forget_seed = url, admin, forget_seed
        self.viewer = ArenaClient(url)
        self.clients: dict[str, ArenaClient] = {}

    def bots(self, n: int) -> list[str]:
        ids = []
        for i in range(n):
            client = ArenaClient(self.url)
            bot = client.register(f"entrant-{i}")
            self.clients[bot.id] = client
            ids.append(bot.id)
        return ids

    def create(self, entrants: list[str], **settings: Any) -> str:
        if "seed" in settings:  # chosen for its deals, maybe by another test of the module
            self.forget_seed(settings["seed"])
        return self.viewer.create_tournament(entrants, admin_token=self.admin,
                                             **settings).id

    def get(self, tid: str) -> dict[str, Any]:
        return self.viewer.tournament(tid).raw

    @contextmanager
    def running(self, bots: list[str], delay: float = 0.0) -> Iterator[None]:
        """Real runners for ``bots`` until the block ends."""
        stop = threading.Event()
        threads = []
        for k, bot in enumerate(bots):
            runner = BotRunner(self.clients[bot], slow_random(delay, k), stop_event=stop,
                               poll_timeout=1.0, act_wait=1.0, name=bot)
            th = threading.Thread(target=runner.run, daemon=True)
            th.start()
            threads.append(th)
        try:
            yield
        finally:
            stop.set()
            for th in threads:
                th.join(15)

    def leaderboard(self) -> dict[str, Any]:
        return {r.bot_id: r for r in self.viewer.leaderboard()}


ADMIN = "tournament-control-admin"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, redis_client) -> Iterator[tuple[str, str]]:
    """One ``allfours serve`` for the module, on the test Redis under a key prefix of its
    own (every key deleted at the end): (its URL, its key prefix). Each test makes its own
    bots and tournaments and reads only those, so the tests need no service each."""
    prefix = f"aftest:{uuid.uuid4().hex[:12]}:"
    tmp = tmp_path_factory.mktemp("control")
    process = Serve(tmp, tmp / "unused-data", REDIS_URL=REDIS_URL, ARENA_KEY_PREFIX=prefix,
                    ARENA_ADMIN_TOKEN=ADMIN, ARENA_LOG_LEVEL="warning",
                    # no accounts but the tests', no tournaments but theirs (the schedule's)
                    ARENA_HOUSE_BOTS="0", ARENA_TOURNAMENT_SCHEDULE="[]")
    try:
        process.wait_healthy("/readyz")
        yield process.url(""), prefix
    finally:
        process.stop()
        kill_leftovers(process.seen)
        found = list(redis_client.scan_iter(match=f"{prefix}*", count=1000))
        for i in range(0, len(found), 500):
            redis_client.delete(*found[i : i + 500])


@pytest.fixture
def keys(served: tuple[str, str], redis_client) -> Keys:
    """The service's key names under the module's prefix (conftest's ``keys`` names a
    test's own prefix, which this service does not use)."""
    from redis.cluster import RedisCluster

    return Keys(served[1], cluster=isinstance(redis_client, RedisCluster))


@pytest.fixture
def arena(served: tuple[str, str], redis_client, keys: Keys) -> Iterator[Arena]:
    def forget_seed(seed: int) -> None:
        """A service refuses a tournament seed it has used (its deals are public once
        that tournament is over); the tests that fix a seed for its deals share one
        service, so the seed is taken off its list of used seeds first."""
        redis_client.srem(f"{keys.tours_prefix}tours:seeds", seed)

    a = Arena(served[0], ADMIN, forget_seed)
    yield a
    a.viewer.close()
    for c in a.clients.values():
        c.close()


def slots(t: dict[str, Any]) -> list[dict[str, Any]]:
    return [g for r in t["rounds"] for g in r["games"]]


def embargoed_of(redis_client: Any, keys: Any, tid: str) -> set[str]:
    return {m.decode() for m in redis_client.smembers(f"{keys.tours_prefix}embargoed")
            if m.decode().startswith(f"{tid}:")}


def test_cancel_mid_round_voids_live_games_lifts_every_embargo_and_stops_scheduling(
        arena: Arena, redis_client, keys) -> None:
    bots = arena.bots(4)  # duplicate deals: two tables a round share each deal
    tid = arena.create(bots, games_per_pairing=2, variants=LONG, parallel=3)
    with arena.running(bots, delay=0.05):
        wait_until(lambda: arena.get(tid)["progress"]["games_done"] >= 1
                   and arena.get(tid)["progress"]["games_live"] >= 1, 120,
                   "a game done and another live")
        assert embargoed_of(redis_client, keys, tid), "a shared deal is being played"
        t = arena.viewer.cancel_tournament(tid, admin_token=arena.admin).raw
    assert t["status"] == "cancelled" and t["finished"] is not None
    assert "seed" in t["settings"]
    assert all(g["status"] in ("done", "void") for g in slots(t)), slots(t)
    voided = [g for g in slots(t) if g["status"] == "void" and g["game_id"]]
    assert voided, "the live games were voided"
    # the fair-play invariant: no deal of a cancelled tournament stays embargoed
    assert embargoed_of(redis_client, keys, tid) == set()
    assert not redis_client.sismember(f"{keys.tours_prefix}tours:running", tid)
    for g in voided:
        view = arena.viewer.game(g["game_id"])
        assert view.status == "finished" and view.winner is None
        assert g["winner"] is None and g["scores"] is None and g["rating"] is None
        record = arena.viewer._call("getRecord", game_id=g["game_id"])
        assert record["complete"] is True  # public now, like any finished game's
        seat_bot = g["teams"][0]
        with pytest.raises(ArenaError) as refused:
            arena.clients[seat_bot].act(g["game_id"], "stand")
        assert refused.value.status == 409 and "its tournament ended it" in str(refused.value)
    # counted nowhere: standings and leaderboard hold only the games played to the end
    done = [g for g in slots(t) if g["status"] == "done"]
    table = arena.viewer.standings(tid)
    assert table.status == "cancelled"
    assert sum(r.played for r in table.items) == 2 * len(done)
    board = arena.leaderboard()  # the module's other tests' bots are on it too
    assert sum(board[b].games for b in bots if b in board) == 2 * len(done)
    export = arena.viewer.export(tid)
    assert {g["status"] for g in export["games"]} <= {"done", "void"}
    assert "void" in arena.viewer.export(tid, table="games")
    # nothing is scheduled afterwards, and a repeat answers as it is
    again = arena.viewer.cancel_tournament(tid, admin_token=arena.admin).raw
    assert again["progress"] == t["progress"]
    with pytest.raises(ArenaError) as over:
        arena.viewer.pause_tournament(tid, admin_token=arena.admin)
    assert over.value.status == 409 and over.value.type.endswith("/tournament-over")


# seed 3: the first game is over at its creation (a kicked jack, R22), so the second is
# the one live at the pause; seed 1: the first is
@pytest.mark.parametrize("seed", [1, 3])
def test_pause_lets_live_games_finish_and_starts_none_until_resumed(arena: Arena,
                                                                     seed: int) -> None:
    bots = arena.bots(3)
    tid = arena.create(bots, games_per_pairing=1, parallel=1, variants={"target": 3},
                       seed=seed)
    t = arena.viewer.pause_tournament(tid, admin_token=arena.admin).raw
    assert t["status"] == "paused" and t["progress"]["games_live"] == 1
    assert "seed" not in t["settings"], "a paused tournament's seed stays secret"
    # a game over at its creation (R22) was recorded and the next started before the pause
    done = t["progress"]["games_done"] + 1
    assert done == (2 if seed == 3 else 1)
    with arena.running(bots):
        # the live game plays on to its end and is recorded; no other starts
        wait_until(lambda: arena.get(tid)["progress"]["games_done"] == done, 120,
                   "the live game to finish")
        for _ in range(3):  # more than one sweeper pass: still nothing started
            time.sleep(1.0)
            t = arena.get(tid)
            assert t["status"] == "paused"
            assert t["progress"]["games_live"] == 0 and t["progress"]["games_done"] == done
        assert arena.viewer.pause_tournament(tid, admin_token=arena.admin).status == "paused"
        t = arena.viewer.resume_tournament(tid, admin_token=arena.admin).raw
        if t["status"] == "running":  # else the last game was over at its creation (R22)
            assert t["progress"]["games_live"] == 1
        else:
            assert t["status"] == "finished"
        wait_until(lambda: arena.get(tid)["status"] == "finished", 180, "the end")
    t = arena.get(tid)
    assert t["progress"]["games_done"] == t["progress"]["games_planned"] == 3


def test_withdrawal_forfeits_live_and_unplayed_games_as_rated_losses(arena: Arena) -> None:
    bots = arena.bots(3)
    quitter = bots[2]
    tid = arena.create(bots, games_per_pairing=2, variants={"target": 3})
    # only the entrant itself may withdraw it
    with pytest.raises(ArenaError) as other:
        arena.clients[bots[0]].withdraw(tid, quitter)
    assert other.value.status == 403 and other.value.type.endswith("/forbidden-entrant")
    before = slots(arena.get(tid))
    live = [g for g in before if quitter in g["teams"] and g["status"] == "live"]
    # a first kick can end a game at its creation (R22): such a game was over before
    ended = {g["slot"] for g in before if quitter in g["teams"] and g["status"] == "done"}
    t = arena.clients[quitter].withdraw(tid).raw
    assert {e["bot_id"]: e["status"] for e in t["entrants"]}[quitter] == "withdrawn"
    for g in live:  # its live game ended at once, forfeited
        assert arena.viewer.game(g["game_id"]).status == "finished"
    with arena.running(bots[:2]):
        wait_until(lambda: arena.get(tid)["status"] == "finished", 180, "the end")
    t = arena.get(tid)
    theirs = [g for g in slots(t) if quitter in g["teams"] and g["slot"] not in ended]
    assert len(theirs) == 4 - len(ended) and live
    for g in theirs:
        assert g["forfeit"] == [quitter] and g["winner"] != quitter and g["winner"], g
        # a rated loss for the quitter, a rated win for its opponent
        mine = {r["bot_id"]: r for r in g["rating"]}
        assert mine[quitter]["after"]["mu"] < mine[quitter]["before"]["mu"], g
        assert (g["scores"] is None) == (g["game_id"] is None)  # unplayed: no game
    rows = {r.bot_id: r for r in arena.viewer.standings(tid).items}
    assert rows[quitter].forfeits == len(theirs)
    assert rows[quitter].status == "withdrawn"
    board = arena.leaderboard()
    if not ended:
        assert rows[quitter].won == 0 and rows[quitter].score == 0
        assert rows[quitter].rating.mu < 25.0, "a forfeit is a rated loss"
        assert board[quitter].games == 4 and board[quitter].wins == 0
    assert all(board[b].games == 4 for b in bots[:2]), "forfeits are rated too"
    assert arena.clients[quitter].withdraw(tid).status == "finished"  # a repeat: as it is
    with pytest.raises(ArenaError) as over:
        arena.clients[bots[0]].withdraw(tid)
    assert over.value.status == 409 and over.value.type.endswith("/tournament-over")


@pytest.mark.parametrize("move_limit", [None, 0.5])
def test_a_no_show_forfeits_and_the_tournament_ends(arena: Arena, move_limit) -> None:
    present, absent = arena.bots(2)
    # seed 3: the present bot has a turn before the absent one in a game, so it has moved
    # (a forfeit is won only by an entrant that has made a move of its own)
    settings: dict[str, Any] = {"games_per_pairing": 2, "no_show": 3, "variants": LONG,
                                "seed": 3}
    if move_limit:
        settings["move_limit"] = move_limit
    tid = arena.create([present, absent], **settings)
    with arena.running([present]):
        wait_until(lambda: arena.get(tid)["status"] == "finished", 120,
                   "the no-show rule to end it")
    t = arena.get(tid)
    status = {e["bot_id"]: e["status"] for e in t["entrants"]}
    assert status == {present: "in", absent: "no_show"}
    assert all(absent in g["forfeit"] and g["winner"] == present for g in slots(t))
    rows = {r.bot_id: r for r in arena.viewer.standings(tid).items}
    assert rows[present].rank == 1 and rows[absent].won == 0
    board = arena.leaderboard()  # the no-show's forfeits are rated losses
    assert (board[absent].games, board[absent].wins) == (2, 0)
    assert (board[present].games, board[present].wins) == (2, 2)


def test_of_two_bots_that_never_play_the_last_one_standing_wins_nothing(
        arena: Arena, redis_client, keys) -> None:
    """No move clock: the no-show rule ends a tournament nobody plays (it does not stay
    running for the sweeper). When both are put out at once (each was in turn in a game),
    nobody wins and nothing is rated; when one is put out first, the other — still in,
    never yet asked to decide — wins those games (an entrant whose opponent left
    before its first decision wins), as a rated win."""
    a, b = arena.bots(2)
    tid = arena.create([a, b], games_per_pairing=2, no_show=2, variants=LONG)
    wait_until(lambda: arena.get(tid)["status"] == "finished", 120, "the no-show rule")
    assert not redis_client.sismember(f"{keys.tours_prefix}tours:running", tid)
    t = arena.get(tid)
    status = {e["bot_id"]: e["status"] for e in t["entrants"]}
    assert "no_show" in status.values()
    still = [bot for bot, st in status.items() if st == "in"]
    rows = {r.bot_id: r for r in arena.viewer.standings(tid).items}
    if not still:  # both out at once: nobody wins, nothing rated
        assert all(g["forfeit"] and g["winner"] is None for g in slots(t))
        assert all(r.won == 0 and r.score == 0 and r.played == 2 for r in rows.values())
        assert not set(arena.leaderboard()) & {a, b}
    else:
        (stayed,) = still
        assert all(g["winner"] == stayed for g in slots(t))
        assert rows[stayed].won == 2 and arena.leaderboard()[stayed].wins == 2


def test_disqualification_after_n_timeouts(arena: Arena) -> None:
    present, failing = arena.bots(2)
    tid = arena.create([present, failing], games_per_pairing=2, move_limit=0.5,
                       max_timeouts=3, no_show=None, variants=LONG)
    assert arena.get(tid)["settings"]["max_timeouts"] == 3
    with arena.running([present]):
        wait_until(lambda: arena.get(tid)["status"] == "finished", 120, "the end")
    t = arena.get(tid)
    assert {e["bot_id"]: e["status"] for e in t["entrants"]}[failing] == "disqualified"
    assert all(g["forfeit"] == [failing] for g in slots(t))
    charged = sum(g["timeouts"][g["teams"].index(failing)] for g in slots(t) if g["timeouts"])
    assert charged >= 3
    board = arena.leaderboard()  # its forfeits are rated losses
    assert board[failing].wins == 0 and board[failing].games == 2
    assert board[present].rating.ordinal > board[failing].rating.ordinal


def test_two_absent_bots_cannot_win_or_get_leaderboard_entries(arena: Arena) -> None:
    """No rule set but the move clock: each game ends with every move of both sides played
    by the clock, and both forfeit it."""
    a, b = arena.bots(2)
    tid = arena.create([a, b], games_per_pairing=2, move_limit=0.5, no_show=None,
                       variants={"target": 2}, seed=7)  # no deal ends at its first kick
    wait_until(lambda: arena.get(tid)["status"] == "finished", 120, "the clock to end it")
    games = slots(arena.get(tid))
    for game in games:
        assert sum(game["timeouts"]) > 0, game
        assert sorted(game["forfeit"]) == sorted([a, b]) and game["winner"] is None
        assert game["rating"] is None and game["scores"] is not None
    rows = arena.viewer.standings(tid).items
    assert all(r.won == 0 and r.score == 0 and r.forfeits == 2 and r.points_for == 0
               for r in rows)
    assert not set(arena.leaderboard()) & {a, b}


def test_the_commands_timeout_cancels_the_tournament_on_the_server(
        tmp_path: Path, arena: Arena) -> None:
    out = tmp_path / "t.json"
    result = run_tournament(["--server", arena.url, "--admin-token", arena.admin, "--quiet",
                             "--bots", "random,random", "--players", "2", "--games", "100",
                             "--target", "21", "--timeout", "3", "--no-show", "0",
                             "--max-timeouts", "50", "--json-out", str(out)], tmp_path,
                            timeout=120)
    assert result.returncode == 1, result.stderr
    assert "cancelled on the server" in result.stderr
    tid = json.loads(out.read_text())["tournament_id"]
    t = arena.get(tid)
    assert t["status"] == "cancelled"
    assert t["settings"]["no_show"] is None and t["settings"]["max_timeouts"] == 50
    assert all(g["status"] in ("done", "void") for g in slots(t))


def test_a_knockout_entrant_that_withdraws_loses_its_match_by_forfeit(arena: Arena) -> None:
    bots = arena.bots(4)
    tid = arena.create(bots, format="knockout", games_per_pairing=2, variants={"target": 3})
    t = arena.get(tid)
    first = t["bracket"]["rounds"][0]["matches"]
    quitter = first[0]["entrants"][1]
    opponent = first[0]["entrants"][0]
    arena.clients[quitter].withdraw(tid)
    with arena.running([b for b in bots if b != quitter]):
        wait_until(lambda: arena.get(tid)["status"] == "finished", 180, "the end")
    t = arena.get(tid)
    match = t["bracket"]["rounds"][0]["matches"][0]
    assert match["winner"] == opponent and match["decided_by"] == "forfeit", (match, t["rounds"])
    assert t["bracket"]["champion"] in bots and t["bracket"]["champion"] != quitter
    rows = {r.bot_id: r for r in arena.viewer.standings(tid).items}
    assert rows[quitter].status == "withdrawn" and rows[quitter].rank == 4
