"""Webhook bots (push): the service calls a bot's own HTTP server on its turns.

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
import shutil
import signal
import socket
import subprocess
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
from service.arena.webhooks.calls import sign
from tests.conftest import REDIS_URL, missing
from tests.contract import CONTRACT, ROOT
from tests.service.conftest import gunicorn

EXPECTED_S = 90  # seconds, the whole module: the order workers take it in (tests/conftest.py)

ALLOWED = "127.0.0.2"  # the only network the service may call (ARENA_CALLBACK_NETWORKS)
REQUEST_SCHEMA = {"$ref": "#/components/schemas/CallbackRequest"}
VERIFY_SCHEMA = {"$ref": "#/components/schemas/VerifyRequest"}


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
        self.owner_token: str | None = None  # the tests' bots are one owner's

    def call(self, method: str, path: str, token: str | None = None, body: Any = None,
             ok: tuple[int, ...] = (200, 201, 204), **params: Any) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        r = requests.request(method, self.url + path, json=body, headers=headers,
                             params=params, timeout=30)
        assert r.status_code in ok, (method, path, r.status_code, r.text)
        return r.json() if r.content else None

    def bot(self, name: str) -> tuple[str, str]:
        """A bot of the tests' one owner: games naming several of them seat them at once."""
        b = self.call("POST", "/bots", self.owner_token, body={"name": name})
        self.owner_token = self.owner_token or b["token"]
        return b["id"], b["token"]

    def against_puller(self, hook_id: str, **settings: Any) -> tuple[dict[str, Any], str]:
        """A 2-player game (seed 11 unless ``settings`` say otherwise) of the bot ``hook_id``
        in seat 0 against a new pulling bot in seat 1, which creates it: (the game, the
        puller's token). Register the bot's callback first: its first turn is called."""
        pull_id, pull_token = self.bot("puller")
        game = self.call("POST", "/games", pull_token,
                         {"players": 2, "seats": [hook_id, pull_id], "seed": 11, **settings})
        return game, pull_token

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
    try:
        with gunicorn(ARENA_KEY_PREFIX=prefix, ARENA_RATE_LIMIT="0",
                      ARENA_CALLBACK_NETWORKS=f"{ALLOWED}/32", ARENA_CALLBACK_TIMEOUT="6",
                      ARENA_ACCESS_LOG="0") as (url, proc):
            yield Service(url, proc)
    finally:
        keys = list(redis_client.scan_iter(match=f"{prefix}*", count=1000))
        for i in range(0, len(keys), 500):
            redis_client.delete(*keys[i:i + 500])


class Seen:
    """What a bot server received: (headers, body) per request, in order."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.held: list[tuple[str, int]] = []  # callers of calls held unanswered
        self.lock = threading.Lock()

    def add(self, headers: dict[str, str], body: bytes) -> None:
        msg = json.loads(body)
        schema = VERIFY_SCHEMA if msg.get("event") == "verify" else REQUEST_SCHEMA
        errors = CONTRACT.errors(schema, msg)
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
        seen.secret = register(service, token, seen.url, verified=False)
        box["app"] = example_bot(seen.secret)
        wait_verified(service, token)  # the example bot echoes the challenge
        return seen

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


class Scripted(ThreadingHTTPServer):
    daemon_threads = True


Answer = tuple[int, bytes, float] | threading.Event


def echo(msg: dict[str, Any]) -> Answer:
    """The right answer to a ``verify`` request: 200, the challenge echoed."""
    return 200, json.dumps({"challenge": msg["challenge"]}).encode(), 0.0


def scripted_server(behave: Callable[[dict[str, Any]], Answer],
                    host: str = ALLOWED, verify: Callable[[dict[str, Any]], Answer] | None = echo
                    ) -> tuple[str, Seen, Scripted]:
    """A bot server whose answer to each request is ``behave(message)``: (status, body,
    seconds to stall first); or an Event: the call is held, unanswered, until the event is
    set (30 s at most), its caller's address (ip, port) kept in ``seen.held``. A ``verify``
    request is answered by ``verify`` (by default: the challenge echoed; None: ``behave``
    answers it too)."""
    seen = Seen()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.add(dict(self.headers), body)
            msg = json.loads(body)
            answer = verify(msg) if verify is not None and msg["event"] == "verify" \
                else behave(msg)
            if isinstance(answer, threading.Event):
                seen.held.append(self.client_address[:2])
                answer.wait(30)
                return
            status, out, stall = answer
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


def quiet_count(seen: Seen, quiet_s: float = 2.0, seconds: float = 30.0) -> int:
    """How many requests the server has had, once none has arrived for ``quiet_s``."""
    end = time.monotonic() + seconds
    count, since = len(seen.requests), time.monotonic()
    while time.monotonic() < end:
        time.sleep(0.1)
        if len(seen.requests) != count:
            count, since = len(seen.requests), time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return count
    raise AssertionError(f"requests kept arriving for {seconds} s")


def register(service: Service, token: str, url: str, verified: bool = True) -> str:
    """Register ``url`` as the bot's callback: its secret. ``verified``: then wait until the
    URL has passed its verification (its server echoes the challenge)."""
    ans = service.call("PUT", "/bots/me/callback", token, {"url": url})
    assert ans["url"] == url and ans["secret"].startswith("whsec_")
    assert ans["verified"] is False and ans["verification"]["status"] == "pending"
    if verified:
        wait_verified(service, token)
    return ans["secret"]


def wait_verified(service: Service, token: str) -> dict[str, Any]:
    """The callback once verified (the first attempt comes about a second after the PUT)."""
    return wait_for("the callback URL verified", lambda: (lambda c: c if c["verified"] else None)(
        service.call("GET", "/bots/me/callback", token)), seconds=30)


# --- registration ----------------------------------------------------------------------------


def test_register_read_replace_and_remove_a_callback(service):
    _, token = service.bot("hooked")
    assert service.call("GET", "/bots/me/callback", token, ok=(404,))["type"] == \
        "/problems/not-found"
    first = register(service, token, f"http://{ALLOWED}:9/a", verified=False)
    got = service.call("GET", "/bots/me/callback", token)
    assert got["url"] == f"http://{ALLOWED}:9/a" and "secret" not in got
    second = register(service, token, f"https://{ALLOWED}:9/b",
                      verified=False)  # replaced, new secret
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
    "http://[::1/", "http://exa mple.org/", "http://example.org/\r\nX: y", "http://@/",
    "http://:80/", "https://[fe80::1%25eth0]/", "http://0x7f.1/", "http://2130706433/",
])
def test_a_url_that_can_never_be_called_is_refused_at_registration(service, url):
    _, token = service.bot("bad-url")
    r = service.call("PUT", "/bots/me/callback", token, {"url": url}, ok=(422,))
    assert r["type"] == "/problems/validation" and "url" in r["errors"]
    service.call("GET", "/bots/me/callback", token, ok=(404,))


# --- whole games -------------------------------------------------------------------------------


def test_a_webhook_bot_plays_a_whole_game_against_a_pulling_bot(service, example_bots):
    hook_id, hook_token = service.bot("webhook")
    seen = example_bots(service, hook_token)
    game, pull_token = service.against_puller(hook_id, variants={"target": 3}, move_limit=5)
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
    # no turn delivery failed: the webhook bot's view says so (as a pulling bot's does)
    assert service.call("GET", f"/games/{game['id']}", hook_token)["callback_failure"] is None
    assert service.call("GET", f"/games/{game['id']}", pull_token)["callback_failure"] is None


def test_two_webhook_bots_and_two_pulling_bots_finish_a_four_player_game(service,
                                                                         example_bots):
    bots = [service.bot(f"p{i}") for i in range(4)]
    hooks = [example_bots(service, bots[i][1]) for i in (0, 2)]
    game = service.call("POST", "/games", bots[1][1],
                        {"players": 4, "seats": [b for b, _ in bots], "seed": 5,
                         "variants": {"target": 2}, "move_limit": 5})
    done: list[dict[str, Any]] = []
    other = threading.Thread(target=lambda: done.append(
        service.play_by_pull(game["id"], bots[3][1])))
    other.start()
    end = service.play_by_pull(game["id"], bots[1][1])
    other.join(60)
    assert end["status"] == "finished" and done and done[0]["status"] == "finished"
    assert service.record(game["id"])["timeouts"] == []
    for seat, hook in zip((0, 2), hooks):
        turns = [d for d in service.deliveries(bots[seat][1], game["id"])
                 if d["event"] == "turn"]
        assert turns and {d["outcome"] for d in turns} == {"applied"}
        assert {d["seat"] for d in turns} == {seat}
        assert {m["seat"] for m in hook.messages("turn")} == {seat}


# --- failures fall back to the deadline, and the bot sees why ----------------------------------


def _not_legal(view: dict[str, Any]) -> str:
    """An action the rules refuse here: a card of the hand that is not legal, else one not
    in the hand."""
    legal = set(view["legal_actions"])
    for card in view["hand"] or []:
        if card not in legal:
            return card
    return next(c for c in ("2C", "3C", "4C", "5C", "2D") if c not in (view["hand"] or []))


BEHAVIOURS: dict[str, tuple[Callable[[dict[str, Any]], tuple[int, bytes, float]], str]] = {
    "stalls": (lambda m: (200, b'{"action": "stand"}', 2.5), "timeout"),
    "errors": (lambda m: (500, b'{"oops": true}', 0.0), "http-error"),
    "answers garbage": (lambda m: (200, b"<html>not json</html>", 0.0), "bad-answer"),
    "answers a non-action": (lambda m: (200, b'{"action": "fold"}', 0.0), "bad-answer"),
    "says more than the action": (lambda m: (200, json.dumps({
        "action": m["view"]["legal_actions"][0], "shout": "hi"}).encode(), 0.0), "bad-answer"),
    "answers too much": (lambda m: (200, b'{"action": "stand", "pad": "'
                                    + b"x" * 40000 + b'"}', 0.0), "bad-answer"),
    "redirects": (lambda m: (307, b"", 0.0), "http-error"),
    "plays an illegal card": (
        lambda m: (200, json.dumps({"action": _not_legal(m["view"])}).encode(), 0.0),
        "refused"),
}


@pytest.mark.parametrize("name", list(BEHAVIOURS))
def test_a_failing_webhook_bot_gets_the_default_action_and_sees_why(service, name):
    behave, outcome = BEHAVIOURS[name]
    hook_id, hook_token = service.bot("failing")
    url, seen, server = scripted_server(behave)
    try:
        register(service, hook_token, url)
        game, pull_token = service.against_puller(hook_id, move_limit=1.0)
        gid = game["id"]

        def timed_out_calls() -> list[dict[str, Any]]:
            """The turn calls whose turn then ended in the default action (a loaded
            service may let a turn's deadline pass before its call goes out: that turn
            has a timeout but no call, so calls and timeouts are matched by ply)."""
            plies = {t["ply"] for t in service.record(gid)["timeouts"] if t["seat"] == 0}
            return [m for m in seen.messages("turn") if m["view"]["ply"] + 1 in plies]

        def after(call: dict[str, Any]) -> list[dict[str, Any]]:
            turns = seen.messages("turn")
            return turns[turns.index(call) + 1:]

        def two_failures() -> bool:
            called = timed_out_calls()
            return bool(called) and any(m.get("last_failure") for m in after(called[0]))

        service.play_by_pull(gid, pull_token, until=two_failures, seconds=60)
    finally:
        server.shutdown()
        server.server_close()
    # R-independent policy: the seat in turn got the default action at the deadline
    called = timed_out_calls()
    assert called, (service.record(gid)["timeouts"], seen.messages("turn"))
    first = called[0]
    turns = [d for d in service.deliveries(hook_token, gid) if d["event"] == "turn"]
    failed = [d for d in turns if d["version"] == first["version"]]
    assert len(failed) == 1, turns  # called once for that turn: an answer is never retried
    record = failed[0]
    assert record["outcome"] == outcome and record["attempts"] == 1, record
    assert record["detail"]
    if outcome == "refused":
        assert record["problem"] == "/problems/illegal-action"
        assert record["action"] == json.loads(behave(first)[1])["action"]
    if name == "errors":
        assert record["status"] == 500
    if name == "redirects":
        assert record["status"] == 307
    # a later turn request in the game carries the failure: the next one, unless it was
    # sent before the failure was written (a stalled call ends 0.15 s before the deadline,
    # and a loaded server may write it after the deadline's default action was sent on)
    later = [m["last_failure"] for m in after(first) if m.get("last_failure")]
    assert later, seen.messages("turn")
    assert later[0]["version"] >= first["version"]
    # the failure carried is the latest: on a loaded machine a later turn of the same game
    # may have failed too (its call sent too late: ``no-time``) before the next call went
    # out, so the outcome is checked on the calls that carry this turn's failure
    carried = [f for f in later if f["version"] == first["version"]]
    assert carried or later[0]["outcome"] == "no-time", later
    assert all(f["outcome"] == outcome for f in carried), carried
    # ... and so does the bot's own view of the game (its seat's only)
    mine = service.call("GET", f"/games/{gid}", hook_token)
    assert mine["callback_failure"]["outcome"] == outcome
    assert mine["callback_failure"]["version"] >= first["version"]
    assert mine["callback_failure"] in service.deliveries(hook_token, gid)
    assert service.call("GET", f"/games/{gid}", pull_token)["callback_failure"] is None
    assert "callback_failure" not in service.call("GET", f"/games/{gid}", None)  # spectator


def test_a_callback_to_a_refused_address_is_never_made(service):
    """``localhost`` resolves to loopback, which this service may not call: the check is on
    the resolved address at connection time, so registration passes (a name) but no
    connection ever reaches the listener."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.1)
    port = listener.getsockname()[1]
    accepted: list[Any] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(listener.accept())
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        hook_id, hook_token = service.bot("rebinder")
        register(service, hook_token, f"http://localhost:{port}/", verified=False)
        game, pull_token = service.against_puller(hook_id, move_limit=1.0)
        records = wait_for("a refused verification", lambda: service.deliveries(hook_token))
        service.play_by_pull(game["id"], pull_token, seconds=60, until=lambda: any(
            t["seat"] == 0 for t in service.record(game["id"])["timeouts"]))
        time.sleep(0.5)
        records = service.deliveries(hook_token)
    finally:
        stop.set()
        thread.join(5)
        listener.close()
    assert accepted == []  # no connection arrived, not even one refused later
    # the verification is the first call, refused on the resolved address; never verified,
    # the URL is called for nothing else (its turn fell to the deadline's default)
    assert records and {d["event"] for d in records} == {"verify"}, records
    assert records[-1]["outcome"] == "refused-address" and records[-1]["attempts"] == 1
    assert "127.0.0.1" in records[-1]["detail"] or "::1" in records[-1]["detail"]
    assert records[-1]["status"] is None
    assert service.call("GET", "/bots/me/callback", hook_token)["verified"] is False


# --- the example bot checks what it is sent -------------------------------------------------------


def _post(url: str, body: bytes, headers: dict[str, str]) -> int:
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_example_bot_detects_forged_stale_and_replayed_requests(service, example_bots):
    hook_id, hook_token = service.bot("careful")
    bot = example_bots(service, hook_token)
    # target 4: the game only needs to end, and more than a kick can score (R6), so it
    # is not over before the bot's first turn
    game, pull_token = service.against_puller(hook_id, move_limit=5, variants={"target": 4})
    wait_for("a genuine turn request", lambda: bot.messages("turn"))
    headers, body = next((h, b) for h, b in bot.requests if json.loads(b)["event"] == "turn")
    genuine = {k: headers[k] for k in ("Arena-Timestamp", "Arena-Signature", "Arena-Delivery",
                                       "Arena-Event")}
    assert genuine["Arena-Signature"] == sign(bot.secret, genuine["Arena-Timestamp"], body)
    # replayed as it came: refused (the delivery id was seen)
    assert _post(bot.url, body, genuine) == 409
    # the body changed under the same signature: forged
    msg = json.loads(body)
    msg["delivery"] = "f" * 16
    tampered = json.dumps(msg).encode()
    assert _post(bot.url, tampered, genuine) == 401
    # signed with another secret: forged
    ts = str(int(time.time()))
    assert _post(bot.url, tampered, {**genuine, "Arena-Timestamp": ts,
                                     "Arena-Signature": sign("whsec_guess", ts, tampered)}) == 401
    # correctly signed but ten minutes old: stale (a replay with its original timestamp)
    old = str(int(time.time()) - 600)
    assert _post(bot.url, tampered, {**genuine, "Arena-Timestamp": old,
                                     "Arena-Signature": sign(bot.secret, old, tampered)}) == 401
    # correctly signed and fresh: answered with a legal action
    fresh = {**genuine, "Arena-Timestamp": ts, "Arena-Signature": sign(bot.secret, ts, tampered)}
    assert _post(bot.url, tampered, fresh) == 200
    service.play_by_pull(game["id"], pull_token)


# --- delivery survives a process killed mid-call, and never applies twice ------------------------


def _worker_holding(client: tuple[str, int]) -> int:
    """The pid of the gunicorn worker whose socket is ``client`` (the caller's address)."""
    import psutil

    for conn in psutil.net_connections(kind="tcp"):
        if conn.laddr and (conn.laddr.ip, conn.laddr.port) == client and conn.pid:
            return int(conn.pid)
    raise AssertionError(f"no process holds {client}")


def test_a_worker_killed_mid_delivery_leaves_the_turn_to_another(service):
    """The first call of a turn stalls; the worker making it is killed (SIGKILL). When its
    lease ends another worker claims the turn and calls again; that answer is applied,
    once, in time."""
    release = threading.Event()
    calls: list[int] = []

    def behave(msg: dict[str, Any]) -> Answer:
        if msg["event"] != "turn":
            return 200, b"{}", 0.0
        calls.append(msg["version"])
        if len(calls) == 1:
            return release
        return 200, json.dumps({"action": msg["view"]["legal_actions"][0]}).encode(), 0.0

    url, seen, server = scripted_server(behave)
    held = seen.held
    try:
        hook_id, hook_token = service.bot("mortal")
        register(service, hook_token, url)
        # target 4: played to its end after the turn in question, and not over before it (R6)
        game, pull_token = service.against_puller(hook_id, move_limit=30,
                                                  variants={"target": 4})
        gid = game["id"]
        # the puller plays until the webhook bot's first call is being held
        service.play_by_pull(gid, pull_token, until=lambda: bool(held), seconds=30)
        pid = _worker_holding(wait_for("the held call", lambda: held and held[0]))
        os.kill(pid, signal.SIGKILL)
        version = calls[0]
        wait_for(f"the turn called again ({calls}, killed {pid})", lambda: len(calls) >= 2,
                 seconds=40)
        def turn_records() -> list[dict[str, Any]]:
            return [d for d in service.deliveries(hook_token, gid)
                    if d["version"] == version and d["event"] == "turn"]

        wait_for("the second call's record", turn_records, seconds=20)
        release.set()
        assert calls[1] == version  # the same turn, by another process
        records = turn_records()
        # applied in time (no default action), and the dead one wrote nothing
        assert service.record(gid)["timeouts"] == [], records
        assert [d["outcome"] for d in records] == ["applied"], records
        service.play_by_pull(gid, pull_token, seconds=120)
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def test_the_node_example_bot_plays_a_whole_game_and_refuses_forgeries(service):
    node = shutil.which("node")
    if node is None:
        missing("node is not installed")
    hook_id, hook_token = service.bot("node-hook")
    pull_id, pull_token = service.bot("puller")
    with socket.socket() as s:
        s.bind((ALLOWED, 0))
        port = s.getsockname()[1]
    url = f"http://{ALLOWED}:{port}/"
    secret = register(service, hook_token, url, verified=False)  # the bot is not up yet
    proc = subprocess.Popen(
        [node, str(ROOT / "clients" / "examples" / "webhook_bot.mjs")],
        env={**os.environ, "ARENA_WEBHOOK_SECRET": secret, "HOST": ALLOWED,
             "PORT": str(port)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        body = b'{"event": "turn", "delivery": "abc"}'
        ts = str(int(time.time()))
        wait_for("the node bot", lambda: _post_or_none(url, body, {}) == 401)
        assert _post(url, body, {"Arena-Timestamp": ts,
                                 "Arena-Signature": sign("whsec_guess", ts, body)}) == 401
        old = str(int(time.time()) - 600)
        assert _post(url, body, {"Arena-Timestamp": old,
                                 "Arena-Signature": sign(secret, old, body)}) == 401
        # up now: ask for the verification again rather than wait for its next attempt
        again = service.call("POST", "/bots/me/callback/verify", hook_token)
        assert again["url"] == url
        wait_verified(service, hook_token)
        game = service.call("POST", "/games", pull_token,
                            {"players": 2, "seats": [hook_id, pull_id], "seed": 3,
                             "variants": {"target": 3}, "move_limit": 5})
        assert service.play_by_pull(game["id"], pull_token)["status"] == "finished"
        assert service.record(game["id"])["timeouts"] == []
        turns = [d for d in service.deliveries(hook_token, game["id"]) if d["event"] == "turn"]
        assert turns and {d["outcome"] for d in turns} == {"applied"}
    finally:
        proc.terminate()
        proc.wait(10)


def _post_or_none(url: str, body: bytes, headers: dict[str, str]) -> int | None:
    try:
        return _post(url, body, headers)
    except OSError:
        return None


# --- in one process: a turn delivered twice applies one action ---------------------------


def test_a_turn_delivered_twice_applies_at_most_one_action(key_prefix):
    """Two deliveries of one turn (as after a lease ran out while the first call was still
    on its way) whose answers differ: the first applies, the second is refused by the
    version and the Idempotency-Key of that turn, exactly as a pulled duplicate would be."""
    from service.http.app import create_app

    app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                      "ARENA_RATE_LIMIT": 0, "ARENA_CALLBACK_NETWORKS": f"{ALLOWED}/32"})
    client = app.test_client()
    a = client.post("/bots", json={"name": "a"}).json
    b = client.post("/bots", json={"name": "b"},  # a's owner: seated at once
                    headers={"Authorization": f"Bearer {a['token']}"}).json
    answers = iter(range(10))

    def behave(m: dict[str, Any]) -> tuple[int, bytes, float]:
        legal = m["view"]["legal_actions"]
        return 200, json.dumps({"action": legal[next(answers) % len(legal)]}).encode(), 0.0

    url, seen, server = scripted_server(behave)
    try:
        r = client.put("/bots/me/callback", json={"url": url},
                       headers={"Authorization": f"Bearer {a['token']}"})
        assert r.status_code == 200, r.json
        callbacks = app.extensions["callbacks"]  # no dispatcher runs in this process
        # so the verification is sent from here: the server echoes it
        verified = callbacks.verify_once(a["id"], callbacks.config(a["id"])["vid"])
        assert verified is not None and verified["outcome"] == "verified"
        g = client.post("/games", json={"players": 2, "seats": [a["id"], b["id"]], "seed": 4,
                                        "move_limit": 30},
                        headers={"Authorization": f"Bearer {b['token']}"}).json
        game = callbacks.store.get_game(g["id"])
        if game.seats[game.state.turn] != a["id"]:  # let b move first
            view = client.get(f"/games/{g['id']}",
                              headers={"Authorization": f"Bearer {b['token']}"}).json
            client.post(f"/games/{g['id']}/actions", json={"action": view["legal_actions"][0]},
                        headers={"Authorization": f"Bearer {b['token']}"})
            game = callbacks.store.get_game(g["id"])
        cfg = callbacks.config(a["id"])
        first = callbacks.deliver_turn(a["id"], cfg, game, 5.0)
        second = callbacks.deliver_turn(a["id"], cfg, game, 5.0)  # the same turn again
        assert first["outcome"] == "applied"
        assert second["outcome"] == "refused"
        assert second["problem"] in ("/problems/idempotency-key-reused",
                                     "/problems/version-conflict")
        after = callbacks.store.get_game(g["id"])
        assert after.version == game.version + 1 and len(after.log) == len(game.log) + 1
        # the claim keeps a third process from calling at all
        assert callbacks.try_turn(a["id"], game, cfg) is True
        assert callbacks.try_turn(a["id"], game, cfg) is False
        assert len(seen.messages("turn")) == 3
    finally:
        server.shutdown()
        server.server_close()


def test_the_guard_judges_the_address_not_the_name():
    from ipaddress import ip_address

    from service.arena.webhooks.calls import Guard, parse_networks

    closed = Guard()
    for ip in ("127.0.0.1", "10.0.0.1", "172.16.0.1", "192.168.0.1", "169.254.169.254",
               "100.64.0.1", "0.0.0.0", "::1", "fe80::1", "fc00::1", "::ffff:127.0.0.1",
               "224.0.0.1", "::", "::ffff:93.184.216.34"):  # IPv4 inside IPv6: refused
        assert not closed.allows(ip_address(ip)), ip
    for ip in ("93.184.216.34", "2606:4700::1111"):
        assert closed.allows(ip_address(ip)), ip
    opened = Guard(parse_networks("127.0.0.0/8, fd00::/8"))
    assert opened.allows(ip_address("127.0.0.5")) and opened.allows(ip_address("fd12::1"))
    assert opened.allows(ip_address("::ffff:127.0.0.1"))
    assert not opened.allows(ip_address("10.0.0.1"))


def test_the_python_client_registers_reads_and_removes(service):
    from clients.api import ArenaClient, ArenaError

    client = ArenaClient(service.url)
    client.register("client-hook")
    got = client.set_callback(f"http://{ALLOWED}:9/x")
    assert got["secret"].startswith("whsec_")
    assert client.callback()["url"] == f"http://{ALLOWED}:9/x"
    assert client.deliveries() == []
    client.remove_callback()
    with pytest.raises(ArenaError) as err:
        client.callback()
    assert err.value.kind == "not-found"


def test_only_calls_without_an_answer_are_retried_and_boundedly(service):
    """A server that accepts and hangs up without answering, and a port where nothing
    listens: each call is tried 1 + ARENA_CALLBACK_RETRIES (2) times, then given up; a
    server that answers (even badly) is called once (the failure tests above)."""
    listener = socket.socket()
    listener.bind((ALLOWED, 0))
    listener.listen(16)
    listener.settimeout(0.1)
    accepted = [0]
    stop = threading.Event()

    def hang_up() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            accepted[0] += 1
            conn.recv(65536)
            conn.close()

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    with socket.socket() as s:
        s.bind((ALLOWED, 0))
        closed_port = s.getsockname()[1]  # nothing listens here once closed
    try:
        cases = {}
        for name, url in (("no-answer", f"http://{ALLOWED}:{listener.getsockname()[1]}/"),
                          ("connect-failed", f"http://{ALLOWED}:{closed_port}/")):
            _, hook_token = service.bot(f"silent-{name}")
            register(service, hook_token, url, verified=False)
            # the verification is the first call: retried where no answer came
            cases[name] = wait_for(f"the verification given up ({name})",
                                   lambda t=hook_token: service.deliveries(t))[-1]
        assert accepted[0] >= 3
    finally:
        stop.set()
        thread.join(5)
        listener.close()
    for name, record in cases.items():
        assert record["event"] == "verify"
        assert record["outcome"] == name and record["attempts"] == 3, record
        assert record["status"] is None


def test_a_game_that_starts_by_a_join_or_ends_queues_notifications(key_prefix):
    """start when the last seat is taken (a join), end when the game is over: queued for
    every webhook bot seated there (no dispatcher runs here, so they stay queued)."""
    from service.arena.webhooks.keys import notify_key
    from service.http.app import create_app

    app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                      "ARENA_RATE_LIMIT": 0, "ARENA_CALLBACK_NETWORKS": f"{ALLOWED}/32"})
    c = app.test_client()
    a = c.post("/bots", json={"name": "a"}).json
    b = c.post("/bots", json={"name": "b"}).json
    auth_a = {"Authorization": f"Bearer {a['token']}"}
    auth_b = {"Authorization": f"Bearer {b['token']}"}
    assert c.put("/bots/me/callback", json={"url": f"http://{ALLOWED}:9/"},
                 headers=auth_a).status_code == 200
    # target 4: more than a kick can score (R6), so the game cannot be over before it starts
    g = c.post("/games", json={"players": 2, "variants": {"target": 4}}, headers=auth_a).json
    r = app.extensions["callbacks"].store.r
    key = notify_key(key_prefix, a["id"])
    assert r.zrange(key, 0, -1) == []  # waiting for a player: not started
    joined = c.post(f"/games/{g['id']}/seats/1", headers=auth_b)
    assert joined.status_code == 200, joined.json
    assert r.zrange(key, 0, -1) == [f"start:{g['id']}".encode()]
    assert r.zrange(notify_key(key_prefix, b["id"]), 0, -1) == []  # b has no callback
    for _ in range(2000):  # play it out by pull (a's callback is never called here)
        view = c.get(f"/games/{g['id']}").json
        if view["status"] == "finished":
            break
        token = auth_a if view["seats"][view["turn"]]["bot_id"] == a["id"] else auth_b
        mine = c.get(f"/games/{g['id']}", headers=token).json
        c.post(f"/games/{g['id']}/actions", json={"action": mine["legal_actions"][0],
                                                  "version": mine["version"]}, headers=token)
    assert sorted(r.zrange(key, 0, -1)) == sorted([f"start:{g['id']}".encode(),
                                                   f"end:{g['id']}".encode()])


def test_tournament_and_ladder_games_queue_their_start_notifications(key_prefix):
    """Games started by a tournament's step or by the ladder's matchmaker (not by a join)
    queue ``start`` for their webhook bots too, once each."""
    from service.arena.webhooks.keys import notify_key
    from service.http.app import create_app

    admin = "webhook-test-admin"
    app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                      "ARENA_RATE_LIMIT": 0, "ARENA_ADMIN_TOKEN": admin,
                      "ARENA_CALLBACK_NETWORKS": f"{ALLOWED}/32"})
    c = app.test_client()
    r = app.extensions["callbacks"].store.r
    bots = [c.post("/bots", json={"name": f"t{i}"}).json for i in range(4)]
    for bot in bots:
        assert c.put("/bots/me/callback", json={"url": f"http://{ALLOWED}:9/"},
                     headers={"Authorization": f"Bearer {bot['token']}"}).status_code == 200

    def started(bot: dict[str, Any]) -> list[str]:
        return [m.decode().partition(":")[2] for m in r.zrange(notify_key(key_prefix, bot["id"]),
                                                                 0, -1)
                if m.decode().startswith("start:")]

    # a tournament: its first games start when it is created (target 4 > any kick, R6)
    t = c.post("/tournaments", headers={"Authorization": f"Bearer {admin}"},
               json={"entrants": [bots[0]["id"], bots[1]["id"]], "format": "round_robin",
                     "games_per_pairing": 2, "parallel": 1, "variants": {"target": 4},
                     "seed": 5}).json
    live = [s["game_id"] for rd in t["rounds"] for s in rd["games"] if s["status"] == "live"]
    assert len(live) == 1
    assert started(bots[0]) == live and started(bots[1]) == live
    # the ladder: two bots join, one matchmaking pass seats them
    ladders = app.extensions["ladders"]
    for bot in bots[2:]:
        assert c.post("/ladders/2p/entry", json={},
                      headers={"Authorization": f"Bearer {bot['token']}"}).status_code in (200, 201)
    made = ladders.match_once("2p")
    assert len(made) == 1
    # the ladder's default target 14 is more than any kick can score (R6): under way
    assert c.get(f"/games/{made[0]}").json["status"] == "active"
    assert started(bots[2]) == made and started(bots[3]) == made


# --- verified callbacks and the cap per host ----------------------------


def test_an_unverified_url_receives_only_the_verification_request(service):
    """A server that does not echo the challenge gets verification requests and nothing
    else: its seat's turns fall to the move deadline's default. Once it echoes (asked
    again with ``POST /bots/me/callback/verify``) it is called as before; a new URL is
    unverified again."""
    echoing = threading.Event()

    def verify(m: dict[str, Any]) -> Answer:
        return echo(m) if echoing.is_set() else (200, b'{"ok": true}', 0.0)

    def behave(m: dict[str, Any]) -> Answer:
        if m["event"] != "turn":
            return 204, b"", 0.0
        return 200, json.dumps({"action": m["view"]["legal_actions"][0]}).encode(), 0.0

    url, seen, server = scripted_server(behave, verify=verify)
    try:
        hook_id, hook_token = service.bot("unverified")
        secret = register(service, hook_token, url, verified=False)
        game, pull_token = service.against_puller(hook_id, move_limit=1.0,
                                                  variants={"target": 3})
        gid = game["id"]
        service.play_by_pull(gid, pull_token, seconds=60, until=lambda: len(
            [t for t in service.record(gid)["timeouts"] if t["seat"] == 0]) >= 2)
        # only verification requests arrived, each signed with the bot's secret
        assert seen.messages() and {m["event"] for m in seen.messages()} == {"verify"}
        for headers, body in seen.requests:
            assert headers["Arena-Event"] == "verify"
            assert headers["Arena-Signature"] == sign(secret, headers["Arena-Timestamp"], body)
            msg = json.loads(body)
            assert msg["bot_id"] == hook_id and len(msg["challenge"]) >= 16
        records = service.deliveries(hook_token)
        assert records and {d["event"] for d in records} == {"verify"}
        assert {d["outcome"] for d in records} == {"not-verified"}
        state = service.call("GET", "/bots/me/callback", hook_token)
        assert state["verified"] is False and state["verification"]["status"] == "pending"
        assert state["verification"]["attempts"] >= 1
        assert "challenge" in state["verification"]["detail"]
        me = service.call("GET", "/bots/me", hook_token)
        assert me["callback"]["verified"] is False and me["callback"]["url"] == url
        # the seat played by the deadline's default, and no turn was called
        assert [t for t in service.record(gid)["timeouts"] if t["seat"] == 0]
        # the server answers now; asked again, the URL passes and is called as before
        echoing.set()
        assert service.call("POST", "/bots/me/callback/verify", hook_token)["url"] == url
        wait_verified(service, hook_token)
        assert service.play_by_pull(gid, pull_token)["status"] == "finished"
        turns = [d for d in service.deliveries(hook_token, gid) if d["event"] == "turn"]
        # called and applied; at a 1 s move limit a loaded machine may find a turn with no
        # time left to call (``no-time``: not called, the deadline's default plays)
        outcomes = {d["outcome"] for d in turns}
        assert "applied" in outcomes and outcomes <= {"applied", "no-time"}, turns
        assert seen.messages("turn")
        verifies = [d for d in service.deliveries(hook_token) if d["event"] == "verify"]
        assert verifies[0]["outcome"] == "verified"  # newest first
        assert service.call("GET", "/bots/me", hook_token)["callback"]["verified"] is True
        # asked again while verified: nothing is sent, the state stays (counted once the
        # calls already under way have arrived: on a loaded machine a turn claimed before
        # the game's end can reach the server a second later)
        sent = quiet_count(seen)
        assert service.call("POST", "/bots/me/callback/verify", hook_token)["verified"] is True
        # a new URL is verified afresh
        register(service, hook_token, f"http://{ALLOWED}:9/elsewhere", verified=False)
        again = service.call("GET", "/bots/me/callback", hook_token)
        assert again["verified"] is False and again["verification"]["attempts"] == 0
        time.sleep(1.0)
        assert len(seen.requests) == sent  # the old URL hears nothing more
    finally:
        server.shutdown()
        server.server_close()
    assert service.call("GET", "/bots/me", service.bot("plain")[1])["callback"] is None


def _in_process(key_prefix: str, **config: Any) -> Any:
    from service.http.app import create_app

    return create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                       "ARENA_RATE_LIMIT": 0, "ARENA_CALLBACK_NETWORKS": f"{ALLOWED}/32",
                       **config})


def test_a_url_that_fails_every_attempt_is_failed_until_asked_again(key_prefix):
    """In one process (no dispatcher: each attempt is made here, for real, over HTTP): the
    attempts of ``VERIFY_SCHEDULE_S``, then ``failed``; a failed URL's turns are not
    called; ``POST /bots/me/callback/verify`` starts again at once."""
    from service.arena.webhooks.keys import VERIFY_SCHEDULE_S, verify_key

    app = _in_process(key_prefix)
    client = app.test_client()
    callbacks = app.extensions["callbacks"]
    r = callbacks.store.r
    a = client.post("/bots", json={"name": "a"}).json
    b = client.post("/bots", json={"name": "b"}).json
    auth = {"Authorization": f"Bearer {a['token']}"}
    echoing = threading.Event()
    url, seen, server = scripted_server(
        lambda m: (200, b'{"action": "stand"}', 0.0),
        verify=lambda m: echo(m) if echoing.is_set() else (404, b"", 0.0))
    try:
        assert client.put("/bots/me/callback", json={"url": url}, headers=auth).status_code == 200
        for attempt in range(1, len(VERIFY_SCHEDULE_S) + 1):
            (member, due), = r.zrange(verify_key(key_prefix), 0, -1, withscores=True)
            bot, _, vid = member.decode().partition("|")
            assert bot == a["id"] and due > time.time() - 1
            record = callbacks.verify_once(bot, vid)
            assert record["outcome"] == "http-error" and record["status"] == 404
            state = client.get("/bots/me/callback", headers=auth).json
            assert state["verification"]["attempts"] == attempt
        assert state["verified"] is False and state["verification"]["status"] == "failed"
        assert r.zrange(verify_key(key_prefix), 0, -1) == []  # no more attempts
        g = client.post("/games", json={"players": 2, "seats": [a["id"], b["id"]],
                                        "move_limit": 30},
                        headers={"Authorization": f"Bearer {b['token']}"}).json
        game = callbacks.store.get_game(g["id"])
        assert callbacks.try_turn(a["id"], game) is False  # not verified: not called
        assert {m["event"] for m in seen.messages()} == {"verify"}
        assert len(seen.messages()) == len(VERIFY_SCHEDULE_S)
        # asked again: due at once, and passes now
        echoing.set()
        r2 = client.post("/bots/me/callback/verify", headers=auth)
        assert r2.status_code == 200 and r2.json["verification"]["status"] == "pending"
        (member, due), = r.zrange(verify_key(key_prefix), 0, -1, withscores=True)
        assert due <= time.time()
        bot, _, vid = member.decode().partition("|")
        assert callbacks.verify_once(bot, vid)["outcome"] == "verified"
        assert client.get("/bots/me/callback", headers=auth).json["verified"] is True
        # an outcome for a verification since replaced changes nothing
        assert callbacks.verify_once(bot, "0" * 16) is None
        # removing the URL drops its pending verification too
        assert client.put("/bots/me/callback", json={"url": url}, headers=auth).status_code == 200
        assert len(r.zrange(verify_key(key_prefix), 0, -1)) == 1
        assert client.delete("/bots/me/callback", headers=auth).status_code == 204
        assert r.zrange(verify_key(key_prefix), 0, -1) == []
    finally:
        server.shutdown()
        server.server_close()


def test_calls_to_one_host_are_capped_across_bots(key_prefix):
    """``ARENA_CALLBACK_HOST_RATE`` calls per second to one host, whatever the bot: 16 turns
    of 4 bots (verified URLs on one host) delivered at once; the calls counted at the
    server never exceed the cap in any second of the service's clock, the rest are
    recorded ``host-rate-limited`` with no call made (their turns keep their deadline,
    where the default action is played), and every call made was applied."""
    from concurrent.futures import ThreadPoolExecutor

    cap = 3
    app = _in_process(key_prefix, ARENA_CALLBACK_HOST_RATE=cap)
    client = app.test_client()
    callbacks = app.extensions["callbacks"]
    stamps: list[float] = []

    def behave(m: dict[str, Any]) -> Answer:
        stamps.append(time.time())
        return 200, json.dumps({"action": m["view"]["legal_actions"][0]}).encode(), 0.0

    url, seen, server = scripted_server(behave)
    try:
        # the test's bots are one owner's, so its games seat them at once
        opponent = client.post("/bots", json={"name": "o"}).json
        mine = {"Authorization": f"Bearer {opponent['token']}"}
        hooks = [client.post("/bots", json={"name": f"h{i}"}, headers=mine).json
                 for i in range(4)]
        for i, h in enumerate(hooks):
            auth = {"Authorization": f"Bearer {h['token']}"}
            assert client.put("/bots/me/callback", json={"url": f"{url}bot{i}"},
                              headers=auth).status_code == 200
            time.sleep(1.0 / cap)  # the verifications themselves are calls to the host
            assert callbacks.verify_once(h["id"], callbacks.config(h["id"])["vid"]
                                         )["outcome"] == "verified"
        turns = []
        for n in range(200):  # games until 16 of them are a hook's turn (seeds fix it)
            h = hooks[n % len(hooks)]
            g = client.post("/games", json={"players": 2, "seats": [h["id"], opponent["id"]],
                                            "move_limit": 60, "seed": n},
                            headers={"Authorization": f"Bearer {h['token']}"}).json
            game = callbacks.store.get_game(g["id"])
            if game.seats[game.state.turn] == h["id"]:
                turns.append((h["id"], game))
            if len(turns) == 16:
                break
        assert len(turns) > 3 * cap
        time.sleep(1.0)  # a fresh second for the burst's first calls
        stamps.clear()
        before = len(seen.requests)
        start = time.time()
        with ThreadPoolExecutor(len(turns)) as pool:
            records = list(pool.map(lambda t: callbacks.deliver_turn(
                t[0], callbacks.config(t[0]), t[1], 10.0), turns))
        end = time.time()
        made = len(seen.requests) - before
        limited = [d for d in records if d["outcome"] == "host-rate-limited"]
        applied = [d for d in records if d["outcome"] == "applied"]
        assert len(limited) + len(applied) == len(records), records
        assert made == len(applied) and made == len(stamps)
        seconds = int(end) - int(start) + 1  # the counting seconds the burst touched
        assert made <= cap * seconds, (made, seconds)
        assert limited and all(d["attempts"] == 0 and d["status"] is None for d in limited)
        assert all("ARENA_CALLBACK_HOST_RATE" in d["detail"] for d in limited)
        # a limited turn is the normal failure: it is the bot's last failure in that game
        game_id = limited[0]["game_id"]
        owner = next(b for b, g in turns if g.id == game_id)
        view = client.get(f"/games/{game_id}", headers={"Authorization": "Bearer " + next(
            h["token"] for h in hooks if h["id"] == owner)}).json
        assert view["callback_failure"]["outcome"] == "host-rate-limited"
        assert view["your_turn"] and view["deadline"] is not None  # the default at the deadline
    finally:
        server.shutdown()
        server.server_close()


def test_a_webhook_bot_hears_that_its_tournament_starts(key_prefix, monkeypatch):
    """A tournament a webhook bot entered starts: a ``tournament_starting`` notification is
    queued for it, and delivered as a ``TournamentNoticeRequest`` carrying the notice that
    ``GET /bots/me/turns`` lists; the delivery is recorded."""
    from types import SimpleNamespace

    from service.arena.webhooks.keys import notify_key
    from service.http.app import create_app
    from service.http.webhooks.schemas import TournamentNoticeRequest

    app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                      "ARENA_RATE_LIMIT": 0, "ARENA_CALLBACK_NETWORKS": f"{ALLOWED}/32",
                      "ARENA_TOURNAMENT_SCHEDULE": "[]"})
    c = app.test_client()
    hook = c.post("/bots", json={"name": "hooked"}).json
    puller = c.post("/bots", json={"name": "puller"}).json
    auth = {"Authorization": f"Bearer {hook['token']}"}
    assert c.put("/bots/me/callback", json={"url": f"http://{ALLOWED}:9/"},
                 headers=auth).status_code == 200
    t = c.post("/tournaments", headers=auth, json={
        "format": "swiss", "registration": "open", "rounds": 1, "max_entrants": 4,
        "variants": {"target": 4}}).json
    for token in (hook["token"], puller["token"]):
        r = c.post(f"/tournaments/{t['id']}/entrants", json={},
                   headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 201, r.json
    assert c.post(f"/tournaments/{t['id']}/start", headers=auth).status_code == 200
    callbacks = app.extensions["callbacks"]
    key = notify_key(key_prefix, hook["id"])
    assert f"tournament_starting:{t['id']}".encode() in callbacks.store.r.zrange(key, 0, -1)
    sent = []

    def call(cfg, envelope, budget):
        sent.append(envelope)
        return SimpleNamespace(status=200, error=None, detail=None, attempts=1, body=b"")

    monkeypatch.setattr(callbacks, "call", call)
    callbacks.notify_due(hook["id"], callbacks.config(hook["id"]))
    notices = [e for e in sent if e["event"] == "tournament_starting"]
    assert len(notices) == 1
    assert notices[0]["tournament"]["tournament_id"] == t["id"]
    assert TournamentNoticeRequest().validate(notices[0]) == {}
    listed = c.get("/bots/me/turns", query_string={"timeout": 0}, headers=auth).json
    assert listed["tournaments"][0] == notices[0]["tournament"]
    records = c.get("/bots/me/callback/deliveries", headers=auth).json["deliveries"]
    assert any(d["event"] == "tournament_starting" and d["outcome"] == "delivered"
               for d in records)


def test_a_hosts_calls_are_counted_by_port_and_shared_among_owners(key_prefix):
    """The host budget is keyed by host *and port*, and each owner called there has an
    equal share of it: an owner that takes the whole second leaves the next second half
    to an owner that showed up, and a callback on another port of the same host name has
    its own budget (a stranger's server on the same host cannot take a bot's calls)."""
    cap = 10
    app = _in_process(key_prefix, ARENA_CALLBACK_HOST_RATE=cap, ARENA_OWNERS_PER_NETWORK=0)
    client = app.test_client()
    callbacks = app.extensions["callbacks"]
    flooder = client.post("/bots", json={"name": "flood"}).json["id"]
    victim = client.post("/bots", json={"name": "victim"}).json["id"]
    assert app.extensions["arena"].owners.owner_of(flooder) != \
        app.extensions["arena"].owners.owner_of(victim)

    second = int(time.time()) + 100  # each step counts in a second of its own

    def calls(bot: str, url: str, n: int, at: int) -> int:
        return sum(callbacks._host_refuses(url, bot, at) is None for _ in range(n))

    assert calls(flooder, "https://bots.example:8443/a", 3 * cap, second) == cap  # alone
    refused = callbacks._host_refuses("https://bots.example:8443/b", victim, second)
    assert refused is not None and "ARENA_CALLBACK_HOST_RATE" in refused
    # another port of the same host name is another budget
    assert calls(flooder, "https://bots.example:9000/x", cap, second) == cap
    # the next second both are active: half each, whatever the flooder sends first
    assert calls(flooder, "https://bots.example:8443/a", 3 * cap, second + 1) == cap // 2
    assert calls(victim, "https://bots.example:8443/b", cap, second + 1) == cap // 2
    # the default port is the scheme's
    assert calls(flooder, "https://bots.example/a", cap, second + 2) == cap
    assert calls(flooder, "https://bots.example:443/a", 1, second + 2) == 0
