"""The container, run for real: the unchanged Dockerfile built and run with podman.

No Docker engine runs here; podman does (``.ci/container-base`` installs it, with runc,
cgroupfs and no default ulimits in a ``CONTAINERS_CONF`` file, and makes the stand-in
``python:3.11-slim`` base from Debian packages, since image registries are unreachable).
The test builds the image, runs it on the host's network against the test Redis (with
the test's key prefix), runs the image's own HEALTHCHECK command in it, plays part of a
game through it, stops it with SIGTERM (``podman stop``: graceful, exit 0, no worker cut
off), starts it again and finishes the game with nothing lost.

Bounded: every podman call and HTTP request has a timeout; the container and the image
are removed in a finalizer.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from service.engine import parse_action
from service.storage.embedded import free_port
from service.storage.store import Store
from tests.conftest import REDIS_URL, missing
from tests.test_serve import http_status, wait_for

EXPECTED_S = 150  # seconds, the whole module: the order workers take it in (tests/conftest.py)
BUILD_TIMEOUT = 900.0
# pytest-timeout counts the image's build (the first test's set-up) with that test: the
# build compiles the engine with mypyc, which under load alone outlasts the default timeout
pytestmark = pytest.mark.timeout(BUILD_TIMEOUT + 300)

ROOT = Path(__file__).resolve().parent.parent
BASE_IMAGE = "python:3.11-slim"
CI_CONF = Path(os.environ.get("ALLFOURS_CI_CACHE", "/var/cache/allfours-ci")) / "containers.conf"
HTTP_TIMEOUT = 15.0
# Where the image's engine modules (and the search bot's inner loop) are loaded from.
COMPILED_PROBE = (
    "import importlib, json; print(json.dumps({m: importlib.import_module(m).__file__ "
    "for m in ('service.engine.game', 'service.engine.play', 'service.engine.state', "
    "'service.engine.scoring', 'clients.strategies.playout')}))"
)


def podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], capture_output=True, text=True,
                          timeout=timeout, check=check, env=podman_env())


def podman_env() -> dict[str, str]:
    env = dict(os.environ)
    if "CONTAINERS_CONF" not in env and CI_CONF.exists():
        env["CONTAINERS_CONF"] = str(CI_CONF)
    return env


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    """The Dockerfile built as it is (``--pull=never``: the base must be the local one)."""
    if shutil.which("podman") is None:
        missing("podman is not installed (bash .ci/container-base installs it)")
    if podman("image", "exists", BASE_IMAGE, check=False).returncode != 0:
        missing(f"no {BASE_IMAGE} base image (bash .ci/container-base makes it)")
    tag = f"localhost/allfours-arena:test-{uuid.uuid4().hex[:8]}"
    before = set(dangling())
    # docker format: the OCI format has no HEALTHCHECK, and podman would drop it
    built = podman("build", "--format", "docker", "--network=host", "--pull=never",
                   "-t", tag, str(ROOT), timeout=BUILD_TIMEOUT, check=False)
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    try:
        yield tag
    finally:
        podman("rmi", "-f", tag, check=False)
        made = [i for i in dangling() if i not in before]  # the build stage's image
        if made:
            podman("rmi", "-f", *made, check=False)


def dangling() -> list[str]:
    out = podman("images", "-q", "--filter", "dangling=true", check=False).stdout
    return out.split()


class Container:
    """One run of the image on the host network, serving on a free port."""

    def __init__(self, image: str, key_prefix: str) -> None:
        self.port = free_port()
        self.name = f"allfours-test-{uuid.uuid4().hex[:8]}"
        podman("run", "-d", "--name", self.name, "--network=host",
               "-e", f"REDIS_URL={REDIS_URL}", "-e", f"ARENA_KEY_PREFIX={key_prefix}",
               "-e", f"PORT={self.port}", "-e", "ARENA_RATE_LIMIT=0", image)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def wait_healthy(self) -> None:
        def up() -> bool:
            state = self.inspect()["State"]
            assert state["Running"], self.logs()
            return http_status(self.url("/healthz"), 1) == 200

        wait_for(up, 60, "the container's /healthz")

    def inspect(self) -> dict[str, Any]:
        return json.loads(podman("inspect", self.name).stdout)[0]

    def logs(self) -> str:
        out = podman("logs", self.name, check=False)
        return out.stdout + out.stderr

    def remove(self) -> None:
        podman("rm", "-f", "-t", "0", self.name, check=False)


def call(method: str, url: str, token: str | None = None, expect: int = 200,
         **kw: Any) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    r = requests.request(method, url, headers=headers, timeout=HTTP_TIMEOUT, **kw)
    assert r.status_code == expect, (method, url, r.status_code, r.text)
    return r.json()


def play(c: Container, game_id: str, tokens: list[str], rng: random.Random,
         moves: int) -> list[tuple[int, str]]:
    """Up to ``moves`` random legal moves: (version decided on, action) per acknowledged."""
    acked = []
    for _ in range(moves):
        view = call("GET", c.url(f"/games/{game_id}"))
        if view["status"] == "finished":
            break
        seat = view["turn"]
        mine = call("GET", c.url(f"/games/{game_id}"), tokens[seat])
        action = rng.choice(mine["legal_actions"])
        call("POST", c.url(f"/games/{game_id}/actions"), tokens[seat],
             json={"action": action, "version": mine["version"]})
        acked.append((mine["version"], action))
    return acked


def test_the_image_builds_runs_plays_stops_gracefully_and_restarts(
    image: str, key_prefix: str, redis_client
) -> None:
    inspected = json.loads(podman("image", "inspect", image).stdout)[0]
    config, health = inspected["Config"], inspected.get("Healthcheck")
    assert health and health["Test"][0] == "CMD", inspected
    assert "/healthz" in " ".join(health["Test"])
    assert config["Cmd"][:3] == ["gunicorn", "-c", "python:service.http.gunicorn_conf"]
    assert config["User"] == "arena"

    c = Container(image, key_prefix)
    try:
        c.wait_healthy()
        # the image's own health check command, run in the container as the engine would
        probe = podman("exec", c.name, *health["Test"][1:], check=False)
        assert probe.returncode == 0, probe.stderr
        assert podman("healthcheck", "run", c.name, check=False).returncode == 0
        # the build stage's `pip wheel` compiled the engine with mypyc: the image runs
        # extension modules, not the .py sources (the search bot's speed depends on it)
        where = podman("exec", c.name, "python", "-c", COMPILED_PROBE, check=False)
        assert where.returncode == 0, where.stderr
        for module, path in json.loads(where.stdout).items():
            assert path.endswith(".so"), f"{module} is not compiled in the image: {path}"

        rng = random.Random(31)
        bots = [call("POST", c.url("/bots"), json={"name": "box0"}, expect=201)]
        bots.append(call("POST", c.url("/bots"), bots[0]["token"],  # one owner's bots
                         json={"name": "box1"}, expect=201))
        created = call("POST", c.url("/games"), bots[0]["token"], expect=201,
                       json={"players": 2, "seed": 3131, "seats": [b["id"] for b in bots]})
        game_id, tokens = created["id"], [b["token"] for b in bots]
        acked = play(c, game_id, tokens, rng, 15)
        assert len(acked) == 15

        # SIGTERM (podman stop), graceful: exit 0 well inside the stop timeout
        stopped = podman("stop", "-t", "30", c.name, timeout=60)
        assert stopped.returncode == 0
        state = c.inspect()["State"]
        logs = c.logs()
        assert state["ExitCode"] == 0, logs[-3000:]
        assert "Handling signal: term" in logs and "graceful timeout" not in logs, logs[-3000:]
        first_line = next(ln for ln in logs.splitlines() if ln.startswith("{"))
        assert json.loads(first_line)["logger"] == "gunicorn.error"  # JSON logs

        # started again: the game is where it was, and plays on to its end
        podman("start", c.name)
        c.wait_healthy()
        view = call("GET", c.url(f"/games/{game_id}"))
        assert view["version"] == 1 + len(acked)
        acked += play(c, game_id, tokens, rng, 2000)
        assert call("GET", c.url(f"/games/{game_id}"))["status"] == "finished"
        game = Store(redis_client, key_prefix).get_game(game_id)
        assert game is not None
        assert [(i + 1, a) for i, a in enumerate(game.actions)] == [
            (v, parse_action(a)) for v, a in acked]
    finally:
        c.remove()
