"""The hooks of a game ended by a move wait until the move's answer has been taken by the
server to be written (``service.arena.games.after_finish``: the request's ``Gate``), so
under gevent they never run before the answer goes out; a request that fails after its
commit still hands its game over at once."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from werkzeug.test import EnvironBuilder

from service.http.games import routes
from service.storage.store import Game
from tests.service.conftest import Api
from tests.service.games.test_after_finish import one_game_tournament

EXPECTED_S = 5  # seconds, the whole module: the order workers take it in (tests/conftest.py)


def wsgi_act(app: Any, gid: str, token: str, action: str, version: int
             ) -> tuple[str, Iterator[bytes]]:
    """POST the action through the WSGI app as a server would: (status, the body not yet
    taken)."""
    environ = EnvironBuilder(path=f"/games/{gid}/actions", method="POST",
                             json={"action": action, "version": version},
                             headers={"Authorization": f"Bearer {token}"},
                             environ_base={"REMOTE_ADDR": "127.0.0.1"}).get_environ()
    got: dict[str, str] = {}

    def start(status: str, headers: Any, exc_info: Any = None) -> Any:
        got["status"] = status
        return lambda data: None

    body = app(environ, start)
    return got["status"], body


def the_last_move(api: Api, app: Any, gid: str, bots: dict[str, str]
                  ) -> tuple[str, Iterator[bytes]]:
    """Random legal moves through the WSGI app until one ends the game: its status and
    its body, not yet taken (every other move's body is taken and closed)."""
    rng = random.Random(3)
    for _ in range(2000):
        spec = api.view(gid).json
        token = bots[spec["seats"][spec["turn"]]["bot_id"]]
        v = api.view(gid, token).json
        status, body = wsgi_act(app, gid, token, rng.choice(v["legal_actions"]), v["version"])
        if api.view(gid).json["status"] == "finished":
            return status, body
        assert status.startswith("200"), (status, b"".join(body))
        b"".join(body)
        body.close()  # type: ignore[attr-defined]
    raise AssertionError("the game did not end")


@pytest.fixture
def heard(app: Any) -> Iterator[list[str]]:
    """The games the after-finish hooks ran for, with gates that wait a minute."""
    arena = app.extensions["arena"]
    ran: list[str] = []

    def hook(game: Game) -> None:
        ran.append(game.id)

    arena.on_finish.insert(0, hook)
    arena.after_finish.gate_s = 60.0
    yield ran


def test_the_hooks_wait_until_the_answer_is_taken(api: Api, app: Any,
                                                  heard: list[str]) -> None:
    af = app.extensions["arena"].after_finish
    tid, gid, bots = one_game_tournament(api, 4)
    status, body = the_last_move(api, app, gid, bots)
    assert status.startswith("200")
    # committed and queued, but its answer is still here: the hooks wait for it
    assert not af.settle(timeout=0.5, open_gates=False)
    assert heard == []
    assert api.c.get(f"/tournaments/{tid}").json["progress"]["games_done"] == 0
    assert b'"finished"' in b"".join(body)  # the server takes the answer to write it
    assert af.settle(open_gates=False)
    assert heard == [gid]
    body.close()  # type: ignore[attr-defined]
    assert api.c.get(f"/tournaments/{tid}").json["status"] == "finished"


def test_a_request_that_fails_after_its_commit_hands_its_game_over(
        api: Api, app: Any, heard: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    af = app.extensions["arena"].after_finish
    tid, gid, bots = one_game_tournament(api, 5)
    real, failed = routes.dumps, []

    def failing(value: Any) -> str:  # the ending move's answer only (the first finished view)
        if not failed and isinstance(value, dict) and value.get("status") == "finished":
            failed.append(True)
            raise RuntimeError("the answer could not be built")
        return real(value)

    monkeypatch.setattr(routes, "dumps", failing)
    app.config["PROPAGATE_EXCEPTIONS"] = False
    status, body = the_last_move(api, app, gid, bots)
    assert status.startswith("500")
    assert af.settle(timeout=30, open_gates=False)  # not held for the gate's minute
    assert heard == [gid]
    body.close()  # type: ignore[attr-defined]
    assert api.c.get(f"/tournaments/{tid}").json["status"] == "finished"


def test_settle_opens_the_gates(api: Api, app: Any, heard: list[str]) -> None:
    """A caller that wants the consequences now (tests, a stopping process) does not wait
    for answers nobody takes."""
    tid, gid, bots = one_game_tournament(api, 6)
    the_last_move(api, app, gid, bots)
    assert app.extensions["arena"].after_finish.settle(timeout=30)
    assert heard == [gid]
    assert api.c.get(f"/tournaments/{tid}").json["status"] == "finished"
