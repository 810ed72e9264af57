"""Helpers for the browser tests: the service under gunicorn on a free port, random bots
playing over HTTP in threads, waiting, and screenshots (kept in artifacts/screenshots/)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from service.storage.embedded import free_port
from tests.conftest import REDIS_URL

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
ADMIN = "admin-" + uuid.uuid4().hex
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


def wait_until(predicate: Callable[[], Any], timeout: float, what: str,
               every: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def new_page(browser: Any, service: Any, viewport: dict[str, int], touch: bool = False) -> Any:
    """A fresh browser tab of ``viewport`` size on the service, in a context of its own
    (``pg.context``); ``touch``: a phone's (touch events, a mobile viewport). Page errors
    and console errors (but the answers the pages handle: 409, 422, and the replay page's
    403 ``not-a-player`` for a game nobody has asked to analyse) are gathered in
    ``pg.problems``, for the test to fail on at its end."""
    context = browser.new_context(viewport=viewport, base_url=service.base,
                                  has_touch=touch, is_mobile=touch)
    pg = context.new_page()
    pg.set_default_timeout(20_000)
    problems: list[str] = []

    def handled(m: Any) -> bool:
        if "409" in m.text or "422" in m.text:
            return True
        return "403" in m.text and m.location.get("url", "").endswith("/analysis")

    pg.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    pg.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
          if m.type == "error" and not handled(m) else None)
    pg.problems = problems
    return pg


def _redis() -> Any:
    import redis

    return redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)


# --- the service ---------------------------------------------------------------------------


class Service:
    """gunicorn serving service.http.wsgi:app on a free port, with its own Redis key prefix."""

    def __init__(self, prefix: str, log: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "REDIS_URL": REDIS_URL,
            "ARENA_KEY_PREFIX": prefix,
            "ARENA_RATE_LIMIT": "0",
            "ARENA_ADMIN_TOKEN": ADMIN,
            "ARENA_SSE_KEEPALIVE": "2",
            "ARENA_LOBBY_IDLE_S": "8",
            "WEB_CONCURRENCY": "2",
            "ARENA_ANALYSIS_WORKERS": "1",  # the replay page's analysis (test_analysis_page)
            # the analyser's quick setting: the pages show whatever it says, and a shared
            # machine computes a game's in seconds rather than a minute
            "ARENA_ANALYSIS_QUALITY": "fast",
        }
        self.log = log
        self.house: subprocess.Popen[bytes] | None = None
        self._out = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "python:service.http.gunicorn_conf",
             "--bind", f"127.0.0.1:{self.port}", "service.http.wsgi:app"],
            cwd=ROOT, env=env, stdout=self._out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )

        def up() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"gunicorn exited: {self.log.read_text()[-2000:]}")
            try:
                return requests.get(self.base + "/readyz", timeout=2).status_code == 200
            except requests.RequestException:
                return False

        wait_until(up, 60, "the service to answer /readyz", every=0.2)
        # The house bots, as `allfours serve` runs them: their own process, over HTTP.
        house = self.house = subprocess.Popen(
            [sys.executable, "-m", "service.arena.accounts.house", "--server", self.base],
            cwd=ROOT, env=env, stdout=self._out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )

        def house_up() -> bool:
            if house.poll() is not None:
                raise AssertionError(f"house bots exited: {self.log.read_text()[-2000:]}")
            return bool(_redis().exists(f"{prefix}house:alive"))

        wait_until(house_up, 60, "the house bots to start", every=0.2)

    def stop(self) -> None:
        if self.house is not None and self.house.poll() is None:
            self.house.terminate()
            try:
                self.house.wait(20)
            except subprocess.TimeoutExpired:
                self.house.kill()
                self.house.wait(10)
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._out.close()


# --- bots over HTTP ------------------------------------------------------------------------


class Api:
    """The JSON API as a bot uses it (requests; one session per caller)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.s = requests.Session()
        # no proxy settings read from the environment on each request: the browser tests'
        # bots run in threads for the whole session, and pytest sets and removes
        # PYTEST_CURRENT_TEST meanwhile (iterating os.environ then raised KeyError in one)
        self.s.trust_env = False
        # the test's bots are one owner's (the first bot's token): a game that names
        # several of them seats them at once (others' bots are invited)
        self.owner_token: str | None = None

    def call(self, method: str, path: str, token: str | None = None, **kw: Any) -> Any:
        headers = kw.pop("headers", {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        r = self.s.request(method, self.base + path, headers=headers, timeout=40, **kw)
        return r

    def get(self, path: str, token: str | None = None, **kw: Any) -> Any:
        r = self.call("GET", path, token, **kw)
        assert r.status_code == 200, (path, r.status_code, r.text)
        return r.json()

    def post(self, path: str, body: Any, token: str | None = None, status: int = 201) -> Any:
        r = self.call("POST", path, token, json=body)
        assert r.status_code == status, (path, r.status_code, r.text)
        return r.json()

    def bot(self, name: str, new_owner: bool = False) -> tuple[str, str]:
        """A new bot (id, token) of the test's one owner, or (``new_owner``) an owner of
        its own: a ladder never matches two bots of one owner."""
        b = self.post("/bots", {"name": name}, None if new_owner else self.owner_token)
        if not new_owner:
            self.owner_token = self.owner_token or b["token"]
        return b["id"], b["token"]


class RandomBot(threading.Thread):
    """Plays random legal actions in every game where it is its turn (long-polls
    ``/bots/me/turns``). ``gate`` cleared: it stops acting until set again."""

    def __init__(self, base: str, token: str, delay: float = 0.0, seed: int = 0,
                 gate: threading.Event | None = None) -> None:
        super().__init__(daemon=True)
        self.api = Api(base)
        self.token = token
        self.delay = delay
        self.rng = random.Random(seed)
        self.gate = gate
        self.stopped = threading.Event()
        self.actions = 0
        self.errors: list[str] = []

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                self._step()
            except requests.RequestException as exc:  # keep playing through a hiccup
                self.errors.append(repr(exc))
                time.sleep(0.2)

    def _step(self) -> None:
        if self.gate is not None and not self.gate.wait(0.5):
            return
        r = self.api.call("GET", "/bots/me/turns", self.token, params={"timeout": 1})
        if r.status_code != 200:
            time.sleep(0.2)
            return
        for game_id in r.json()["games"]:
            if self.delay:
                time.sleep(self.delay)
            if self.stopped.is_set() or (self.gate is not None and not self.gate.is_set()):
                return
            v = self.api.call("GET", f"/games/{game_id}", self.token)
            if v.status_code != 200:
                continue
            view = v.json()
            if not view["your_turn"] or not view["legal_actions"]:
                continue
            action = self.rng.choice(view["legal_actions"])
            a = self.api.call("POST", f"/games/{game_id}/actions", self.token,
                              json={"action": action, "version": view["version"]})
            if a.status_code == 200:
                self.actions += 1
            elif a.status_code not in (409, 412):
                self.errors.append(f"{a.status_code} {a.text}")

    def stop(self) -> None:
        self.stopped.set()



def screenshot(pg: Any, name: str, full_page: bool = True) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    pg.screenshot(path=str(path), full_page=full_page, animations="disabled")
    return path
