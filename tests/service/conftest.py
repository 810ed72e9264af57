"""Fixtures for the HTTP service: an app on the test's own key prefix, and a client; and
the app under gunicorn as deployed, for the tests that need real worker processes."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from service.http.app import create_app
from service.storage.embedded import free_port
from tests.conftest import REDIS_URL

ADMIN_TOKEN = "test-admin-token"


@pytest.fixture
def app(key_prefix):
    return create_app(
        {"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix, "ARENA_RATE_LIMIT": 0,
         "ARENA_ADMIN_TOKEN": ADMIN_TOKEN, "ARENA_OWNERS_PER_NETWORK": 0, "TESTING": True}
    )


@pytest.fixture
def client(app):
    return app.test_client()


def settle(client: Any) -> None:
    """The games that have ended have had their consequences (a tournament's next round,
    a ladder's rating, a validation's verdict): the app's after-finish loop, which runs
    them off the requests (``service.arena.games.after_finish``), has run every game
    submitted so far. ``client``: a Flask test client or the app."""
    app = getattr(client, "application", client)
    assert app.extensions["arena"].after_finish.settle()


class Api:
    """A tiny bot-side wrapper over the Flask test client (names as in openapi.yaml)."""

    def __init__(self, client: Any, one_owner: bool = True) -> None:
        self.c = client
        # The test's own bots belong to one owner (the first bot's), so a game that names
        # several of them seats them at once, as any author's own bots are seated (other
        # owners' bots are invited instead). ``one_owner=False`` (the ladder's
        # tests: one owner's bots are never matched) makes each bot an owner of its own.
        self.one_owner = one_owner
        self.owner_token: str | None = None

    def bot(self, name: str = "bot", owner: str | None = None, new_owner: bool = False
            ) -> tuple[str, str]:
        """A new bot (id, token): of the owner of the bot whose token is ``owner``; by
        default of this Api's one owner (``one_owner``), else (or ``new_owner``) of a new
        owner."""
        token = owner
        if token is None and self.one_owner and not new_owner:
            token = self.owner_token
        r = self.c.post("/bots", json={"name": name}, headers=self.auth(token))
        assert r.status_code == 201, r.json
        if self.owner_token is None and self.one_owner and owner is None and not new_owner:
            self.owner_token = r.json["token"]
        return r.json["id"], r.json["token"]

    @staticmethod
    def auth(token: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"} if token else {}

    def game(self, token: str, players: int, seats: list[str | None] | None = None,
             **extra: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"players": players, **extra}
        if seats is not None:
            body["seats"] = seats
        r = self.c.post("/games", json=body, headers=self.auth(token))
        assert r.status_code == 201, r.json
        return r.json

    def view(self, game_id: str, token: str | None = None, **q: Any) -> Any:
        return self.c.get(f"/games/{game_id}", headers=self.auth(token), query_string=q)

    def act(self, game_id: str, token: str, action: str, headers: dict[str, str] | None = None,
            **body: Any) -> Any:
        return self.c.post(f"/games/{game_id}/actions", json={"action": action, **body},
                           headers={**self.auth(token), **(headers or {})})

    def table(self, players: int, seed: int) -> tuple[str, list[str]]:
        """A full table of distinct bots; returns (game id, token per seat)."""
        bots = [self.bot(f"b{i}") for i in range(players)]
        game = self.game(bots[0][1], players, seats=[b for b, _ in bots], seed=seed)
        return game["id"], [t for _, t in bots]

    def play_out(self, game_id: str, tokens: list[str], rng: random.Random,
                 check: Any = None, limit: int = 5000) -> list[str]:
        """Play to the end choosing at random from legal_actions; returns the actions."""
        played = []
        for _ in range(limit):
            spectator = self.view(game_id).json
            if spectator["status"] == "finished":
                settle(self.c)
                return played
            seat = spectator["turn"]
            v = self.view(game_id, tokens[seat])
            assert v.status_code == 200
            if check:
                check(seat, v.json)
            assert v.json["your_turn"] and v.json["legal_actions"]
            a = rng.choice(v.json["legal_actions"])
            r = self.act(game_id, tokens[seat], a, version=v.json["version"])
            assert r.status_code == 200, r.json
            if check:
                check(seat, r.json)
            played.append(a)
        raise AssertionError("game did not finish")


@pytest.fixture
def api(client):
    return Api(client)


@contextmanager
def gunicorn(**settings: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """(base URL, process) of the app under gunicorn as deployed, two gevent workers (so
    two sweepers and two callback dispatchers race), on the test Redis with ``settings``
    in its environment; once ``/healthz`` answers. Stopped (SIGTERM, then SIGKILL) on the
    way out, so a test that fails half-way leaves no server behind."""
    port = free_port()
    env = {**os.environ, "REDIS_URL": REDIS_URL, **settings}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "python:service.http.gunicorn_conf",
         "--bind", f"127.0.0.1:{port}", "--workers", "2", "service.http.wsgi:app"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url + "/healthz", timeout=2).read()
                break
            except OSError:
                assert time.monotonic() < end and proc.poll() is None, "no service"
                time.sleep(0.1)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
