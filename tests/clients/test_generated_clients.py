"""The contract through the tools bot authors use, each with its default
settings and a pinned version, against ``openapi.yaml`` and a real service (gunicorn, Redis):

* seven generators make a client that compiles and plays a whole game: openapi-fetch
  (with openapi-typescript's types), @hey-api/openapi-ts (plain, and with its zod
  plugin), orval, swagger-typescript-api and openapi-zod-client (TypeScript, pinned by
  ``tests/clients/generated/package.json``; compiled by ``tsc``, played by ``tsx``), and
  openapi-python-generator and datamodel-code-generator (Python, pinned in the `test`
  extra); the same clients play on when every object of every answer gains a member;
* openapi-typescript and @hey-api/openapi-ts: the types they generate compile a bot's
  ordinary requests (a game with ONE house rule changed, a house game, a tournament) and
  refuse wrong ones (``tests/clients/generated/src/*.ts``);
* openapi-python-client: the client it generates plays whole games, reads the CSV export
  (its own operation, read as text) and the JSON one, with readable enum members;
* schemathesis (every check): each event of ``GET /games/{id}/events`` is validated
  against its kind's schema (the stream's schema is one event, ``data`` a JSON
  ``contentSchema``), and a schema the events do not meet is reported.

A tool that is missing skips here and fails in CI (``tests.conftest.missing``).
"""

from __future__ import annotations

import contextlib
import copy
import csv
import fcntl
import hashlib
import http.server
import importlib
import io
import json
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
import requests

from tests.clients.conftest import ADMIN_TOKEN
from tests.conftest import missing
from tests.contract import CONTRACT, load_yaml

EXPECTED_S = 150  # seconds, the whole module: the order workers take it in (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
TS = ROOT / "tests" / "clients" / "generated"
STAMP = "node_modules/.arena-lock-sha256"  # the package-lock.json that node_modules matches
TOOL_TIMEOUT = 300.0
# The first test of the module also builds every client (seven tools, each bounded by
# TOOL_TIMEOUT): the session's per-test timeout is a hang guard, and this build is no hang
# on a loaded machine.
pytestmark = pytest.mark.timeout(8 * TOOL_TIMEOUT)
MAX_ACTIONS = 2000  # a 3-point game is far shorter; the bound only stops a broken loop
PACKAGE = "all_fours_arena_client"  # openapi-python-client's name for the contract's title


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=TOOL_TIMEOUT,
                          check=False)


# --- TypeScript ---------------------------------------------------------------------------

# the TypeScript generators, each with its script in tests/clients/generated/src/play/
TS_PLAYERS = {
    "openapi-fetch": "openapi_fetch",  # openapi-typescript's types + openapi-fetch
    "hey-api": "hey_api",
    "hey-api-zod": "hey_api_zod",  # every answer parsed by the generated zod schema
    "orval": "orval",
    "swagger-typescript-api": "swagger_typescript_api",
    "openapi-zod-client": "openapi_zod_client",  # Zodios validates every answer
}
TS_GENERATE = ("gen:openapi-typescript", "gen:hey-api", "gen:hey-api-zod", "gen:orval",
               "gen:swagger-typescript-api", "gen:openapi-zod-client")


def npm_ready() -> str:
    """npm, with tests/clients/generated/node_modules as its lock file says (``npm ci``
    once per lock file, one run at a time in a checkout)."""
    npm = shutil.which("npm")
    if not (npm and shutil.which("node")):
        missing("the generated clients need Node.js and npm: apt-get install -y nodejs npm")
    assert npm is not None
    lock = hashlib.sha256((TS / "package-lock.json").read_bytes()).hexdigest()
    stamp = TS / STAMP
    with (TS / ".build.lock").open("w") as build_lock:
        fcntl.flock(build_lock, fcntl.LOCK_EX)
        if not stamp.exists() or stamp.read_text().strip() != lock:
            done = _run([npm, "ci", "--no-audit", "--no-fund"], TS)
            assert done.returncode == 0, f"npm ci failed:\n{done.stdout}\n{done.stderr}"
            stamp.write_text(lock + "\n")
    return npm


_TS_BUILD: dict[str, str] = {}  # a build that failed, once: the module's other tests say so


@pytest.fixture(scope="module")
def ts_clients() -> str:
    """Every TypeScript generator run on openapi.yaml, and everything compiled (`tsc`:
    the generated code, the typed requests of src/*.ts and the players of src/play/)."""
    if "failed" in _TS_BUILD:
        pytest.fail(f"the TypeScript build failed (first test): {_TS_BUILD['failed']}")
    npm = npm_ready()
    _TS_BUILD["failed"] = "interrupted"  # cleared when every script has run
    with (TS / ".build.lock").open("w") as build_lock:
        fcntl.flock(build_lock, fcntl.LOCK_EX)
        for script in (*TS_GENERATE, "check"):
            done = _run([npm, "run", "-s", script], TS)
            if done.returncode != 0:
                _TS_BUILD["failed"] = f"npm run {script}"
            assert done.returncode == 0, f"npm run {script} failed:\n{done.stdout}\n{done.stderr}"
    del _TS_BUILD["failed"]
    return str(TS / "node_modules" / ".bin" / "tsx")


def test_typescript_types_compile_a_game_with_one_house_rule(ts_clients: str) -> None:
    """openapi-typescript 7 made every house rule required (each had a `default`); the
    request schemas now state their defaults in words, so `{variants: {target: 7}}` is a
    valid `GameCreate` for both generators, and `{target: "7"}` still is not (the
    `@ts-expect-error` lines of src/*.ts fail the compile if it were accepted). The
    fixture has compiled them; the typed requests are there."""
    assert (TS / "gen" / "openapi-typescript.ts").exists()
    assert (TS / "gen" / "openapi-zod-client" / "api.ts").exists()


def play_ts(tsx: str, generator: str, url: str) -> dict[str, Any]:
    done = _run([tsx, f"src/play/{TS_PLAYERS[generator]}.ts", url], TS)
    assert done.returncode == 0, f"{generator}:\n{done.stdout}\n{done.stderr}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["generator"] == generator and result["winner"] in (0, 1), result
    assert max(result["scores"]) >= 3, result
    return result


@pytest.mark.parametrize("generator", list(TS_PLAYERS))
def test_each_typescript_client_plays_a_game(ts_clients: str, live_url: str,
                                              generator: str) -> None:
    """Each generator's client, with its default settings, registers two bots, creates a
    game and plays it to the end (src/play/game.ts): openapi-zod-client's `z.enum([...,
    null])` did not compile before nullable enums became `oneOf` with null."""
    play_ts(ts_clients, generator, live_url)


# --- openapi-python-client ----------------------------------------------------------------


@pytest.fixture(scope="module")
def pyclient(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The package openapi-python-client generates from openapi.yaml, imported."""
    cli = shutil.which("openapi-python-client", path=str(Path(sys.executable).parent)) \
        or shutil.which("openapi-python-client")
    if cli is None:
        missing("openapi-python-client is in the `test` extra: pip install -e '.[test]'")
    assert cli is not None
    out = tmp_path_factory.mktemp("pyclient")
    done = _run([cli, "generate", "--path", str(ROOT / "openapi.yaml"), "--meta", "none",
                 "--output-path", str(out / PACKAGE)], out)
    assert done.returncode == 0, f"generation failed:\n{done.stdout}\n{done.stderr}"
    assert "Warning" not in done.stdout + done.stderr, done.stdout + done.stderr
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(out))
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def _mod(name: str) -> Any:
    return importlib.import_module(f"{PACKAGE}.{name}")


def _play(game_id: str, clients: dict[str, Any]) -> Any:
    """Play a game to its end with the generated calls: the bot in turn (``clients`` by
    bot id) plays its first legal action on the version it saw."""
    view_of = _mod("api.games.get_game").sync
    act = _mod("api.games.act").sync
    action_in = _mod("models.action_in").ActionIn
    view_cls = _mod("models.view").View
    view = view_of(game_id, client=next(iter(clients.values())))
    for _ in range(MAX_ACTIONS):
        assert isinstance(view, view_cls), view
        if view.status.value == "finished":
            return view
        mover = clients[view.seats[view.turn].bot_id]
        mine = view_of(game_id, client=mover)
        assert isinstance(mine, view_cls) and mine.your_turn, mine
        view = act(game_id, client=mover, body=action_in(action=mine.legal_actions[0],
                                                         version=mine.version))
    raise AssertionError(f"game {game_id} not over after {MAX_ACTIONS} actions")


def test_a_generated_python_client_plays_games_and_reads_the_csv_export(
        pyclient: ModuleType, live_url: str) -> None:
    """A 2-player game and a round-robin tournament, all through the generated calls; the
    CSV export is its own operation, so the call answers the text (it raised
    JSONDecodeError when CSV was a second media type of the JSON export)."""
    client_mod = _mod("client")
    bot_create = _mod("models.bot_create").BotCreate
    register = _mod("api.bots.register_bot").sync
    players = _mod("models.game_create_players").GameCreatePlayers
    game_create = _mod("models.game_create").GameCreate
    variants_in = _mod("models.variants_in").VariantsIn
    anonymous = client_mod.Client(base_url=live_url, raise_on_unexpected_status=True)

    first = register(client=anonymous, body=bot_create(name="gen-a"))
    a = client_mod.AuthenticatedClient(base_url=live_url, token=first.token,
                                       raise_on_unexpected_status=True)
    second = register(client=a, body=bot_create(name="gen-b"))  # the same owner: seats at once
    b = client_mod.AuthenticatedClient(base_url=live_url, token=second.token,
                                       raise_on_unexpected_status=True)
    assert [m.name for m in players] == ["TWO_PLAYERS", "FOUR_PLAYERS"]  # not VALUE_2

    # ONE house rule sent; the answer shows the rest at their defaults
    game = _mod("api.games.create_game").sync(client=a, body=game_create(
        players=players.TWO_PLAYERS, seats=[first.id, second.id],
        variants=variants_in(target=3)))
    assert game.variants.target == 3 and game.variants.tobago_kick is False
    bots = {first.id: a, second.id: b}
    end = _play(game.id, bots)
    assert end.winner in (0, 1) and max(end.scores) >= 3
    # a token is optional for the view: a spectator's plain Client is answered (the
    # generated annotation still says AuthenticatedClient: openapi-python-client reads
    # any `security` list as required, upstream issue #1372)
    watched = _mod("api.games.get_game").sync(end.id, client=anonymous)
    assert watched.seat is None and watched.status.value == "finished"

    admin = client_mod.AuthenticatedClient(base_url=live_url, token=ADMIN_TOKEN,
                                           raise_on_unexpected_status=True)
    fmt = _mod("models.tournament_create_format").TournamentCreateFormat
    created = _mod("api.tournaments.create_tournament").sync(client=admin, body=_mod(
        "models.tournament_create").TournamentCreate(
        format_=fmt.ROUND_ROBIN, entrants=[first.id, second.id], games_per_pairing=2,
        variants=variants_in(target=3)))
    assert hasattr(created, "id"), created
    detail = _mod("api.tournaments.get_tournament").sync
    for rnd in detail(created.id, client=anonymous).rounds:
        for g in rnd.games:  # both start at once (parallel games: 8 by default)
            assert g.game_id is not None, g
            _play(g.game_id, bots)
    # the last game's answer comes before the tournament records it (its after-finish
    # hooks run once the answer has gone out): a client reads the standings once the
    # tournament says it is over
    end_by = time.monotonic() + 60
    while detail(created.id, client=anonymous).status.value != "finished":
        assert time.monotonic() < end_by, "the tournament never recorded its last game"
        time.sleep(0.1)
    table = _mod("models.export_tournament_csv_table")
    read_csv = _mod("api.tournaments.export_tournament_csv").sync
    text = read_csv(created.id, client=anonymous)
    assert isinstance(text, str)
    standings = list(csv.DictReader(io.StringIO(text)))
    assert {r["bot_id"] for r in standings} == {first.id, second.id}
    assert sum(int(r["played"]) for r in standings) == 4  # two games, two entrants each
    games = list(csv.DictReader(io.StringIO(read_csv(
        created.id, client=anonymous,
        table=table.ExportTournamentCsvTable.GAMES))))
    exported = _mod("api.tournaments.export_tournament").sync(
        created.id, client=anonymous)
    assert [r["game_id"] for r in games] == [g.game_id for g in exported.games]
    assert all(r["winner"] in (first.id, second.id) for r in games), games


# --- openapi-python-generator and datamodel-code-generator --------------------------------


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        missing(f"{name} is in the `test` extra: pip install -e '.[test]'")
    assert found is not None
    return found


@contextlib.contextmanager
def _imported(path: Path, name: str) -> Iterator[ModuleType]:
    sys.path.insert(0, str(path))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(path))
        for mod in [n for n in sys.modules if n == name or n.startswith(name + ".")]:
            del sys.modules[mod]


@pytest.fixture(scope="module")
def opg_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package openapi-python-generator 2.1 generates (httpx + pydantic)."""
    out = tmp_path_factory.mktemp("opg")
    done = _run([_tool("openapi-python-generator"), str(ROOT / "openapi.yaml"), "arena_opg"],
                out)
    assert done.returncode == 0, f"generation failed:\n{done.stdout}\n{done.stderr}"
    return out


@pytest.fixture(scope="module")
def dcg_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pydantic models datamodel-code-generator makes of openapi.yaml (models only:
    the requests are the bot's own, with httpx)."""
    out = tmp_path_factory.mktemp("dcg")
    done = _run([_tool("datamodel-codegen"), "--input", str(ROOT / "openapi.yaml"),
                 "--input-file-type", "openapi", "--output", str(out / "arena_models.py")],
                out)
    assert done.returncode == 0, f"generation failed:\n{done.stdout}\n{done.stderr}"
    return out


def play_opg(path: Path, url: str) -> Any:
    """A 2-player game through openapi-python-generator's functions. Its models send
    every unset optional member as null (the service reads null as not sent), and its
    calls send `Authorization: Bearer None` without a token (registering the first bot:
    no token, where none is needed)."""
    with _imported(path, "arena_opg") as pkg:
        config = importlib.import_module("arena_opg.api_config").APIConfig
        models = importlib.import_module("arena_opg.models")
        bots = importlib.import_module("arena_opg.services.bots_service")
        games = importlib.import_module("arena_opg.services.games_service")
        assert pkg is not None
        anonymous = config(base_path=url)
        a = bots.registerBot(anonymous, data=models.BotCreate(name="opg-a"))
        as_a = config(base_path=url, access_token=a.token)
        b = bots.registerBot(as_a, data=models.BotCreate(name="opg-b"))
        as_bot = {a.id: as_a, b.id: config(base_path=url, access_token=b.token)}
        game = games.createGame(as_a, data=models.GameCreate(
            players=2, seats=[a.id, b.id], variants=models.VariantsIn(target=3)))
        for _ in range(MAX_ACTIONS):
            view = games.getGame(anonymous, game_id=game.id)
            if view.status == "finished":
                return view
            mover = as_bot[view.seats[view.turn].bot_id]
            mine = games.getGame(mover, game_id=game.id)
            assert mine.your_turn, mine
            games.act(mover, game_id=game.id, data=models.ActionIn(
                action=mine.legal_actions[0], version=mine.version))
    raise AssertionError(f"game {game.id} not over after {MAX_ACTIONS} actions")


def play_dcg(path: Path, url: str) -> Any:
    """A 2-player game with datamodel-code-generator's models: requests built from the
    request models, every answer read into its response model."""
    with _imported(path, "arena_models") as m:
        http = httpx.Client(base_url=url, timeout=30)

        def call(method: str, where: str, model: Any, token: str | None = None,
                 body: Any = None) -> Any:
            r = http.request(method, where, headers={"Authorization": f"Bearer {token}"}
                             if token else {}, json=None if body is None else
                             body.model_dump(mode="json", exclude_none=True))
            assert r.status_code < 300, r.text
            return model.model_validate(r.json())

        a = call("POST", "/bots", m.BotCreated, body=m.BotCreate(name="dcg-a"))
        b = call("POST", "/bots", m.BotCreated, a.token, m.BotCreate(name="dcg-b"))
        tokens = {a.id: a.token, b.id: b.token}
        game = call("POST", "/games", m.GameSummary, a.token, m.GameCreate(
            players=2, seats=[a.id, b.id], variants=m.VariantsIn(target=3)))
        for _ in range(MAX_ACTIONS):
            view = call("GET", f"/games/{game.id}", m.View)
            if view.status.value == "finished":
                return view
            token = tokens[view.seats[view.turn].bot_id]
            mine = call("GET", f"/games/{game.id}", m.View, token)
            call("POST", f"/games/{game.id}/actions", m.View, token,
                 m.ActionIn(action=mine.legal_actions[0], version=mine.version))
    raise AssertionError(f"game {game.id} not over after {MAX_ACTIONS} actions")


def test_an_openapi_python_generator_client_plays_a_game(opg_dir: Path, live_url: str) -> None:
    """It failed to import (`NameError: CutCard`, an array of arrays of a $ref), read
    nullable members as required, and its unset members (null) and `Bearer None` were
    refused (422, 401)."""
    end = play_opg(opg_dir, live_url)
    assert end.winner in (0, 1) and max(end.scores) >= 3


def test_datamodel_code_generator_models_play_a_game(dcg_dir: Path, live_url: str) -> None:
    """Its models of answers are open (no `extra='forbid'`); its request models stay
    closed, as the service's requests are."""
    end = play_dcg(dcg_dir, live_url)
    assert end.winner in (0, 1) and max(end.scores) >= 3
    source = (dcg_dir / "arena_models.py").read_text()
    view = source[source.index("class View(BaseModel):"):]
    assert "extra='forbid'" not in view[:view.index("\nclass ")]
    action = source[source.index("class ActionIn(BaseModel):"):]
    assert "extra='forbid'" in action[:action.index("\nclass ")]


# --- a field added to every answer -------------------------------------------------------

ADDED = "added_in_a_later_release"


class _Adding(http.server.BaseHTTPRequestHandler):
    """A proxy to the live service that adds a member to every JSON object of every JSON
    answer, as a later release within the same version may (docs/versions.md)."""

    upstream = ""
    protocol_version = "HTTP/1.1"

    def log_message(self, *_: Any) -> None:
        pass

    def _forward(self) -> None:
        size = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(size) if size else None
        keep = {k: v for k, v in self.headers.items()
                if k.lower() in ("authorization", "content-type", "accept", "if-match",
                                 "idempotency-key", "arena-api-version")}
        r = requests.request(self.command, self.upstream + self.path, headers=keep,
                             data=body, timeout=30, allow_redirects=False)
        out = r.content
        if r.headers.get("Content-Type", "").split(";")[0].endswith("json"):
            out = json.dumps(_add_everywhere(r.json())).encode()
        self.send_response(r.status_code)
        for k, v in r.headers.items():
            if k.lower() not in ("content-length", "content-encoding", "transfer-encoding",
                                 "connection"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_DELETE = _forward


def _add_everywhere(value: Any) -> Any:
    if isinstance(value, dict):
        return {**{k: _add_everywhere(v) for k, v in value.items()},
                ADDED: {"note": "a member this client has never heard of", "n": [1, 2]}}
    if isinstance(value, list):
        return [_add_everywhere(v) for v in value]
    return value


@pytest.fixture(scope="module")
def adding_url(live_url: str) -> Iterator[str]:
    handler = type("Adding", (_Adding,), {"upstream": live_url})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    CONTRACT.fake(url)  # it answers more than the contract names: that is its point
    try:
        yield url
    finally:
        CONTRACT.real(url)
        server.shutdown()
        server.server_close()


def test_generated_clients_play_on_when_an_answer_gains_a_member(
        adding_url: str, ts_clients: str, opg_dir: Path, dcg_dir: Path) -> None:
    """Every object of every answer gains a member no schema names: each generated client
    still plays a whole game, the validating ones too (zod through openapi-zod-client
    and hey-api, pydantic through datamodel-code-generator and openapi-python-generator).
    With `additionalProperties: false` on the answers, datamodel-code-generator's models
    were `extra='forbid'` and refused the first one."""
    seen = requests.get(f"{adding_url}/healthz", timeout=10).json()
    assert ADDED in seen  # the proxy really adds it
    for generator in TS_PLAYERS:
        play_ts(ts_clients, generator, adding_url)
    assert play_opg(opg_dir, adding_url).winner in (0, 1)
    assert play_dcg(dcg_dir, adding_url).winner in (0, 1)


# --- schemathesis on the event stream ---------------------------------------------------


def _finished_game(url: str) -> tuple[str, str]:
    """A finished 2-player game (its stream ends, so an answer is whole) and a seat's
    token."""
    r = requests.post(f"{url}/bots", json={"name": "sse-a"}, timeout=10)
    a = r.json()
    b = requests.post(f"{url}/bots", json={"name": "sse-b"}, timeout=10,
                      headers={"Authorization": f"Bearer {a['token']}"}).json()
    tokens = {a["id"]: a["token"], b["id"]: b["token"]}
    game = requests.post(f"{url}/games", timeout=10, json={
        "players": 2, "seats": [a["id"], b["id"]], "variants": {"target": 2}},
        headers={"Authorization": f"Bearer {a['token']}"}).json()
    seats = [a["id"], b["id"]]
    for _ in range(MAX_ACTIONS):
        view = requests.get(f"{url}/games/{game['id']}", timeout=10).json()
        if view["status"] == "finished":
            return game["id"], a["token"]
        auth = {"Authorization": f"Bearer {tokens[seats[view['turn']]]}"}
        mine = requests.get(f"{url}/games/{game['id']}", headers=auth, timeout=10).json()
        r = requests.post(f"{url}/games/{game['id']}/actions", headers=auth, timeout=10,
                          json={"action": mine["legal_actions"][0], "version": mine["version"]})
        assert r.status_code == 200, r.text
    raise AssertionError("the game did not end")


def _stream_operation(url: str, doc: dict[str, Any]) -> Any:
    import schemathesis
    from schemathesis.config import SchemathesisConfig

    # every event of the stream (schemathesis stops reading a stream at 10 by default)
    config = SchemathesisConfig.from_dict({"max-stream-events": MAX_ACTIONS})
    schema = schemathesis.openapi.from_dict(doc, config=config)
    schema.config.update(base_url=url)
    return schema["/games/{game_id}/events"]["GET"]


def test_schemathesis_validates_every_event_of_the_stream(live_url: str) -> None:
    """With every check, a whole stream (a seat's, a spectator's, resumed) passes; the
    same stream against a schema whose `deal` events need a field they lack fails, so the
    events really are validated one by one (ST108 on `GET /games/{id}/events` before)."""
    from schemathesis.checks import CHECKS, load_all_checks
    from schemathesis.core.failures import FailureGroup

    load_all_checks()
    checks = list(CHECKS.get_all())
    game_id, token = _finished_game(live_url)
    doc = load_yaml((ROOT / "openapi.yaml").read_text())
    op = _stream_operation(live_url, doc)
    # resumed from the stream's own second and fourth event ids (a game of random deals
    # may end in fewer hands than a fixed id would assume)
    ids = re.findall(r"^id: (\S+)$", requests.get(
        f"{live_url}/games/{game_id}/events", timeout=30).text, flags=re.M)
    assert len(ids) >= 5, ids
    for headers, query in (({"Authorization": f"Bearer {token}"}, {}), ({}, {}),
                           ({}, {"last_event_id": ids[1]}), ({"Last-Event-ID": ids[3]}, {})):
        case = op.Case(path_parameters={"game_id": game_id}, headers=headers, query=query)
        response = case.call_and_validate(checks=checks)
        assert response.status_code == 200 and "event: game_over" in response.text

    broken = copy.deepcopy(doc)
    deal = broken["components"]["schemas"]["DealEvent"]
    deal["required"] = [*deal["required"], "never_sent"]
    case = _stream_operation(live_url, broken).Case(path_parameters={"game_id": game_id})
    with pytest.raises((FailureGroup, AssertionError)) as caught:
        case.call_and_validate(checks=checks)
    said = str(caught.value)
    assert "ST108" in said and '"event": "deal"' in said, said
