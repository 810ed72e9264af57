"""Connection limits and deadlines: a slow body is a 408 and a closed
connection, a body that cannot be framed a 400 problem and no traceback, streams and
long-polls capped per client and per bot (429 with Retry-After, a freed slot admits
again), the probes answered from their reserve while the rest of the budget is taken,
and one client held to its share of a worker's connections.

Every server here is a real ``allfours serve`` (gunicorn, the project's gevent worker,
one worker so that its per-process counts are the whole service's) on the shared Redis
under the test's own key prefix; every client a real socket. Deadlines are asserted as
behaviour (the answer, the closed connection) with slack of many times the setting,
never as tight times.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service.http.connections import Slots, client_key, waiting_kind
from tests.conftest import REDIS_URL, missing
from tests.test_serve import Serve, kill_leftovers, wait_for

# each test starts what it needs (no module-wide service): pytest-xdist may run them on
# different workers (tests/conftest.py)
SPREAD_OVER_WORKERS = True
EXPECTED_S = 50  # seconds, the whole module: the order workers take it in (tests/conftest.py)

# --- the client an address belongs to ---------------------------------------------------------


def test_an_ipv4_address_is_its_own_client() -> None:
    assert client_key("203.0.113.7") == "203.0.113.7"
    assert client_key("203.0.113.7") != client_key("203.0.113.8")


def test_an_ipv6_64_counts_as_one_client() -> None:
    a = client_key("2001:db8:1:2::1")
    b = client_key("2001:db8:1:2:ffff:ffff:ffff:fffe")
    assert a == b == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::1") != a  # the next /64 is another client
    assert client_key("2001:DB8:1:2:0:0:0:9") == a  # any spelling
    assert client_key("fe80::1%eth0") == client_key("fe80::2")  # a zone names no host


def test_an_ipv4_mapped_address_counts_as_the_ipv4_it_maps() -> None:
    assert client_key("::ffff:203.0.113.7") == "203.0.113.7"
    assert client_key("::ffff:cb00:7107") == "203.0.113.7"  # the same, in hex
    assert client_key("0:0:0:0:0:ffff:203.0.113.7") == "203.0.113.7"


def test_an_address_that_is_no_address_is_counted_as_given() -> None:
    assert client_key("not-an-address") == "not-an-address"
    assert client_key(None) == client_key("") == "-"


def test_slots_are_taken_all_or_none_and_given_back() -> None:
    slots = Slots()
    want = [("streams-client", "a", 2), ("streams-bot", "b", 1)]
    assert slots.take(want) is None
    assert slots.take(want) == ("streams-bot", 1)  # the bot is full: nothing taken
    assert slots.counts[("streams-client", "a")] == 1
    slots.give_back(want)
    assert slots.counts == {}  # nothing left behind once all are given back
    assert slots.take([("polls-client", "a", 0)] * 5) is None  # cap 0: unlimited


def test_which_requests_hold_their_connection_waiting() -> None:
    assert waiting_kind("games.events", {}) == "stream"
    assert waiting_kind("games.turn", {"timeout": 5}) == "poll"
    assert waiting_kind("games.turn", {"timeout": 0}) is None
    assert waiting_kind("games.my_turns", {"timeout": 30}) == "poll"
    # no timeout: its default wait (25 s), counted as any other poll
    assert waiting_kind("games.my_turns", {}) == "poll"
    assert waiting_kind("games.turn", {"seat": "1"}) == "poll"
    assert waiting_kind("games.act", {"wait": 2}) == "poll"
    assert waiting_kind("games.act", {"wait": 0}) is None
    assert waiting_kind("games.get_game", {}) is None
    # the raw query, before validation: a bad value waits for nothing (then a 422)
    assert waiting_kind("games.turn", {"timeout": "2.5"}) == "poll"
    assert waiting_kind("games.turn", {"timeout": "soon"}) is None
    assert waiting_kind("games.act", {"wait": "0"}) is None


# --- served ------------------------------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path, key_prefix: str, redis_client) -> Iterator[Any]:
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


def connect(port: int, timeout: float = 30) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def read_answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One answer with a Content-Length body: (status, headers in lower case, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(65536)
        if not more:
            raise AssertionError(f"closed before an answer: {data!r}")
        data += more
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip()
               for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        more = sock.recv(65536)
        if not more:
            break
        rest += more
    return int(lines[0].split()[1]), headers, rest[:length]


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """Whether the server closes ``sock`` (EOF or a reset) within ``within`` seconds."""
    sock.settimeout(within)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


def problem(body: bytes) -> dict[str, Any]:
    return json.loads(body)


def post_head(path: str, length: int, token: str | None = None) -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n{auth}"
            f"Content-Length: {length}\r\n\r\n").encode()


def json_call(port: int, method: str, path: str, body: Any = None,
              token: str | None = None) -> Any:
    import requests

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    r = requests.request(method, f"http://127.0.0.1:{port}{path}", json=body,
                         headers=headers, timeout=30)
    assert r.status_code in (200, 201), (r.status_code, r.text)
    return r.json()


def two_player_game(port: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    first = json_call(port, "POST", "/bots", {"name": "conn0"})
    # one owner's two bots (registered with the first's token): seated at once
    bots = [first, json_call(port, "POST", "/bots", {"name": "conn1"}, first["token"])]
    game = json_call(port, "POST", "/games", {"players": 2, "seats": [b["id"] for b in bots]},
                     bots[0]["token"])
    return bots, game


BODY_TIMEOUT_S = 2.0


def test_a_slow_body_is_answered_408_and_its_connection_closed(served) -> None:
    """The slow-body attack: a ``POST /bots`` head with ``Content-Length: 1000`` and 10
    bytes of body. It was held open for 180 s and more; now the answer is a 408 problem
    once the body deadline passes, and the server closes the connection."""
    s = served(ARENA_BODY_TIMEOUT=str(BODY_TIMEOUT_S))
    with connect(s.port, timeout=BODY_TIMEOUT_S * 15) as sock:
        sock.sendall(post_head("/bots", 1000) + b'{"name": "')
        status, headers, body = read_answer(sock)
        assert status == 408, body
        assert headers["content-type"] == "application/problem+json"
        assert problem(body)["type"] == "/problems/request-timeout"
        # the body deadline answered, the one configured (not another timer of the server)
        assert problem(body)["detail"] == (
            f"the request body did not arrive within {BODY_TIMEOUT_S:g} s")
        assert headers["connection"] == "close"
        assert closed_by_server(sock, BODY_TIMEOUT_S * 15), "the connection stayed open"
    assert "Traceback" not in s.output()


def test_a_body_the_app_does_not_read_is_drained_only_until_its_deadline(served) -> None:
    """``GET /healthz`` with a body that never comes: answered, then closed at the body
    deadline instead of waiting for the rest."""
    s = served(ARENA_BODY_TIMEOUT=str(BODY_TIMEOUT_S))
    with connect(s.port, timeout=BODY_TIMEOUT_S * 15) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\nab")
        status, _, _ = read_answer(sock)
        assert status == 200
        assert closed_by_server(sock, BODY_TIMEOUT_S * 15)


MALFORMED_CHUNKED = {
    "chunk size zz": b"zz\r\n",
    "chunk size with junk": b"5x\r\n{\"a\":\r\n0\r\n\r\n",
    "missing chunk terminator": b"4\r\n{\"na0\r\n\r\n",
    "bad trailer": b"2\r\n{}\r\n0\r\nbad trailer\r\n\r\n",
}
BAD_HEADS = {
    "content length not a number": b"Content-Length: abc\r\n",
    "negative content length": b"Content-Length: -1\r\n",
    "two content lengths": b"Content-Length: 2\r\nContent-Length: 3\r\n",
    "a list as content length": b"Content-Length: 1, 2\r\n",
    "content length and chunked": b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n",
    "an unknown transfer coding": b"Transfer-Encoding: gzip\r\n",
}


def test_every_malformed_body_is_a_400_problem_without_a_traceback(served) -> None:
    """A malformed chunked body answered ``500 /problems/internal`` with a logged
    traceback on every endpoint that reads a body; so does none now, and a bad
    Content-Length or Transfer-Encoding is a problem too, not gunicorn's HTML page."""
    s = served()
    bots, game = two_player_game(s.port)
    token = bots[0]["token"]
    paths = ["/bots", "/games", f"/games/{game['id']}/actions", "/house/games"]
    for path in paths:
        for name, body in MALFORMED_CHUNKED.items():
            with connect(s.port) as sock:
                auth = f"Authorization: Bearer {token}\r\n".encode() \
                    if path != "/bots" else b""
                sock.sendall(f"POST {path} HTTP/1.1\r\nHost: t\r\n".encode() + auth
                             + b"Content-Type: application/json\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n" + body)
                status, headers, answer = read_answer(sock)
                assert status == 400, (path, name, answer)
                assert headers["content-type"] == "application/problem+json", (path, name)
                assert problem(answer)["type"] == "/problems/malformed-body", (path, name)
                assert closed_by_server(sock, 30), (path, name, "left open")
    for name, head in BAD_HEADS.items():
        with connect(s.port) as sock:
            sock.sendall(b"POST /bots HTTP/1.1\r\nHost: t\r\n"
                         b"Content-Type: application/json\r\n" + head + b"\r\n{}")
            status, headers, answer = read_answer(sock)
            assert status == 400, (name, answer)
            assert headers["content-type"] == "application/problem+json", name
            assert problem(answer)["type"] == "/problems/malformed-body", (name, answer)
    output = s.output()
    assert "Traceback" not in output, output[-3000:]
    assert "/problems/internal" not in output
    assert '"status":500' not in output.replace(" ", "")


def open_stream(port: int, game_id: str, token: str | None = None) -> tuple[socket.socket,
                                                                             int, bytes]:
    sock = connect(port)
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    sock.sendall(f"GET /games/{game_id}/events HTTP/1.1\r\nHost: t\r\n{auth}\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(4096)
        if not more:
            break
        data += more
    return sock, int(data.split()[1]), data


def test_streams_are_capped_per_client_429_with_retry_after_and_a_freed_slot_admits(
        served) -> None:
    """N streams from one address are served, the next is 429 ``too-many-connections``
    with Retry-After (never queued), and once one closes another is admitted."""
    cap = 3
    s = served(ARENA_STREAMS_PER_CLIENT=str(cap), ARENA_SSE_KEEPALIVE="0.3")
    _, game = two_player_game(s.port)
    streams = []
    try:
        for _ in range(cap):
            sock, status, head = open_stream(s.port, game["id"])
            streams.append(sock)
            assert status == 200, head
        sock, status, head = open_stream(s.port, game["id"])
        with sock:
            assert status == 429, head
            assert b"retry-after: " in head.lower()
            assert b"/problems/too-many-connections" in head + sock.recv(4096)
            assert b"connection: close" in head.lower()
            assert closed_by_server(sock, 30), "a refused stream's connection left open"
        streams.pop().close()  # noticed at the stream's next keep-alive write

        def admitted() -> bool:
            sock, status, _ = open_stream(s.port, game["id"])
            if status == 200:
                streams.append(sock)
                return True
            sock.close()
            return False

        wait_for(admitted, 30, "a stream admitted once a slot is free")
    finally:
        for sock in streams:
            sock.close()


def test_long_polls_are_capped_per_bot_and_a_slot_frees_when_a_poll_ends(served) -> None:
    """A bot may hold N long-polls at once (``/bots/me/turns?timeout``); the next is 429
    at once; when the polls end (their timeout), new ones are admitted. Another bot from
    the same address is not held back by the first one's cap."""
    cap = 2
    poll_s = 2
    s = served(ARENA_POLLS_PER_BOT=str(cap), ARENA_POLLS_PER_CLIENT="50")
    bots = [json_call(s.port, "POST", "/bots", {"name": f"poll{i}"}) for i in range(2)]

    def poll(token: str) -> socket.socket:
        sock = connect(s.port)
        sock.sendall(f"GET /bots/me/turns?timeout={poll_s} HTTP/1.1\r\nHost: t\r\n"
                     f"Authorization: Bearer {token}\r\n\r\n".encode())
        return sock

    held = [poll(bots[0]["token"]) for _ in range(cap)]
    try:
        time.sleep(0.5)  # the held polls are waiting (none has answered: no turn)
        with poll(bots[0]["token"]) as sock:
            status, headers, body = read_answer(sock)
            assert status == 429, body
            assert int(headers["retry-after"]) >= 1
            assert problem(body)["type"] == "/problems/too-many-connections"
            assert "ARENA_POLLS_PER_BOT" in problem(body)["detail"]
            assert headers["connection"] == "close"
            assert closed_by_server(sock, 30), "a refused poll's connection left open"
        with poll(bots[1]["token"]) as other:  # another bot: its own cap
            status, _, body = read_answer(other)
            assert status == 200 and json.loads(body)["timed_out"] is True
        for sock in held:  # the polls end by their timeout: their slots are free
            status, _, _ = read_answer(sock)
            assert status == 200
        with poll(bots[0]["token"]) as sock:
            status, _, body = read_answer(sock)
            assert status == 200, body
    finally:
        for sock in held:
            sock.close()


def hold_slow_bodies(port: int, count: int) -> list[socket.socket]:
    """``count`` connections each holding a request whose body never completes."""
    held = []
    for _ in range(count):
        sock = connect(port)
        sock.sendall(post_head("/bots", 1000) + b'{"name"')
        held.append(sock)
    return held


def get(port: int, path: str) -> tuple[int, dict[str, str], bytes]:
    with connect(port, timeout=20) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        return read_answer(sock)


def test_probes_answer_from_their_reserve_while_the_rest_of_the_budget_is_taken(
        served) -> None:
    """One client holds every general connection of the worker (slow bodies): the
    probes still answer 200 from the reserve, anything else is refused at once with 503
    ``over-capacity`` (not "the game store is unavailable")."""
    cap, reserve = 20, 4
    s = served(ARENA_WORKER_CONNECTIONS=str(cap), ARENA_RESERVED_CONNECTIONS=str(reserve),
               ARENA_CLIENT_SHARE="1", ARENA_BODY_TIMEOUT="120",
               # no held budget: else one client's other connections are held to its
               # share of the room the budget leaves (tests/test_held_budget.py)
               ARENA_HELD_SHARE="0")
    held = hold_slow_bodies(s.port, cap - reserve)
    try:
        def full() -> bool:
            return get(s.port, "/games")[0] == 503

        wait_for(full, 30, "the general budget taken")
        status, headers, body = get(s.port, "/games")
        assert status == 503
        assert headers["retry-after"] == "1"
        assert problem(body)["type"] == "/problems/over-capacity"
        assert "game store" not in problem(body)["title"]
        for _ in range(3):  # more probes than one: each answered, then its slot is free
            for path in ("/healthz", "/readyz", "/metrics"):
                status, _, body = get(s.port, path)
                assert status == 200, (path, body)
    finally:
        for sock in held:
            sock.close()


def test_one_client_is_held_to_its_share_of_the_connections(served) -> None:
    """With ``ARENA_CLIENT_SHARE`` 0.5, one address holds at most half the general budget;
    its next connection is 429 ``too-many-connections`` at once, while the worker still
    has room for others."""
    cap, reserve = 20, 4
    share = (cap - reserve) // 2
    s = served(ARENA_WORKER_CONNECTIONS=str(cap), ARENA_RESERVED_CONNECTIONS=str(reserve),
               ARENA_CLIENT_SHARE="0.5", ARENA_BODY_TIMEOUT="120",
               ARENA_HELD_SHARE="0")  # the share of the whole budget, alone
    held = hold_slow_bodies(s.port, share)
    try:
        def refused() -> bool:
            return get(s.port, "/bots/none")[0] == 429

        wait_for(refused, 30, "the client's share taken")
        status, headers, body = get(s.port, "/bots/none")
        assert status == 429
        assert problem(body)["type"] == "/problems/too-many-connections"
        assert headers["retry-after"] == "1"
    finally:
        for sock in held:
            sock.close()
    wait_for(lambda: get(s.port, "/healthz")[0] == 200, 30, "served again")


def test_spectators_hold_only_their_share_and_a_seat_is_admitted_past_it(served) -> None:
    """Anonymous event streams together hold at most ``ARENA_SPECTATOR_SHARE`` of the
    worker's budget (503 ``over-capacity`` past it); a seat's stream of the same game is
    still admitted, and so are the players' actions: players keep priority."""
    cap, reserve, share = 20, 4, 0.25
    spectators = int((cap - reserve) * share)
    s = served(ARENA_WORKER_CONNECTIONS=str(cap), ARENA_RESERVED_CONNECTIONS=str(reserve),
               ARENA_SPECTATOR_SHARE=str(share), ARENA_CLIENT_SHARE="1",
               # every stream comes from this one network (tests/test_held_budget.py
               # has the networks' shares)
               ARENA_HELD_NETWORK_SHARE="0")
    bots, game = two_player_game(s.port)
    streams = []
    try:
        for _ in range(spectators):
            sock, status, head = open_stream(s.port, game["id"])
            streams.append(sock)
            assert status == 200, head
        sock, status, head = open_stream(s.port, game["id"])
        with sock:
            assert status == 503, head
            assert b"/problems/over-capacity" in head + sock.recv(4096)
        sock, status, head = open_stream(s.port, game["id"], bots[0]["token"])
        streams.append(sock)
        assert status == 200, head  # the seat's own stream
        turn = json_call(s.port, "GET", f"/games/{game['id']}")["turn"]
        player = bots[turn]["token"]
        view = json_call(s.port, "GET", f"/games/{game['id']}", token=player)
        assert view["your_turn"]
        after = json_call(s.port, "POST", f"/games/{game['id']}/actions",
                          {"action": view["legal_actions"][0], "version": view["version"]},
                          player)
        assert after["version"] == view["version"] + 1
    finally:
        for sock in streams:
            sock.close()


def test_the_shipped_nginx_config_parses_and_holds_the_same_deadlines(tmp_path: Path) -> None:
    """deploy/nginx.conf carries the arena's deadlines and per-address caps, and nginx
    itself accepts it (``nginx -t``, with the replicas' name made local: nginx resolves
    upstream names while it checks). Without nginx the settings are still checked, and
    the test then skips (fails in CI, which installs nginx)."""
    import re
    import shutil
    import subprocess

    conf = (Path(__file__).resolve().parent.parent / "deploy" / "nginx.conf").read_text()
    for setting in ("client_header_timeout 5s;", "client_body_timeout 10s;",
                    "send_timeout 10s;", "client_max_body_size 16k;",
                    "keepalive_timeout 5s;", "limit_conn per_address ",
                    "limit_conn streams_per_address ", "limit_conn_status 429;"):
        assert setting in conf, setting
    assert re.search(r"/problems/too-many-connections", conf)
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists()
                                      else None)
    if nginx is None:
        missing("nginx is not installed: its own check did not run")
    site = tmp_path / "site.conf"
    site.write_text(conf.replace("server arena:8000;", "server 127.0.0.1:8000;"))
    main = tmp_path / "nginx.conf"
    main.write_text(f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\n"
                    f"events {{}}\nhttp {{\n  access_log off;\n"
                    f"  client_body_temp_path {tmp_path};\n  proxy_temp_path {tmp_path};\n"
                    f"  include {site};\n}}\n")
    done = subprocess.run([nginx, "-t", "-c", str(main), "-p", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
