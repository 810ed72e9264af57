"""The contract through the tools bot authors use (issue 24), each with its default settings,
against ``openapi.yaml`` and a real service (gunicorn, Redis):

* openapi-typescript and @hey-api/openapi-ts: the types they generate compile a bot's
  ordinary requests (a game with ONE house rule changed, a house game, a tournament) and
  refuse wrong ones (``tests/clients/generated/``, ``tsc --noEmit``);
* openapi-python-client: the client it generates plays whole games, reads the CSV export
  (its own operation, read as text) and the JSON one, with readable enum members;
* schemathesis (every check): each event of ``GET /games/{id}/events`` is validated
  against its kind's schema (the stream's schema is one event, ``data`` a JSON
  ``contentSchema``), and a schema the events do not meet is reported.

A tool that is missing skips here and fails in CI (``tests.conftest.missing``).
"""

from __future__ import annotations

import copy
import csv
import fcntl
import hashlib
import importlib
import io
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import requests

from tests.clients.conftest import ADMIN_TOKEN
from tests.conftest import missing
from tests.contract import load_yaml

EXPECTED_S = 30  # seconds, the whole module: the order workers take it in (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
TS = ROOT / "tests" / "clients" / "generated"
STAMP = "node_modules/.arena-lock-sha256"  # the package-lock.json that node_modules matches
TOOL_TIMEOUT = 300.0
MAX_ACTIONS = 2000  # a 3-point game is far shorter; the bound only stops a broken loop
PACKAGE = "all_fours_arena_client"  # openapi-python-client's name for the contract's title


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=TOOL_TIMEOUT,
                          check=False)


# --- TypeScript ---------------------------------------------------------------------------


def test_typescript_types_compile_a_game_with_one_house_rule() -> None:
    """openapi-typescript 7 made every house rule required (each had a `default`); the
    request schemas now state their defaults in words, so `{variants: {target: 7}}` is a
    valid `GameCreate` for both generators, and `{target: "7"}` still is not."""
    npm = shutil.which("npm")
    if not (npm and shutil.which("node")):
        missing("the generated-types check needs Node.js and npm: apt-get install -y nodejs npm")
    assert npm is not None
    lock = hashlib.sha256((TS / "package-lock.json").read_bytes()).hexdigest()
    stamp = TS / STAMP
    with (TS / ".build.lock").open("w") as build_lock:  # one run at a time in a checkout
        fcntl.flock(build_lock, fcntl.LOCK_EX)
        if not stamp.exists() or stamp.read_text().strip() != lock:
            done = _run([npm, "ci", "--no-audit", "--no-fund"], TS)
            assert done.returncode == 0, f"npm ci failed:\n{done.stdout}\n{done.stderr}"
            stamp.write_text(lock + "\n")
        for script in ("gen:openapi-typescript", "gen:hey-api", "check"):
            done = _run([npm, "run", "-s", script], TS)
            assert done.returncode == 0, f"npm run {script} failed:\n{done.stdout}\n{done.stderr}"


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
    view_of = _mod("api.games.get_games_game_id").sync
    act = _mod("api.games.post_games_game_id_actions").sync
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
    register = _mod("api.bots.post_bots").sync
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
    game = _mod("api.games.post_games").sync(client=a, body=game_create(
        players=players.TWO_PLAYERS, seats=[first.id, second.id],
        variants=variants_in(target=3)))
    assert game.variants.target == 3 and game.variants.tobago_kick is False
    bots = {first.id: a, second.id: b}
    end = _play(game.id, bots)
    assert end.winner in (0, 1) and max(end.scores) >= 3
    # a token is optional for the view: a spectator's plain Client is answered (the
    # generated annotation still says AuthenticatedClient: openapi-python-client reads
    # any `security` list as required, upstream issue #1372)
    watched = _mod("api.games.get_games_game_id").sync(end.id, client=anonymous)
    assert watched.seat is None and watched.status.value == "finished"

    admin = client_mod.AuthenticatedClient(base_url=live_url, token=ADMIN_TOKEN,
                                           raise_on_unexpected_status=True)
    fmt = _mod("models.tournament_create_format").TournamentCreateFormat
    created = _mod("api.tournaments.post_tournaments").sync(client=admin, body=_mod(
        "models.tournament_create").TournamentCreate(
        format_=fmt.ROUND_ROBIN, entrants=[first.id, second.id], games_per_pairing=2,
        variants=variants_in(target=3)))
    assert hasattr(created, "id"), created
    detail = _mod("api.tournaments.get_tournaments_tournament_id").sync
    for rnd in detail(created.id, client=anonymous).rounds:
        for g in rnd.games:  # both start at once (parallel games: 8 by default)
            assert g.game_id is not None, g
            _play(g.game_id, bots)
    table = _mod("models.get_tournaments_tournament_id_export_csv_table")
    read_csv = _mod("api.tournaments.get_tournaments_tournament_id_export_csv").sync
    text = read_csv(created.id, client=anonymous)
    assert isinstance(text, str)
    standings = list(csv.DictReader(io.StringIO(text)))
    assert {r["bot_id"] for r in standings} == {first.id, second.id}
    assert sum(int(r["played"]) for r in standings) == 4  # two games, two entrants each
    games = list(csv.DictReader(io.StringIO(read_csv(
        created.id, client=anonymous,
        table=table.GetTournamentsTournamentIdExportCsvTable.GAMES))))
    exported = _mod("api.tournaments.get_tournaments_tournament_id_export").sync(
        created.id, client=anonymous)
    assert [r["game_id"] for r in games] == [g.game_id for g in exported.games]
    assert all(r["winner"] in (first.id, second.id) for r in games), games


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
