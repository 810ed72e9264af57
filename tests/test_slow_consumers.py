"""Slow consumers: an event stream whose client never reads is dropped after the write
timeout (``ARENA_SSE_WRITE_TIMEOUT``), holds no growing buffer meanwhile, and resumes
exactly with ``Last-Event-ID``.

Against the real service (``allfours serve``, one gevent worker) on a Redis of the test's
own, with real sockets: the slow consumers connect with a tiny receive buffer and never
read, while a normal spectator reads everything and two bots play a whole game. Every
wait is bounded.
"""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path
from typing import Any

import requests

from tests.test_fanout import (
    own_redis,  # noqa: F401 (a fixture)
    parse,
    requests_json,
)
from tests.test_operations import Service
from tests.test_serve import _proc_stat, wait_for

EXPECTED_S = 30  # seconds, the whole module: the order workers take it in (tests/conftest.py)

SLOW = 20
WRITE_TIMEOUT_S = 1.0
# How long the test waits for the slow consumers to be gone: far beyond the write timeout,
# so that running out of it says "held", never "slow machine"
DROP_PATIENCE_S = 90


def open_streams(s: Service) -> int:
    text = requests.get(s.url("/metrics"), timeout=5).text
    for line in text.splitlines():
        if line.startswith("allfours_open_event_streams"):
            return int(float(line.split()[-1]))
    raise AssertionError(text[-2000:])


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


class Reader(threading.Thread):
    """A normal spectator: reads its stream to the end."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(daemon=True)
        self.url, self.headers, self.text = url, headers or {}, ""
        self.start()

    def run(self) -> None:
        with requests.get(self.url, headers=self.headers, stream=True, timeout=60) as r:
            assert r.status_code == 200
            for chunk in r.iter_content(chunk_size=None):
                self.text += chunk.decode()


def slow_consumer(port: int, path: str) -> socket.socket:
    """A stream that is opened and then never read, with a receive buffer as small as
    the kernel allows (so the server's writes block soon)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)  # before connect: the window
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return sock


def drain(sock: socket.socket, timeout: float = 30.0) -> str:
    """Everything the server sent before it closed the connection (a generous bound: on a
    loaded machine the worker's close of a dropped stream can trail its count by seconds)."""
    sock.settimeout(timeout)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data.decode(errors="replace")


def body_events(raw: str) -> list[tuple[str, str, Any]]:
    """The complete events of a raw (chunked) HTTP response as the client got them."""
    _head, _, body = raw.partition("\r\n\r\n")
    text = ""
    while body:  # chunked: size line, data, CRLF; the last chunk may be cut short
        size_line, _, body = body.partition("\r\n")
        size = int(size_line or "0", 16)
        if size == 0:
            break
        text += body[:size]
        body = body[size + 2:]
    complete = text[: text.rfind("\n\n") + 2]
    return parse(complete)


def test_a_stream_that_is_never_read_is_dropped_after_the_write_timeout(tmp_path, own_redis  # noqa: F811
                                                                         ) -> None:
    s = Service(tmp_path, workers=1, REDIS_URL=f"redis://127.0.0.1:{own_redis}/0",
                ARENA_KEY_PREFIX="slow:", ARENA_RATE_LIMIT="0", ARENA_SWEEPER="0",
                ARENA_SSE_KEEPALIVE="0.5", ARENA_ACCESS_LOG="0",
                ARENA_SSE_WRITE_TIMEOUT=str(WRITE_TIMEOUT_S),
                # a whole game (~30 KB of events) more than the socket buffers hold
                ARENA_SSE_SEND_BUFFER="4096")
    slow: list[socket.socket] = []
    try:
        s.wait_healthy()
        gunicorns = [p for p, cmd in s.seen.items() if "gunicorn" in cmd]
        worker = next(p for p in gunicorns if (_proc_stat(p) or ("", 0))[1] in gunicorns)
        bots = [requests_json("POST", s.url("/bots"), json={"name": "slow0"})]
        bots.append(requests_json("POST", s.url("/bots"), bots[0]["token"],  # one owner's
                                  json={"name": "slow1"}))
        game = requests_json("POST", s.url("/games"), bots[0]["token"],
                             json={"players": 2, "seats": [b["id"] for b in bots],
                                   "seed": 5})
        path = f"/games/{game['id']}/events"
        spectator = Reader(s.url(path))
        slow = [slow_consumer(s.port, path) for _ in range(SLOW)]
        wait_for(lambda: open_streams(s) == SLOW + 1, 10, "every stream open")
        rss_before = rss_kb(worker)

        rng = random.Random(5)
        moves = 0
        while True:
            view = requests_json("GET", s.url(f"/games/{game['id']}"))
            if view["status"] == "finished":
                break
            token = bots[view["turn"]]["token"]
            mine = requests_json("GET", s.url(f"/games/{game['id']}"), token)
            requests_json("POST", s.url(f"/games/{game['id']}/actions"), token,
                          json={"action": rng.choice(mine["legal_actions"]),
                                "version": mine["version"]})
            moves += 1
            assert moves < 3000
        spectator.join(30)
        assert not spectator.is_alive()
        events = parse(spectator.text)
        assert events[-1][1] == "game_over"  # the normal spectator heard everything

        # the slow ones: dropped, not held forever, and by the write timeout (what the
        # service says of each one it cut), not by anything else ending their streams
        wait_for(lambda: open_streams(s) == 0, DROP_PATIENCE_S, "the slow consumers dropped")
        dropped = s.output().count(
            f"dropped an event stream that took no write for {WRITE_TIMEOUT_S:.1f} s")
        assert dropped == SLOW, s.output()[-3000:]
        grown = rss_kb(worker) - rss_before
        assert grown < 20_000, f"worker grew {grown} KB holding {SLOW} slow consumers"

        # each got a prefix of the game and no game_over; it resumes exactly from there
        for sock in slow[:3]:
            got = body_events(drain(sock))
            assert got == events[: len(got)]
            assert len(got) < len(events), "the slow consumer was not cut"
            resume = Reader(s.url(path), {"Last-Event-ID": got[-1][0]} if got else {})
            resume.join(30)
            # ids and kinds: after game_over the deals are shown with their cards
            assert [e[:2] for e in parse(resume.text)] == [e[:2] for e in events[len(got):]]
        assert "Traceback" not in s.output(), s.output()[-3000:]
    finally:
        for sock in slow:
            sock.close()
        s.stop()
