"""The held budget: streams and long-polls together hold at most ``ARENA_HELD_SHARE`` of
a worker's connections, one network at most ``ARENA_HELD_NETWORK_SHARE`` of that, and
ordinary requests are served whatever holds the rest.

A dozen addresses once took every connection of both workers with long-polls, and a
client that opened a connection per request was refused half its reads and actions,
refusals that the access log never showed. Here: past the budget a poll is refused with
the stable problem types (503 ``over-capacity`` for the worker's budget, 429
``too-many-connections`` for a network's share), whether the worker refuses it at the
socket (a new connection) or the app does (a kept-alive one); another network still
gets its polls while one is at its share; a read, an action and an action with ``?wait``
are served while the budget is full; and every refusal, the worker's own at its
connection cap included, is an access line and a count in the metrics.

Every server is a real ``allfours serve`` (one gunicorn worker, so that its counts are
the service's) on the shared Redis under the test's own key prefix; the clients are real
sockets bound to loopback addresses of different /24 networks (127.0.0.0/8 is all
loopback). Nothing here asserts a time.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service.http.connections import held_cap, held_network_cap
from tests.conftest import REDIS_URL
from tests.test_connections import read_answer
from tests.test_serve import Serve, kill_leftovers, wait_for

EXPECTED_S = 30  # seconds, the whole module

NET_A = ("127.30.0.1", "127.30.0.2")  # two addresses of one /24
NET_B = "127.31.0.1"  # another /24
HONEST = "127.32.0.1"  # a third, which holds nothing


@pytest.fixture
def served(tmp_path: Path, key_prefix: str) -> Iterator[Any]:
    """A factory of one-worker ``allfours serve`` processes with ``env``; all stopped."""
    started: list[Serve] = []

    def start(**env: str) -> Serve:
        process = Serve(tmp_path, None, 1, REDIS_URL=REDIS_URL, ARENA_KEY_PREFIX=key_prefix,
                        ARENA_RATE_LIMIT="0", ARENA_SWEEPER="0", ARENA_CALLBACKS="0",
                        ARENA_HOUSE_BOTS="0", **env)
        started.append(process)
        process.wait_healthy()
        return process

    yield start
    for process in started:
        process.stop()
        kill_leftovers(process.seen)


def call(port: int, method: str, path: str, body: Any = None, token: str | None = None,
         source: str = HONEST,
         conn: http.client.HTTPConnection | None = None) -> tuple[int, dict[str, str], Any]:
    """One JSON request from ``source`` (on ``conn`` if given, else a new connection):
    (status, headers in lower case, body)."""
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=30,
                                              source_address=(source, 0))
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn.request(method, path, json.dumps(body) if body is not None else None, headers)
        r = conn.getresponse()
        data = r.read()
        return (r.status, {k.lower(): v for k, v in r.getheaders()},
                json.loads(data) if data else None)
    finally:
        if own:
            conn.close()


def bots(port: int, n: int) -> list[dict[str, Any]]:
    """``n`` bots of one owner (the first registers the others: seated at once)."""
    first = call(port, "POST", "/bots", {"name": "held0"})[2]
    return [first] + [call(port, "POST", "/bots", {"name": f"held{i}"}, first["token"])[2]
                      for i in range(1, n)]


def poll(port: int, token: str, source: str, timeout: int = 30) -> socket.socket:
    """A long-poll (``/bots/me/turns?timeout``) from ``source``, left waiting."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.settimeout(30)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET /bots/me/turns?timeout={timeout} HTTP/1.1\r\nHost: t\r\n"
                 f"Authorization: Bearer {token}\r\n\r\n".encode())
    return sock


def answer(sock: socket.socket) -> tuple[int, dict[str, str], Any]:
    """The answer on ``sock`` (Content-Length framed): (status, headers, JSON body)."""
    status, headers, body = read_answer(sock)
    return status, headers, json.loads(body) if body else None


def metrics_text(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/metrics")
        return conn.getresponse().read().decode()
    finally:
        conn.close()


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample of ``text`` (0 when absent); the exposition writes the
    labels in name order."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pattern = re.escape(name) + (r"\{" + re.escape(want) + r"\}" if want else "") + r" (\S+)"
    found = re.search(r"^" + pattern + r"$", text, re.M)
    return float(found.group(1)) if found else 0.0


def open_polls(port: int) -> float:
    return metric(metrics_text(port), "allfours_open_long_polls")


def access_lines(s: Serve) -> list[dict[str, Any]]:
    out = []
    for line in s.output().splitlines():
        if '"allfours.access"' in line:
            out.append(json.loads(line))
    return out


def test_the_budgets_are_shares_of_the_worker_budget() -> None:
    cfg = {"ARENA_WORKER_CONNECTIONS": 2000, "ARENA_RESERVED_CONNECTIONS": 16,
           "ARENA_HELD_SHARE": 0.75, "ARENA_HELD_NETWORK_SHARE": 0.125}
    assert held_cap(cfg) == 1488  # a quarter of 1,984 left for ordinary requests
    assert held_network_cap(cfg) == 186  # eight networks to fill it
    assert held_cap({**cfg, "ARENA_HELD_SHARE": 0}) == 0  # off
    assert held_cap({**cfg, "ARENA_HELD_SHARE": 1}) == 0  # the whole budget: no cap of its own
    assert held_network_cap({**cfg, "ARENA_HELD_NETWORK_SHARE": 0}) == 0
    # without a held budget, a network's share is of the worker's general budget
    assert held_network_cap({**cfg, "ARENA_HELD_SHARE": 0}) == 248


def test_the_worker_tells_a_held_request_from_its_request_line(redis_client) -> None:
    """What the worker refuses at the socket when the held budget is full is what the app
    counts in it: streams and long-polls, never an action (served without its wait)."""
    from service.http.app import create_app
    from service.http.worker_refusals import Refusals

    waits = Refusals(create_app({"REDIS_URL": REDIS_URL}), False).waits
    game = "/games/0123456789ab"
    for line, held in [(b"GET /bots/me/turns?timeout=30 HTTP/1.1\r\n", True),
                       (b"GET /bots/me/turns?playing=a,b&timeout=2.5 HTTP/1.1\r\n", True),
                       (b"GET /bots/me/turns HTTP/1.1\r\n", True),  # its default wait
                       (b"GET /bots/me/turns?timeout=0 HTTP/1.1\r\n", False),
                       (b"GET " + game.encode() + b"/events HTTP/1.1\r\n", True),
                       (b"GET " + game.encode() + b"/turn?timeout=5 HTTP/1.1\r\n", True),
                       (b"POST " + game.encode() + b"/actions?wait=5 HTTP/1.1\r\n", False),
                       (b"GET /games HTTP/1.1\r\n", False),
                       (b"GET /nowhere?timeout=5 HTTP/1.1\r\n", False),
                       (b"GET /bots/me/turns?timeout=30", False),  # no whole line: the app's
                       (b"", False)]:
        assert waits(line) is held, line


def test_past_the_held_budget_polls_are_refused_and_ordinary_requests_served(
        served) -> None:
    """The worker's held budget (8 of 36) full of polls from three networks: the next
    poll is 503 ``over-capacity`` with Retry-After, on a new connection (refused by the
    worker at the socket) and on a kept-alive one (by the app); meanwhile a read, an
    action and an action with ``?wait`` (applied, answered at once) from another address
    are served, and each refusal is an access line and a count in the metrics."""
    cap, reserve, share = 40, 4, 0.25
    held = int((cap - reserve) * share)
    s = served(ARENA_WORKER_CONNECTIONS=str(cap), ARENA_RESERVED_CONNECTIONS=str(reserve),
               ARENA_HELD_SHARE=str(share), ARENA_HELD_NETWORK_SHARE="0")
    pollers = bots(s.port, 2)
    players = bots(s.port, 2)
    game = call(s.port, "POST", "/games", {"players": 2, "seats": [b["id"] for b in players]},
                players[0]["token"])[2]
    sources = [*NET_A, NET_B]
    holding = [poll(s.port, pollers[i % 2]["token"], sources[i % 3]) for i in range(held)]
    try:
        wait_for(lambda: open_polls(s.port) >= held, 30, f"{held} polls held")
        # a new connection: refused by the worker before the app sees it
        with poll(s.port, pollers[0]["token"], HONEST) as sock:
            status, headers, body = answer(sock)
        assert status == 503, body
        assert body["type"] == "/problems/over-capacity"
        assert "ARENA_HELD_SHARE" in body["detail"]
        assert int(headers["retry-after"]) >= 1
        assert headers["connection"] == "close"
        # a kept-alive connection's second request: refused by the app, the same answer
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30,
                                          source_address=(HONEST, 0))
        try:
            assert call(s.port, "GET", "/games", conn=conn)[0] == 200
            status, headers, body = call(s.port, "GET", "/bots/me/turns?timeout=30",
                                         token=pollers[1]["token"], conn=conn)
        finally:
            conn.close()
        assert status == 503, body
        assert body["type"] == "/problems/over-capacity"
        assert "ARENA_HELD_SHARE" in body["detail"]
        assert headers["connection"] == "close"

        # ordinary requests are served meanwhile, each on a new connection
        assert call(s.port, "GET", "/games")[0] == 200
        turn = call(s.port, "GET", f"/games/{game['id']}")[2]["turn"]
        token = players[turn]["token"]
        view = call(s.port, "GET", f"/games/{game['id']}", token=token)[2]
        status, _, after = call(s.port, "POST", f"/games/{game['id']}/actions",
                                {"action": view["legal_actions"][0],
                                 "version": view["version"]}, token)
        assert status == 200 and after["version"] == view["version"] + 1, after
        # an action with ?wait: applied, and answered without its wait (no place to wait)
        turn = call(s.port, "GET", f"/games/{game['id']}")[2]["turn"]
        token = players[turn]["token"]
        view = call(s.port, "GET", f"/games/{game['id']}", token=token)[2]
        status, _, after = call(s.port, "POST", f"/games/{game['id']}/actions?wait=30",
                                {"action": view["legal_actions"][0],
                                 "version": view["version"]}, token)
        assert status == 200 and after["version"] == view["version"] + 1, after

        text = metrics_text(s.port)
        assert metric(text, "allfours_connections_refused_total", limit="held") == 2
        assert metric(text, "allfours_action_waits_skipped_total", limit="held") == 1
        assert metric(text, "allfours_problems_total", type="over-capacity") == 2
    finally:
        for sock in holding:
            sock.close()
    refused = [line for line in access_lines(s)
               if line["status"] == 503 and line["route"] == "/bots/me/turns"]
    assert len(refused) == 2, refused  # the worker's and the app's refusal alike
    assert [line.get("limit") for line in refused].count("held") == 1  # the worker's


def test_one_network_holds_only_its_share_while_another_is_admitted(served) -> None:
    """A network (two addresses of one /24) holds its share of the held budget (4); its
    next poll, from either address, is 429 ``too-many-connections`` naming
    ``ARENA_HELD_NETWORK_SHARE``, while a poll from another /24 is still admitted (it
    waits, and answers 200 at its timeout)."""
    cap, reserve = 40, 4
    s = served(ARENA_WORKER_CONNECTIONS=str(cap), ARENA_RESERVED_CONNECTIONS=str(reserve),
               ARENA_HELD_SHARE="0.5", ARENA_HELD_NETWORK_SHARE="0.25")
    share = int(int((cap - reserve) * 0.5) * 0.25)
    pollers = bots(s.port, 2)
    holding = [poll(s.port, pollers[i % 2]["token"], NET_A[i % 2]) for i in range(share)]
    try:
        wait_for(lambda: open_polls(s.port) >= share, 30, f"{share} polls held")
        for source in NET_A:
            with poll(s.port, pollers[0]["token"], source) as sock:
                status, headers, body = answer(sock)
            assert status == 429, body
            assert body["type"] == "/problems/too-many-connections"
            assert "ARENA_HELD_NETWORK_SHARE" in body["detail"]
            assert int(headers["retry-after"]) >= 1
        with poll(s.port, pollers[1]["token"], NET_B, timeout=1) as sock:
            status, _, body = answer(sock)
        assert status == 200 and body["timed_out"] is True, body
        text = metrics_text(s.port)
        assert metric(text, "allfours_connections_refused_total", limit="held-network") == 2
    finally:
        for sock in holding:
            sock.close()
    lines = [line for line in access_lines(s) if line.get("limit") == "held-network"]
    assert len(lines) == 2 and all(line["status"] == 429 for line in lines), lines


def test_a_worker_at_its_cap_logs_and_counts_its_refusals(served) -> None:
    """A worker at its connection cap answers 503 ``over-capacity`` at the socket, before
    the app: each such answer is an access line (the route, the limit, a request id that
    the answer carries too) and a count in the metrics, which the app never saw."""
    cap, reserve = 20, 4
    s = served(ARENA_WORKER_CONNECTIONS=str(cap), ARENA_RESERVED_CONNECTIONS=str(reserve),
               ARENA_CLIENT_SHARE="1", ARENA_BODY_TIMEOUT="120",
               ARENA_HELD_SHARE="0")  # one client may take every connection
    held = []
    try:
        for _ in range(cap - reserve):  # slow bodies hold every general connection
            sock = socket.create_connection(("127.0.0.1", s.port), timeout=30)
            sock.sendall(b"POST /bots HTTP/1.1\r\nHost: t\r\nContent-Type: application/json"
                         b"\r\nContent-Length: 1000\r\n\r\n{")
            held.append(sock)

        def refused() -> bool:
            return call(s.port, "GET", "/games?limit=3")[0] == 503

        wait_for(refused, 30, "the worker at its cap")
        status, headers, body = call(s.port, "GET", "/games?limit=3")
        assert status == 503 and body["type"] == "/problems/over-capacity"
        rid = headers["x-request-id"]
        text = metrics_text(s.port)  # served from the probes' reserve
        assert metric(text, "allfours_connections_refused_total", limit="worker") >= 2
        assert metric(text, "allfours_problems_total", type="over-capacity") >= 2
        assert metric(text, "allfours_http_requests_total", route="/games", method="GET",
                      status="503") >= 2
    finally:
        for sock in held:
            sock.close()
    lines = [line for line in access_lines(s) if line.get("limit") == "worker"]
    assert lines and all(line["status"] == 503 and line["route"] == "/games" for line in lines)
    assert rid in {line["request_id"] for line in lines}


def test_one_client_takes_only_its_share_of_the_room_left_to_ordinary_requests(
        served) -> None:
    """Of the 36 connections of the worker, streams and polls may hold 18; one address
    may hold 9 in all (``ARENA_CLIENT_SHARE`` 0.25), but of those its own streams and polls
    do not hold only a quarter of the other 18 (4): its fifth idle connection is refused
    429 at the socket, while another address still connects, and its polls still count
    apart (a poll it holds leaves its share of that room as it was)."""
    cap, reserve = 40, 4
    s = served(ARENA_WORKER_CONNECTIONS=str(cap), ARENA_RESERVED_CONNECTIONS=str(reserve),
               ARENA_HELD_SHARE="0.5", ARENA_HELD_NETWORK_SHARE="0",
               ARENA_CLIENT_SHARE="0.25", ARENA_BODY_TIMEOUT="120")
    other = int((cap - reserve) * 0.5 * 0.25)
    pollers = bots(s.port, 1)
    source = NET_A[0]
    held: list[socket.socket] = [poll(s.port, pollers[0]["token"], source)]
    try:
        wait_for(lambda: open_polls(s.port) >= 1, 30, "a poll held")
        for _ in range(other):  # slow bodies: connections no stream or poll holds
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((source, 0))
            sock.settimeout(30)
            sock.connect(("127.0.0.1", s.port))
            sock.sendall(b"POST /bots HTTP/1.1\r\nHost: t\r\nContent-Type: application/json"
                         b"\r\nContent-Length: 1000\r\n\r\n{")
            held.append(sock)

        def refused() -> bool:
            return call(s.port, "GET", "/games?limit=1", source=source)[0] == 429

        wait_for(refused, 30, "the client's share of the ordinary room taken")
        status, _, body = call(s.port, "GET", "/games?limit=1", source=source)
        assert status == 429 and body["type"] == "/problems/too-many-connections", body
        assert call(s.port, "GET", "/games?limit=1", source=NET_B)[0] == 200
    finally:
        for sock in held:
            sock.close()
    lines = [line for line in access_lines(s) if line.get("limit") == "client-share"]
    assert lines and all(line["status"] == 429 for line in lines), lines
