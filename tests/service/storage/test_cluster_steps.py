"""A process killed between the steps of a cluster commit leaves nothing
permanently wrong (``service.storage.keys``).

The cluster layout moves the cross-game indexes (games by status, the deadlines the
sweeper reads, each bot's live games) in steps around the one-slot commit script. Here a
real process is killed (``ARENA_FAILPOINT``: ``os._exit``) right after its commit applied
and before its second step, on the test Redis (a single Redis with the cluster layout
forced, or a real cluster when ``REDIS_URL`` names one). Then: every index is a superset
of the per-game truth (nothing is missing), the readers answer the truth (read-repair),
and after ``Store.reconcile`` every index agrees with the truth exactly.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from typing import Any

import pytest

from service.arena.games.commands import Arena
from service.storage.redis_client import connect
from service.storage.store import FAILPOINT_EXIT, Store
from tests.conftest import REDIS_URL

# The killed process: plays the game named in argv with the bots' ids, choosing at random
# from the legal actions, until its ARENA_FAILPOINT stops it (or the game ends).
CHILD = """
import random, sys
from service.arena.games.commands import Arena
from service.storage.redis_client import connect
from service.storage.store import Store
url, prefix, game_id, bots = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(",")
arena = Arena(Store(connect(url), prefix, cluster=True))
rng = random.Random(int(sys.argv[5]))
if sys.argv[6] != "-":
    arena.join(game_id, int(sys.argv[6]), bots[int(sys.argv[6])])
for _ in range(5000):
    game = arena.get(game_id)
    if game.status != "active":
        sys.exit(0)
    seat = game.state.turn
    view = arena.view(game, bots[seat], seat)
    arena.act(game_id, bots[seat], {"action": rng.choice(view["legal_actions"])}, None, None)
"""


@pytest.fixture
def store(key_prefix) -> Store:
    return Store(connect(REDIS_URL), key_prefix, cluster=True)


def killed_at(store: Store, failpoint: str, game_id: str, bots: list[str], seed: int,
              join: int | None = None) -> None:
    env = {**os.environ, "ARENA_FAILPOINT": failpoint}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, REDIS_URL, store.p, game_id, ",".join(bots), str(seed),
         "-" if join is None else str(join)],
        env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == FAILPOINT_EXIT, out.stderr[-2000:]


def truth_and_indexes(store: Store) -> tuple[list[str], list[str]]:
    """(entries missing from an index, entries an index has beyond the truth), over every
    game of the prefix."""
    r, k = store.r, store.keys
    ids = [m.decode() for m in r.zrange(k.index("all"), 0, -1)]
    index = {s: {m.decode() for m in r.zrange(k.index(s), 0, -1)}
             for s in ("waiting", "active", "finished")}
    deadlines = {m.decode() for m in r.zrange(k.deadlines, 0, -1)}
    missing, extra = [], []
    want_deadlines, bots = set(), set()
    want_bot_games: dict[str, set[str]] = {}
    for gid in ids:
        game = store.get_game(gid)
        assert game is not None
        for status, members in index.items():
            if status == game.status and gid not in members:
                missing.append(f"{gid} not in games:{status}")
            if status != game.status and gid in members:
                extra.append(f"{gid} ({game.status}) in games:{status}")
        if game.status == "active" and game.deadline is not None:
            want_deadlines.add(f"{gid}:{game.version}")
        for bot in {b for b in game.seats if b}:
            bots.add(bot)
            if game.status != "finished":
                want_bot_games.setdefault(bot, set()).add(gid)
    missing += [f"deadline {m}" for m in want_deadlines - deadlines]
    extra += [f"deadline {m}" for m in deadlines - want_deadlines]
    for bot in bots:
        have = {m.decode() for m in r.smembers(k.bot_games(bot))}
        want = want_bot_games.get(bot, set())
        missing += [f"{g} not in bot:{bot}:games" for g in want - have]
        extra += [f"{g} in bot:{bot}:games" for g in have - want]
    return missing, extra


def new_table(store: Store, arena: Arena, seats: int, **body: Any) -> tuple[str, list[str]]:
    bots = [store.create_bot(f"b{i}")[0]["id"] for i in range(seats)]
    for b in bots:  # one owner's bots: seated at once, no invitation
        arena.owners.add_bot("o-test", b)
    game = arena.create_game(bots[0], {"players": seats, "seats": bots, "seed": 7, **body})
    return game["id"], bots


def test_killed_after_the_commit_that_finishes_a_game(store) -> None:
    """The finishing commit applied, its second step (leave games:active and the bots'
    sets) never ran: the readers already answer the truth, the reconciler fixes the rest."""
    arena = Arena(store)
    game_id, bots = new_table(store, arena, 2, variants={"target": 3})
    other_id, _ = new_table(store, arena, 2)  # a bystander, untouched
    killed_at(store, "commit:finished", game_id, bots, seed=3)
    game = store.get_game(game_id)
    assert game is not None and game.status == "finished"  # the commit applied
    missing, extra = truth_and_indexes(store)
    assert missing == []  # every index is a superset of the truth ...
    assert f"{game_id} (finished) in games:active" in extra  # ... with the steps undone
    assert any(e.startswith(f"{game_id} in bot:") for e in extra)
    # read-repair: the readers answer the truth already
    active, _ = store.list_games("active", 50, None)
    assert [g.id for g in active] == [other_id]
    assert game_id not in store.bot_turns(bots[0]) + store.bot_turns(bots[1])
    assert store.reconcile() >= 1
    assert truth_and_indexes(store) == ([], [])


def test_killed_after_the_join_that_starts_a_game(store) -> None:
    """A join made the game active; the waiting index still lists it until read-repair,
    and the active index had it before the commit (additions go first)."""
    arena = Arena(store)
    bots = [store.create_bot(f"b{i}")[0]["id"] for i in range(2)]
    game_id = arena.create_game(bots[0], {"players": 2, "seed": 5})["id"]
    killed_at(store, "commit:active", game_id, bots, seed=1, join=1)
    game = store.get_game(game_id)
    assert game is not None and game.status == "active" and game.seats == bots
    missing, extra = truth_and_indexes(store)
    assert missing == []
    assert extra == [f"{game_id} (active) in games:waiting"]
    assert store.list_games("waiting", 50, None)[0] == []  # read-repair ...
    assert truth_and_indexes(store) == ([], [])  # ... removed the stale entry
    turn_bot = bots[game.state.turn]
    assert store.bot_turns(turn_bot) == [game_id]


def test_killed_after_a_timed_move(store) -> None:
    """In a game with a move limit the new version's deadline entry went in before the
    commit, and the old version's stays behind: void (the sweeper drops it) and removed
    by the reconciler; nothing waits on a deadline that is gone."""
    arena = Arena(store)
    game_id, bots = new_table(store, arena, 2, move_limit=60)
    killed_at(store, "commit", game_id, bots, seed=2)
    game = store.get_game(game_id)
    assert game is not None and game.version == 2
    missing, extra = truth_and_indexes(store)
    assert missing == []
    assert extra == [f"deadline {game_id}:1"]
    store.drop_deadline(game_id, 1)  # what the sweeper does with a void entry
    assert truth_and_indexes(store) == ([], [])
    killed_at(store, "commit", game_id, bots, seed=4)
    assert truth_and_indexes(store)[0] == []
    store.reconcile()
    assert truth_and_indexes(store) == ([], [])


def test_killed_between_a_new_game_s_indexes_and_its_hash(store) -> None:
    """Indexes first, then the game: a crash between leaves an index entry for no game,
    which the listing skips; nothing else is touched."""
    code = subprocess.run(
        [sys.executable, "-c",
         "import sys\n"
         "from service.arena.games.commands import Arena\n"
         "from service.storage.redis_client import connect\n"
         "from service.storage.store import Store\n"
         "s = Store(connect(sys.argv[1]), sys.argv[2], cluster=True)\n"
         "bot = s.create_bot('x')[0]['id']\n"
         "Arena(s).create_game(bot, {'players': 2, 'seats': [bot, None]})\n",
         REDIS_URL, store.p],
        env={**os.environ, "ARENA_FAILPOINT": "create"}, timeout=60).returncode
    assert code == FAILPOINT_EXIT
    assert store.r.zcard(store.keys.index("all")) == 1
    assert store.list_games(None, 10, None) == ([], None)
    assert store.list_games("waiting", 10, None) == ([], None)
    arena = Arena(store)
    bot = store.create_bot("y")[0]["id"]
    made = arena.create_game(bot, {"players": 2})
    assert [g.id for g in store.list_games(None, 10, None)[0]] == [made["id"]]


def test_the_single_layout_needs_no_steps(key_prefix) -> None:
    """On a single Redis the default layout commits every index in the script: a
    failpoint between steps never fires, and the reconciler has nothing to do."""
    client = connect(REDIS_URL)
    from service.storage.redis_client import is_cluster

    if is_cluster(client):
        pytest.skip("the test Redis is a cluster: the single layout is not used there")
    store = Store(client, key_prefix)
    arena = Arena(store)
    game_id, bots = new_table(store, arena, 2, variants={"target": 3})
    rng = random.Random(0)
    os.environ["ARENA_FAILPOINT"] = "commit"
    try:
        store.failpoint = "commit"
        game = store.get_game(game_id)
        assert game is not None
        view = arena.view(game, bots[game.state.turn], game.state.turn)
        arena.act(game_id, bots[game.state.turn],
                  {"action": rng.choice(view["legal_actions"])}, None, None)
    finally:
        del os.environ["ARENA_FAILPOINT"]
    assert store.get_version(game_id) == 2
    assert store.reconcile() == 0


def test_a_bots_turns_read_between_a_new_games_steps_keeps_the_game(store, monkeypatch
                                                                     ) -> None:
    """A reader of a bot's turns (a webhook dispatcher's pass) between the steps of a new
    game's creation (the bot's set of games written, the game not yet) finds the game
    missing: it must not take it out of the set, or the bot is not told of its turns there
    until the reconciler puts it back (the webhook bot's first turns went uncalled and
    the clock played them). A game still missing a grace later (expired) does leave."""
    from service.storage import bots as bot_records

    arena = Arena(store)
    bots = [store.create_bot(f"b{i}")[0]["id"] for i in range(2)]
    for b in bots:
        arena.owners.add_bot("o-test", b)
    create = store._create
    read_between: list[list[str]] = []

    def create_after_a_read(*args: Any, **kwargs: Any) -> Any:
        read_between.append(store.bot_turns(bots[0]) + store.bot_turns(bots[1]))
        return create(*args, **kwargs)

    monkeypatch.setattr(store, "_create", create_after_a_read)
    game_id = arena.create_game(bots[0], {"players": 2, "seats": bots, "seed": 7})["id"]
    assert read_between == [[]]  # the reader ran between the steps, and saw no turn yet
    turn_bot = bots[store.get_game(game_id).state.turn]
    assert store.bot_turns(turn_bot) == [game_id]
    assert truth_and_indexes(store)[0] == []  # nothing missing from any index
    # an id whose game is gone (expired) leaves the set once the grace has passed
    store.r.delete(store.keys.game(game_id))
    assert store.bot_turns(turn_bot) == []
    assert store.r.sismember(store.keys.bot_games(turn_bot), game_id)  # within the grace
    monkeypatch.setattr(bot_records, "MISSING_GRACE_S", 0.0)
    assert store.bot_turns(turn_bot) == []
    assert not store.r.sismember(store.keys.bot_games(turn_bot), game_id)
