"""After a run, every key under the test's prefix expires, unless docs/operations.md ("What
is kept, and for how long") lists its family as kept: the list the operators
read is the one the code is held to. Real Redis, single or cluster."""

from __future__ import annotations

import random
import re
from pathlib import Path

from service.arena.accounts import house
from service.http.app import create_app
from service.storage.store import Store
from tests.conftest import REDIS_URL
from tests.service.conftest import ADMIN_TOKEN, Api

OPERATIONS = Path(__file__).resolve().parents[3] / "docs" / "operations.md"
SECTION = "## What is kept, and for how long"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def families() -> list[tuple[str, re.Pattern[str], bool]]:
    """(pattern as written, as a regex over the key after the prefix, whether some of its
    keys may have no expiry) for each row of the section's table. A pattern is written
    with ``<name>`` for a part of the name (an id, a hash; ``<who>`` may hold colons); in
    a cluster a game's or a bot's part is in a hash tag (``{id}``) and the tournaments'
    keys follow ``{tours}:``, both allowed here. "none" in the expiry column: some of its
    keys are kept for ever."""
    text = OPERATIONS.read_text()
    assert SECTION in text, f"docs/operations.md has no section {SECTION!r}"
    body = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    out = []
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`"):
            continue
        for pattern in re.findall(r"`([^`]+)`", cells[0]):
            regex = ""
            for part in re.split(r"(<[a-z0-9_ ]+>)", pattern):
                if part == "<who>":  # a client address (an IPv6 one has colons)
                    regex += r".+?"
                elif part.startswith("<"):
                    regex += r"\{?[^:{}]+\}?"
                else:
                    regex += re.escape(part)
            out.append((pattern, re.compile(r"(\{tours\}:)?" + regex + r"$"),
                        "none" in cells[2].lower()))
    assert len(out) >= 15, out
    return out


def test_the_documented_families_cover_the_key_layout() -> None:
    names = [p for p, _, _ in families()]
    for needed in ("game:<id>", "game:<id>:idem", "bot:<id>", "token:<sha256>",
                   "games:all", "deadlines", "quota:<what>:<who>:<window>"):
        assert needed in names, needed


def play(api: Api, game_id: str, tokens: dict[str, str], rng: random.Random,
         store: Store) -> None:
    """Game ``game_id`` to its end, each seat's bot choosing at random."""
    while (game := store.get_game(game_id)).status != "finished":
        token = tokens[game.seats[game.state.turn]]
        v = api.view(game_id, token).json
        r = api.act(game_id, token, rng.choice(v["legal_actions"]))
        assert r.status_code == 200, r.json


def test_after_a_run_no_key_lives_for_ever_unless_it_is_listed(key_prefix, redis_client,
                                                               keys) -> None:
    app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                      "ARENA_ADMIN_TOKEN": ADMIN_TOKEN, "TESTING": True})  # defaults
    api = Api(app.test_client())
    store = app.extensions["arena"].store
    rng = random.Random(22)
    accounts = house.ensure_accounts(Store(redis_client, key_prefix))
    house.beat(Store(redis_client, key_prefix))
    tokens: dict[str, str] = {b: t for b, t in accounts.values()}

    unused = [api.bot(f"idle{i}")[0] for i in range(3)]  # registered, never played
    _, waiting_token = api.bot("waiter")
    waiting = api.game(waiting_token, 2)  # never starts
    players = dict(api.bot(f"p{i}") for i in range(4))
    tokens.update(players)
    ids = list(players)
    finished = api.game(players[ids[0]], 2, seats=ids[:2], variants={"target": 3})
    play(api, finished["id"], tokens, rng, store)
    live = api.game(players[ids[2]], 4, seats=ids, seed=3, move_limit=30)  # under way
    game = store.get_game(live["id"])
    token = tokens[game.seats[game.state.turn]]
    legal = api.view(live["id"], token).json["legal_actions"]
    keyed = api.act(live["id"], token, legal[0], headers={"Idempotency-Key": "k1"})
    assert keyed.status_code == 200, keyed.json  # a retry memory
    r = api.c.post("/house/games", json={"players": 2, "variants": {"target": 3}})
    assert r.status_code == 201, r.json
    person = r.json["player"]
    tokens[person["id"]] = person["token"]
    play(api, r.json["game"]["id"], tokens, rng, store)
    r = api.c.post("/house/games", json={"players": 2}, headers=api.auth(players[ids[3]]))
    assert r.status_code == 201
    t = api.c.post("/tournaments", headers=ADMIN,
                   json={"entrants": ids[:2], "format": "round_robin",
                         "games_per_pairing": 1, "variants": {"target": 3}}).json
    gid = next(g["game_id"] for rnd in t["rounds"] for g in rnd["games"] if g["game_id"])
    play(api, gid, tokens, rng, store)
    app.extensions["tournaments"].advance_all()
    assert api.c.post("/ladders/2p/entry", json={}, headers=api.auth(players[ids[3]])
                      ).status_code == 200
    api.c.get("/games")
    api.c.get(f"/games/{waiting['id']}")

    docs = families()
    undocumented, forever_but_expiring = [], []
    for raw in redis_client.scan_iter(match=f"{key_prefix}*", count=1000):
        name = raw.decode()[len(key_prefix):]
        ttl = redis_client.ttl(raw)
        row = next(((p, kept) for p, rx, kept in docs if rx.match(name)), None)
        if row is None:
            undocumented.append(name)
        elif ttl == -1 and not row[1]:
            forever_but_expiring.append((name, row[0]))
    assert undocumented == [], "keys of no family docs/operations.md lists"
    assert forever_but_expiring == [], "keys without expiry of a family that expires"

    # and within the families kept for ever only in some cases, those cases
    for bot in unused:
        assert redis_client.ttl(keys.bot(bot)) > 0
    assert redis_client.ttl(keys.bot(person["id"])) > 0  # a person's account
    for game_id in (waiting["id"], finished["id"], live["id"]):
        assert redis_client.ttl(keys.game(game_id)) > 0, game_id
    assert redis_client.ttl(keys.game(gid)) == -1  # a tournament's game
    for bot in ids:
        assert redis_client.ttl(keys.bot(bot)) == -1  # they played
