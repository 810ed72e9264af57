"""A second language: the strict TypeScript bot (clients/typescript/) plays whole 2- and
4-player games against the Python bots through the real service (gunicorn, Redis), validating
every answer it gets against openapi.yaml.

Its types are generated from openapi.yaml at build time (openapi-typescript), so a contract
change that breaks a client fails ``npm run build`` here; its answers are checked against the
same file at run time (Ajv), so a response the contract does not allow fails the game. The
build also refuses `any`, casts and non-null assertions in the hand-written sources.

The games are seeded (deal, the Python random bot, the TS bot's choices) so a run replays;
only the race of two processes for one seat varies with timing.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from clients.api import ArenaClient
from clients.runner import BotRunner
from clients.strategies.base import RandomStrategy
from tests.clients.conftest import first_line, kill_bots
from tests.conftest import missing
from tests.contract import load_yaml

EXPECTED_S = 80  # seconds, the whole module: the order workers take it in (tests/conftest.py)

if TYPE_CHECKING:
    from tests.clients.conftest import TcpProxy

ROOT = Path(__file__).resolve().parents[2]
TS = ROOT / "clients" / "typescript"
BUILD_TIMEOUT = 300.0
GAME_TIMEOUT = 90.0
STAMP = "node_modules/.arena-lock-sha256"  # the package-lock.json that node_modules matches


def _npm() -> str:
    node, npm = shutil.which("node"), shutil.which("npm")
    if not (node and npm):
        missing("the TypeScript bot needs Node.js and npm: apt-get install -y nodejs npm")
    assert npm is not None
    return npm


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=BUILD_TIMEOUT,
                          check=False)


@pytest.fixture(scope="session")
def ts_bot() -> Path:
    """``npm ci`` (skipped while node_modules matches package-lock.json) and ``npm run build``
    (generate the types from openapi.yaml, tsc --strict, the escape-hatch check)."""
    npm = _npm()
    lock = hashlib.sha256((TS / "package-lock.json").read_bytes()).hexdigest()
    stamp = TS / STAMP
    # one build at a time in this checkout (two test runs at once would race in node_modules)
    with (TS / ".build.lock").open("w") as build_lock:
        fcntl.flock(build_lock, fcntl.LOCK_EX)
        if not stamp.exists() or stamp.read_text().strip() != lock:
            done = _run([npm, "ci", "--no-audit", "--no-fund"], TS)
            assert done.returncode == 0, f"npm ci failed:\n{done.stdout}\n{done.stderr}"
            stamp.write_text(lock + "\n")
        built = _run([npm, "run", "build"], TS)
    assert built.returncode == 0, f"npm run build failed:\n{built.stdout}\n{built.stderr}"
    return TS / "dist" / "bot.js"


def _start(bot: Path, url: str, **env: str) -> subprocess.Popen[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    environ.update(ARENA_URL=url, **env)
    return subprocess.Popen(["node", str(bot)], env=environ, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen[str]) -> tuple[dict[str, Any], str]:
    """Wait for a TS bot; its last stdout line is its summary."""
    try:
        out, err = proc.communicate(timeout=GAME_TIMEOUT)
    finally:
        kill_bots(proc)
    assert proc.returncode == 0, f"the TS bot failed:\n{err}"
    return json.loads(out.strip().splitlines()[-1]), err


class PythonBots:
    """Python bots (``BotRunner``), each on its own thread, stopped at the end."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.runners: list[BotRunner] = []
        self.threads: list[threading.Thread] = []
        self.owner_token: str | None = None

    def register(self, name: str, owner: str | None = None) -> ArenaClient:
        """A new bot's client: of the owner of the bot with token ``owner``; by default of
        the owner of this test's first bot (a game naming two of them seats both at once)."""
        client = ArenaClient(self.url)
        client.register(name, owner=owner or self.owner_token)
        self.owner_token = self.owner_token or client.token
        return client

    def run(self, client: ArenaClient, strategy: Any) -> BotRunner:
        runner = BotRunner(client, strategy, max_games=1, poll_timeout=1, check_every=0.5)
        thread = threading.Thread(target=runner.run, daemon=True)
        thread.start()
        self.runners.append(runner)
        self.threads.append(thread)
        return runner

    def join(self) -> None:
        for thread in self.threads:
            thread.join(15)
        assert not any(t.is_alive() for t in self.threads)

    def stop(self) -> None:
        for runner in self.runners:
            runner.stop()
        for thread in self.threads:
            thread.join(15)


@pytest.fixture
def python_bots(live_url: str) -> Iterator[PythonBots]:
    bots = PythonBots(live_url)
    yield bots
    bots.stop()


def _assert_played_cleanly(summary: dict[str, Any], game_id: str) -> None:
    """The TS bot finished this game, moved, and every answer it got fit the contract."""
    assert [g["game"] for g in summary["games"]] == [game_id]
    assert summary["actions"] > 0 and summary["games"][0]["actions"] == summary["actions"]
    assert summary["validated"] > summary["actions"]  # the turn polls and the actions
    assert summary["contract_failures"] == 0
    assert summary["illegal"] == 0


@pytest.mark.timeout(BUILD_TIMEOUT + GAME_TIMEOUT)
def test_the_typescript_bot_registers_and_plays_a_2_player_game_against_a_python_bot(
    ts_bot: Path, live_url: str, python_bots: PythonBots
) -> None:
    proc = _start(ts_bot, live_url, ARENA_NAME="ts-bot", ARENA_SEED="2")
    try:
        # it registers itself (POST /bots) and prints its id and token first
        me = json.loads(first_line(proc, 30))
        assert ArenaClient(live_url, token=me["token"]).me().id == me["id"]

        python = python_bots.register("py-random", owner=me["token"])  # the TS bot's owner
        game = python.create_game(2, seats=[me["id"], python.me().id], seed=11)
        runner = python_bots.run(python, RandomStrategy(seed=11))
        summary, err = _finish(proc)
        python_bots.join()
    finally:
        kill_bots(proc)

    _assert_played_cleanly(summary, game.id)
    assert f"playing game {game.id}" in err
    view = ArenaClient(live_url).game(game.id)
    assert view.finished and summary["games"][0]["winner"] == view.winner is not None
    record = ArenaClient(live_url).record(game.id)
    assert record.complete and max(record.scores) >= view.raw["target"]
    # every action in the record was made by one of the two bots, none by a timeout
    assert summary["actions"] + runner.stats.actions == len(record.actions)
    assert runner.stats.strategy_errors == 0 and not record.raw["timeouts"]


@pytest.mark.timeout(BUILD_TIMEOUT + GAME_TIMEOUT)
def test_two_typescript_bots_play_a_4_player_game_with_the_python_bots(
    ts_bot: Path, live_url: str, python_bots: PythonBots
) -> None:
    """Teams are seats 0+2 and 1+3: each TS bot partners a Python bot (random, heuristic).
    One TS bot finds its turns with ``GET /bots/me/turns``, the other is told the game."""
    ts_a, ts_b = python_bots.register("ts-a"), python_bots.register("ts-b")
    random_bot, heuristic_bot = python_bots.register("py-random"), python_bots.register("py-h")
    seats = [ts_a.me().id, ts_b.me().id, random_bot.me().id, heuristic_bot.me().id]
    game = random_bot.create_game(4, seats=seats, seed=5)
    assert ts_a.token is not None and ts_b.token is not None
    procs = [
        _start(ts_bot, live_url, ARENA_TOKEN=ts_a.token, ARENA_SEED="3"),
        _start(ts_bot, live_url, ARENA_TOKEN=ts_b.token, ARENA_SEED="4", ARENA_GAME=game.id),
    ]
    try:
        runners = [python_bots.run(random_bot, RandomStrategy(seed=5)),
                   python_bots.run(heuristic_bot, "heuristic")]
        summaries = [_finish(p)[0] for p in procs]
        python_bots.join()
    finally:
        kill_bots(*procs)

    for summary in summaries:
        _assert_played_cleanly(summary, game.id)
    view = ArenaClient(live_url).game(game.id)
    assert view.finished and view.winner is not None
    assert {s["games"][0]["seat"] for s in summaries} == {0, 1}
    assert all(s["games"][0]["winner"] == view.winner for s in summaries)
    record = ArenaClient(live_url).record(game.id)
    assert record.complete and not record.raw["timeouts"]
    assert sum(s["actions"] for s in summaries) + sum(r.stats.actions for r in runners) \
        == len(record.actions)


@pytest.mark.timeout(BUILD_TIMEOUT + GAME_TIMEOUT)
def test_two_typescript_bots_racing_for_one_seat_re_read_after_409(
    ts_bot: Path, live_url: str, python_bots: PythonBots
) -> None:
    """Two processes with one token play the same seat: both wake on the same turn and
    post on the same version; one is applied, the other gets a 409 (version-conflict or
    not-your-turn, a documented problem) and reads the game again. Neither crashes, and
    together they make exactly the seat's moves. Which twin wins each race (and so the
    choices) varies from run to run: a tied Game (R20) is made impossible here
    (``game_tie: non_dealer``), as it has a test of its own."""
    ts = python_bots.register("ts-twin")
    python = python_bots.register("py-random")
    game = python.create_game(2, seats=[ts.me().id, python.me().id], seed=3,
                              variants={"game_tie": "non_dealer"})
    assert ts.token is not None
    procs = [_start(ts_bot, live_url, ARENA_TOKEN=ts.token, ARENA_SEED=str(n),
                    ARENA_GAME=game.id) for n in (6, 7)]
    try:
        runner = python_bots.run(python, RandomStrategy(seed=3))
        summaries = [_finish(p)[0] for p in procs]
        python_bots.join()
    finally:
        kill_bots(*procs)

    for summary in summaries:
        assert summary["contract_failures"] == 0 and summary["illegal"] == 0
        assert [g["game"] for g in summary["games"]] == [game.id]
    assert sum(s["conflicts"] for s in summaries) > 0
    record = ArenaClient(live_url).record(game.id)
    assert record.complete
    assert sum(s["actions"] for s in summaries) + runner.stats.actions == len(record.actions)


@pytest.mark.timeout(BUILD_TIMEOUT + GAME_TIMEOUT)
def test_a_lost_answer_is_retried_by_the_typescript_bot_with_the_same_key(
    ts_bot: Path, live_url: str, python_bots: PythonBots, proxy: TcpProxy
) -> None:
    """Through a proxy that cuts the connection after the service has applied the bot's
    first action: the bot sends the same request with the same Idempotency-Key, gets the
    first answer, and the action counts once."""
    ts = python_bots.register("ts-retry")
    python = python_bots.register("py-random")
    game = python.create_game(2, seats=[ts.me().id, python.me().id], seed=11)
    assert ts.token is not None
    proxy.drop_next_action.set()
    proc = _start(ts_bot, proxy.url, ARENA_TOKEN=ts.token, ARENA_SEED="2")
    runner = python_bots.run(python, RandomStrategy(seed=11))
    try:
        summary, _ = _finish(proc)
        python_bots.join()
    finally:
        python_bots.stop()

    _assert_played_cleanly(summary, game.id)
    assert proxy.dropped == 1 and summary["retries"] >= 1
    keys = [_header(h, "Idempotency-Key") for h in proxy.action_heads()]
    assert keys[0] is not None and keys[0] == keys[1]  # the retry
    assert len(set(keys)) == len(keys) - 1  # every other action has a key of its own
    record = ArenaClient(live_url).record(game.id)
    assert record.complete
    assert summary["actions"] + runner.stats.actions == len(record.actions)


def _header(head: str, name: str) -> str | None:
    for line in head.split("\r\n")[1:]:
        key, _, value = line.partition(":")
        if key.strip().lower() == name.lower():
            return value.strip()
    return None


def _team_may_be_null() -> bool:
    team = load_yaml((ROOT / "openapi.yaml").read_text())["components"]["schemas"][
        "ScoreItem"]["properties"]["team"]
    return "null" in json.dumps(team)


@pytest.mark.xfail(not _team_may_be_null(), strict=True,
                   reason="a tied Game (R20) scores team null, which "
                          "openapi.yaml's ScoreItem.team (an integer) does not allow")
@pytest.mark.timeout(BUILD_TIMEOUT + GAME_TIMEOUT)
def test_the_typescript_bot_plays_through_a_tied_game_point(
    ts_bot: Path, live_url: str, python_bots: PythonBots
) -> None:
    """R20 with the default ``game_tie: nobody``: when both teams have as many card points,
    nobody scores Game and the hand's items say so (team null). These seeds deal such a
    hand; the TS bot must take those answers as the contract's."""
    ts = python_bots.register("ts-tie")
    python = python_bots.register("py-random")
    game = python.create_game(2, seats=[ts.me().id, python.me().id], seed=1)
    assert ts.token is not None
    proc = _start(ts_bot, live_url, ARENA_TOKEN=ts.token, ARENA_SEED="1")
    python_bots.run(python, RandomStrategy(seed=1))
    try:
        summary, _ = _finish(proc)
    finally:
        python_bots.stop()
    _assert_played_cleanly(summary, game.id)
    items = [i for h in ArenaClient(live_url).record(game.id).hands for i in h["items"]]
    assert any(i["item"] == "game" and i["team"] is None for i in items)


@pytest.mark.timeout(BUILD_TIMEOUT + GAME_TIMEOUT)
def test_an_answer_the_contract_does_not_allow_stops_the_typescript_bot(
    ts_bot: Path, live_url: str, tmp_path: Path
) -> None:
    """The run-time check is real: against a contract in which a Bot must also carry a field
    the service does not send, the bot's first answer (GET /bots/me) fails loudly."""
    spec = load_yaml((ROOT / "openapi.yaml").read_text())
    me = spec["paths"]["/bots/me"]["get"]["responses"]["200"]["content"]["application/json"]
    schema = me["schema"]["$ref"].rsplit("/", 1)[1]  # the schema GET /bots/me answers with
    spec["components"]["schemas"][schema]["required"].append("favourite_card")
    contract = tmp_path / "openapi.yaml"
    contract.write_text(yaml.safe_dump(spec))
    token = ArenaClient(live_url).register("ts-strict").token
    proc = _start(ts_bot, live_url, ARENA_TOKEN=token, ARENA_OPENAPI=str(contract))
    _, err = proc.communicate(timeout=GAME_TIMEOUT)
    assert proc.returncode == 1
    assert "does not match openapi.yaml: GET /bots/me -> 200" in err
    assert "favourite_card" in err


def _breaks_legal_actions(spec: dict[str, Any], src: Path) -> None:
    view = spec["components"]["schemas"]["View"]
    view["properties"]["legal_moves"] = view["properties"].pop("legal_actions")
    view["required"] = ["legal_moves" if r == "legal_actions" else r for r in view["required"]]


def _adds_a_cast(spec: dict[str, Any], src: Path) -> None:
    (src / "cast.ts").write_text("export const seat = JSON.parse('1') as number;\n")


@pytest.mark.timeout(BUILD_TIMEOUT)
@pytest.mark.parametrize(("change", "expected"), [
    (_breaks_legal_actions, "error TS2339: Property 'legal_actions' does not exist"),
    (_adds_a_cast, "type assertion `as`"),
])  # fmt: skip
def test_the_build_fails_when_the_contract_breaks_the_bot_or_the_source_casts(
    ts_bot: Path, tmp_path: Path, change: Any, expected: str
) -> None:
    """``npm run build`` on a copy of the bot next to a changed openapi.yaml (or with a
    cast in its source) fails, naming what broke."""
    copy = tmp_path / "clients" / "typescript"
    copy.mkdir(parents=True)
    for name in ("package.json", "package-lock.json", "tsconfig.json"):
        shutil.copy(TS / name, copy / name)
    for name in ("src", "scripts"):
        shutil.copytree(TS / name, copy / name, ignore=shutil.ignore_patterns("generated"))
    shutil.copytree(TS / "dist", copy / "dist")  # tsc's incremental state: a quicker build
    (copy / "node_modules").symlink_to(TS / "node_modules")
    spec = load_yaml((ROOT / "openapi.yaml").read_text())
    change(spec, copy / "src")
    (tmp_path / "openapi.yaml").write_text(yaml.safe_dump(spec))

    built = _run([_npm(), "run", "build"], copy)
    assert built.returncode != 0
    assert expected in built.stdout + built.stderr
