"""Webhook bots (issue 14, push): the service calls a bot's own HTTP server on its turns.

Everything here is real: the service is gunicorn with gevent workers (two, so two
dispatchers race for every turn) on the shared Redis under a key prefix of its own, and
the webhook bots are HTTP servers on loopback — the copyable example bot
(``clients/examples/webhook_bot.py``) and scripted ones that stall, fail, talk nonsense
or play an illegal card. The operator setting allows only ``127.0.0.2/32``: the bots
listen there, and ``localhost`` (127.0.0.1, ::1) stands for an address the service must
never call.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests
from werkzeug.serving import make_server

from clients.examples.webhook_bot import create_app as example_bot
from service.storage.embedded import free_port
from tests.conftest import REDIS_URL
from tests.contract import CONTRACT

ALLOWED = "127.0.0.2"  # the only network the service may call (ARENA_CALLBACK_NETWORKS)
REQUEST_SCHEMA = {"$ref": "#/components/schemas/CallbackRequest"}


def wait_for(what: str, check: Callable[[], Any], seconds: float = 30.0) -> Any:
    end = time.monotonic() + seconds
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.05)


class Service:
    def __init__(self, url: str, proc: subprocess.Popen[bytes]) -> None:
        self.url = url
        self.proc = proc

    def call(self, method: str, path: str, token: str | None = None, body: Any = None,
             ok: tuple[int, ...] = (200, 201, 204), **params: Any) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        r = requests.request(method, self.url + path, json=body, headers=headers,
                             params=params, timeout=30)
        assert r.status_code in ok, (method, path, r.status_code, r.text)
        return r.json() if r.content else None

    def bot(self, name: str) -> tuple[str, str]:
        b = self.call("POST", "/bots", body={"name": name})
        return b["id"], b["token"]

    def record(self, game_id: str) -> dict[str, Any]:
        return self.call("GET", f"/games/{game_id}/record")

    def deliveries(self, token: str, game_id: str | None = None) -> list[dict[str, Any]]:
        q = {"game_id": game_id} if game_id else {}
        return self.call("GET", "/bots/me/callback/deliveries", token, limit=200,
                         **q)["deliveries"]

    def play_by_pull(self, game_id: str, token: str, until: Callable[[], bool] | None = None,
                     seconds: float = 120.0) -> dict[str, Any]:
        """A pulling bot: wait for its turn, play the first legal action, to the end (or
        until ``until()``)."""
        end = time.monotonic() + seconds
        after = 0
        while time.monotonic() < end:
            if until is not None and until():
                return {}
            ans = self.call("GET", f"/games/{game_id}/turn", token, timeout=1, after=after)
            view = ans["view"]
            after = view["version"]
            if view["status"] == "finished":
                return view
            if view["your_turn"]:
                self.call("POST", f"/games/{game_id}/actions", token,
                          {"action": view["legal_actions"][0], "version": view["version"]},
                          ok=(200, 409))
        raise AssertionError("the game did not finish")


@pytest.fixture(scope="module")
def service(redis_client) -> Iterator[Service]:
    prefix = f"aftest:{uuid.uuid4().hex[:12]}:"
    port = free_port()
    env = {**os.environ, "REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": prefix,
           "ARENA_RATE_LIMIT": "0", "ARENA_CALLBACK_NETWORKS": f"{ALLOWED}/32",
           "ARENA_CALLBACK_TIMEOUT": "3", "ARENA_ACCESS_LOG": "0"}
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
        yield Service(url, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        keys = list(redis_client.scan_iter(match=f"{prefix}*", count=1000))
        for i in range(0, len(keys), 500):
            redis_client.delete(*keys[i:i + 500])


class Seen:
    """What a bot server received: (headers, body) per request, in order."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.lock = threading.Lock()

    def add(self, headers: dict[str, str], body: bytes) -> None:
        errors = CONTRACT.errors(REQUEST_SCHEMA, json.loads(body))
        assert not errors, errors  # the request fits the contract's webhooks
        with self.lock:
            self.requests.append((headers, body))

    def messages(self, event: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            out = [json.loads(b) for _, b in self.requests]
        return [m for m in out if event is None or m["event"] == event]


def _recording(app: Any, seen: Seen) -> Any:
    """WSGI middleware keeping each request's headers and body in ``seen``."""

    def wsgi(environ: dict[str, Any], start_response: Any) -> Any:
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        headers = {k[5:].replace("_", "-").title(): v for k, v in environ.items()
                   if k.startswith("HTTP_")}
        seen.add(headers, body)
        environ["wsgi.input"] = io.BytesIO(body)
        return app(environ, start_response)

    return wsgi


class ExampleBot(Seen):
    url = ""
    secret = ""


@pytest.fixture
def example_bots() -> Iterator[Callable[[Service, str], ExampleBot]]:
    """start(service, token): the copyable example bot (clients/examples/webhook_bot.py),
    served for real on the allowed address and registered as the bot's callback, knowing
    the secret the registration answered."""
    servers = []

    def start(service: Service, token: str) -> ExampleBot:
        seen = ExampleBot()
        box: dict[str, Any] = {}

        def app(environ: dict[str, Any], start_response: Any) -> Any:
            return box["app"](environ, start_response)

        server = make_server(ALLOWED, 0, _recording(app, seen), threaded=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        seen.url = f"http://{ALLOWED}:{server.server_port}/"
        seen.secret = register(service, token, seen.url)
        box["app"] = example_bot(seen.secret)
        return seen

    yield start
    for s in servers:
        s.shutdown()


class Scripted(ThreadingHTTPServer):
    daemon_threads = True


def scripted_server(behave: Callable[[dict[str, Any]], tuple[int, bytes, float]],
                    host: str = ALLOWED) -> tuple[str, Seen, Scripted]:
    """A bot server whose answer to each request is ``behave(message)``: (status, body,
    seconds to stall first)."""
    seen = Seen()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.add(dict(self.headers), body)
            status, out, stall = behave(json.loads(body))
            time.sleep(stall)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)
            except OSError:
                pass

        def log_message(self, *args: Any) -> None:
            pass

    server = Scripted((host, 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://{host}:{server.server_port}/", seen, server


def register(service: Service, token: str, url: str) -> str:
    ans = service.call("PUT", "/bots/me/callback", token, {"url": url})
    assert ans["url"] == url and ans["secret"].startswith("whsec_")
    return ans["secret"]


# --- registration ----------------------------------------------------------------------------


def test_register_read_replace_and_remove_a_callback(service):
    _, token = service.bot("hooked")
    assert service.call("GET", "/bots/me/callback", token, ok=(404,))["type"] == \
        "/problems/not-found"
    first = register(service, token, f"http://{ALLOWED}:9/a")
    got = service.call("GET", "/bots/me/callback", token)
    assert got["url"] == f"http://{ALLOWED}:9/a" and "secret" not in got
    second = register(service, token, f"https://{ALLOWED}:9/b")  # replaced, new secret
    assert second != first
    assert service.call("GET", "/bots/me/callback", token)["url"] == f"https://{ALLOWED}:9/b"
    assert service.call("DELETE", "/bots/me/callback", token) is None
    service.call("DELETE", "/bots/me/callback", token, ok=(404,))
    service.call("GET", "/bots/me/callback", token, ok=(404,))
    service.call("PUT", "/bots/me/callback", None, {"url": "http://x.example/"}, ok=(401,))


@pytest.mark.parametrize("url", [
    "ftp://example.org/x", "/relative", "http://user:pw@example.org/", "http://127.0.0.1:8/",
    "http://10.1.2.3/", "http://[::1]:80/", "http://169.254.169.254/latest/meta-data",
    "http://[::ffff:127.0.0.1]/", "http://192.168.1.1/#frag", "http://example.org:99999/",
])
def test_a_url_that_can_never_be_called_is_refused_at_registration(service, url):
    _, token = service.bot("bad-url")
    r = service.call("PUT", "/bots/me/callback", token, {"url": url}, ok=(422,))
    assert r["type"] == "/problems/validation" and "url" in r["errors"]
    service.call("GET", "/bots/me/callback", token, ok=(404,))


# --- whole games -------------------------------------------------------------------------------


def test_a_webhook_bot_plays_a_whole_game_against_a_pulling_bot(service, example_bots):
    hook_id, hook_token = service.bot("webhook")
    pull_id, pull_token = service.bot("puller")
    seen = example_bots(service, hook_token)
    game = service.call("POST", "/games", pull_token,
                        {"players": 2, "seats": [hook_id, pull_id], "seed": 11,
                         "variants": {"target": 3}, "move_limit": 5})
    end = service.play_by_pull(game["id"], pull_token)
    assert end["status"] == "finished"
    record = service.record(game["id"])
    hook_seat = 0
    assert record["timeouts"] == []  # every webhook move was applied in time
    turns = [d for d in service.deliveries(hook_token, game["id"]) if d["event"] == "turn"]
    assert turns and all(d["outcome"] == "applied" for d in turns)
    assert len({d["version"] for d in turns}) == len(turns)  # one delivery per turn
    # each applied action is the game's action at that version, by the webhook's seat
    assert all(d["seat"] == hook_seat for d in turns)
    msgs = seen.messages("turn")
    assert {m["version"] for m in msgs} == {d["version"] for d in turns}
    for m in msgs:
        assert m["view"]["your_turn"] and m["view"]["legal_actions"]
        assert m["view"]["version"] == m["version"] and m["view"]["seat"] == hook_seat
        assert m["deadline"] == m["view"]["deadline"] and m["deadline"] is not None
        assert m["last_failure"] is None
    # start and end notifications, once each (the end one shows every card)
    wait_for("the end notification", lambda: seen.messages("end"))
    assert len(seen.messages("start")) == 1 and len(seen.messages("end")) == 1
    assert seen.messages("end")[0]["view"]["status"] == "finished"
    events = {d["event"]: d["outcome"] for d in service.deliveries(hook_token, game["id"])
              if d["event"] != "turn"}
    assert events == {"start": "delivered", "end": "delivered"}
