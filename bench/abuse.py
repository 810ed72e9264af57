"""One client against the connection budget (issue 22): does the arena hold?

Starts ``allfours serve`` with its defaults (two gevent workers, the embedded Redis; a
private data directory) and, from one address (127.0.0.1), runs each attack named by
``--attacks`` in turn:

- ``slow_body``: ``--slow-bodies`` connections (4,200) each sending a ``POST /bots`` head
  with ``Content-Length: 1000`` and 10 bytes of body, then nothing;
- ``streams``: ``--streams`` (4,300) anonymous ``GET /games/{id}/events``;
- ``polls``: ``--polls`` (4,300) ``GET /bots/me/turns?timeout=30`` of one bot;

each held for ``--hold`` seconds (25), while a prober asks ``/healthz`` (a new connection
each time, from 127.0.0.3) every ``--probe-every`` seconds, and a second client (127.0.0.2)
plays 2-player games move after move. Its action latencies are measured once before the
attacks (the baseline) and during each one, in the same run. For every attacker
connection the bench notes its first answer's status and how long it stayed open; a
connection "outlives its deadline" when it stays open longer than its deadline (the body
deadline for a slow body, the head deadline after a refusal, a poll's own timeout) plus
``--slack`` seconds. Admitted event streams may stay open (they are within their share)
and are counted apart.

Prints ONE JSON line: per attack its dict (``attack_*`` below), and the baseline.
- ``networks``: many addresses, each in a /24 of its own, holding long-polls (the held
  budget's attack; ``attack_networks``), measured against two honest clients of its own,
  one kept alive and one opening a connection per request, with their baseline first;
- ``storage``: bench/abuse_storage.py's attacks on storage (anonymous bots, games and house
  games from one address, then the retention), run as a child with a service of its own.
- ``house_fresh``, ``farm``, ``analysis_flood``, ``big_analysis``, ``house_search``,
  ``long_game``, ``storage_rotation``, ``invitations``, ``webhook_share``: one actor with
  many addresses (bench/abuse_fairness.py, each with a service of its own).

Every attack is a function in ``ATTACKS`` that takes a ``Target`` and returns a dict.

    python bench/abuse.py                          # the issue's figures (a few minutes)
    python bench/abuse.py --slow-bodies 400 --streams 400 --polls 400 --hold 12   # quick
    python bench/abuse.py --attacks networks --baseline 15 --networks-hold 40   # ~80 s
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as ``python bench/abuse.py``, this file's directory comes first on sys.path, where
# bench/http.py would shadow the standard library's ``http`` package: drop it.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import contextlib  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import multiprocessing  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import selectors  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any  # noqa: E402

from service.http.connections import (  # noqa: E402
    BODY_TIMEOUT_S,
    HEAD_TIMEOUT_S,
)
from service.storage.embedded import free_port  # noqa: E402

ATTACKER = "127.0.0.1"
PLAYER = "127.0.0.2"
PROBER = "127.0.0.3"
FRESH = "127.0.0.4"  # the honest client that opens a new connection for every request
SLOW_PROBE_MS = 100  # the target: /healthz p99 within this
SLOW_MS = 30  # an honest client's request this slow is listed with its time


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


@dataclass
class Target:
    """The service under attack, and what the attacks share."""

    port: int
    proc: subprocess.Popen[bytes]
    log: Path
    args: argparse.Namespace
    baseline: dict[str, Any] = field(default_factory=dict)

    def call(self, method: str, path: str, body: Any = None, token: str | None = None,
             source: str = PLAYER, conn: http.client.HTTPConnection | None = None
             ) -> tuple[int, Any, float]:
        """(status, JSON body, ms) of one request (on ``conn`` if given)."""
        own = conn is None
        conn = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=30,
                                                  source_address=(source, 0))
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        started = time.perf_counter()
        try:
            conn.request(method, path, json.dumps(body) if body is not None else None,
                         headers)
            r = conn.getresponse()
            data = r.read()
            ms = (time.perf_counter() - started) * 1000
            return r.status, (json.loads(data) if data else None), ms
        finally:
            if own:
                conn.close()


# --- the honest client and the prober ---------------------------------------------------------


class Player:
    """A second client playing 2-player games, one move after another, from ``source``
    (``PLAYER``): the latency of each action (``POST /games/{id}/actions``) is recorded.
    Runs in a process of its own (``Apart``): the attacker's loop must not hold its
    interpreter.

    ``fresh``: a new connection for every request (a client behind a proxy that does not
    keep connections alive, or a script), which meets the worker's connection cap on every
    request; else two kept-alive connections, which meet it only when one is reopened.
    ``reads``: a ``GET /games`` before every move too, timed apart. Every answer a
    connection limit gave (429 ``too-many-connections``, 503 ``over-capacity``) and every
    request that got no answer is counted in ``refused``."""

    def __init__(self, target: Target, source: str = PLAYER, fresh: bool = False,
                 reads: bool = False) -> None:
        self.target = target
        self.source = source
        self.fresh = fresh
        self.reads = reads
        self.stop_event: Any = threading.Event()
        self.latencies: list[float] = []
        self.read_latencies: list[float] = []
        self.failures: Counter[Any] = Counter()
        self.refused: Counter[str] = Counter()
        self.games = 0
        self.opened: Any = None  # set (a shared value) once every attacker connection is open
        self.slow: list[tuple[float, str, float]] = []  # (when, what, ms) over SLOW_MS

    def run(self) -> None:
        t = self.target
        source = self.source
        conns: list[http.client.HTTPConnection | None] = [None, None] if self.fresh else [
            http.client.HTTPConnection("127.0.0.1", t.port, timeout=30,
                                       source_address=(source, 0)) for _ in range(2)]
        plain_call = t.call

        def call(method: str, path: str, body: Any = None, token: str | None = None,
                 conn: http.client.HTTPConnection | None = None) -> tuple[int, Any, float]:
            """As a bot does: a keep-alive connection the server closed meanwhile (idle
            past the head deadline) is opened again and the request sent again; a
            refusal of a connection limit is counted, and the request sent again after
            its ``Retry-After``."""
            for attempt in range(3):
                try:
                    status, answer, ms = plain_call(method, path, body, token,
                                                    source=source, conn=conn)
                except (OSError, http.client.HTTPException) as exc:
                    if conn is None:
                        self.refused[f"{method} {route_of(path)}: {type(exc).__name__}"] += 1
                    else:
                        self.failures["reconnected"] += 1
                        conn.close()
                    if attempt == 2:
                        raise
                    continue
                kind = answer.get("type", "") if isinstance(answer, dict) else ""
                if kind.endswith(("/too-many-connections", "/over-capacity")):
                    self.refused[f"{method} {route_of(path)}: {status} "
                                 f"{kind.rsplit('/', 1)[1]}"] += 1
                    if attempt < 2:
                        time.sleep(1.0)
                        continue
                return status, answer, ms
            raise AssertionError("unreachable")

        t = argparse.Namespace(call=call, args=t.args)  # type: ignore[assignment]
        first = t.call("POST", "/bots", {"name": "honest0"}, conn=conns[0])[1]
        # its two bots are one owner's (the second registered with the first's token), so
        # its games seat both at once (issue 23: another owner's bot would be invited)
        bots = [first, t.call("POST", "/bots", {"name": "honest1"}, first["token"],
                              conn=conns[1])[1]]
        while not self.stop_event.is_set():
            status, game, _ = t.call("POST", "/games", {"players": 2, "seats": [
                b["id"] for b in bots]}, bots[0]["token"], conn=conns[0])
            if status != 201:
                self.failures[status] += 1
                time.sleep(0.2)
                continue
            self.games += 1
            view: dict[str, Any] | None = None
            while not self.stop_event.is_set():
                if view is None or not view.get("your_turn"):
                    seat = None
                    for i in range(2):
                        st, v, _ = t.call("GET", f"/games/{game['id']}", None,
                                          bots[i]["token"], conn=conns[i])
                        if st == 200 and v["your_turn"]:
                            seat, view = i, v
                            break
                        if st == 200 and v["turn"] is None:
                            break
                    if seat is None:
                        break  # over
                else:
                    seat = view["seat"]
                assert view is not None
                if self.reads:
                    st, _, ms = t.call("GET", "/games?limit=20", conn=conns[0])
                    if st == 200:
                        self.read_latencies.append(ms)
                        if ms > SLOW_MS:
                            self.slow.append((time.monotonic() - ms / 1000, "read", ms))
                    else:
                        self.failures[f"GET /games {st}"] += 1
                action = view["legal_actions"][0]
                st, v, ms = t.call("POST", f"/games/{game['id']}/actions",
                                   {"action": action, "version": view["version"]},
                                   bots[seat]["token"], conn=conns[seat])
                if st != 200:
                    self.failures[st] += 1
                    view = None
                    continue
                self.latencies.append(ms)
                if ms > SLOW_MS:
                    self.slow.append((time.monotonic() - ms / 1000, "action", ms))
                time.sleep(t.args.pace)  # a bot's pace, well inside its request budget
                view = v if v["your_turn"] else None
                if v["turn"] is None:
                    break
        for c in conns:
            if c is not None:
                c.close()

    def figures(self) -> dict[str, Any]:
        out = {"actions": len(self.latencies), "games": self.games,
               "action_p50_ms": pct(self.latencies, 0.5),
               "action_p99_ms": pct(self.latencies, 0.99),
               "failures": dict(self.failures)}
        if self.reads:
            out.update({"reads": len(self.read_latencies),
                        "read_p50_ms": pct(self.read_latencies, 0.5),
                        "read_p99_ms": pct(self.read_latencies, 0.99)})
        if self.fresh or self.reads:
            out["refused"] = sum(self.refused.values())
            out["refusals"] = dict(self.refused)
            opened = self.opened.value if self.opened is not None else 0.0
            # when the slow ones were sent: seconds after the attack's connections were all
            # open (negative: during the opening burst), what, and how slow
            out[f"over_{SLOW_MS}ms"] = [(round(when - opened, 1) if opened else None, what,
                                         round(ms)) for when, what, ms in self.slow][:40]
        return out


def route_of(path: str) -> str:
    """A path as its route, for counting (``/games/<id>/actions``)."""
    parts = path.split("?", 1)[0].split("/")
    return "/".join("<id>" if len(p) == 12 and p.isalnum() and i == 2 else p
                    for i, p in enumerate(parts))


class Prober:
    """``GET /healthz`` on a new connection every ``every`` seconds, from ``PROBER``, in a
    process of its own (``Apart``)."""

    def __init__(self, target: Target, every: float) -> None:
        self.target = target
        self.every = every
        self.stop_event: Any = threading.Event()
        self.latencies: list[tuple[float, float]] = []  # (when, ms)
        self.statuses: Counter[int] = Counter()
        self.opened: Any = None  # set (a shared value) once every attacker connection is open

    def run(self) -> None:
        while not self.stop_event.wait(self.every):
            started = time.monotonic()
            try:
                status, _, ms = self.target.call("GET", "/healthz", source=PROBER)
            except OSError:
                status, ms = 0, (time.monotonic() - started) * 1000
            self.statuses[status] += 1
            self.latencies.append((started, ms))

    def figures(self) -> dict[str, Any]:
        total = sum(self.statuses.values())
        opened = self.opened.value if self.opened is not None else 0.0
        slow = [when for when, ms in self.latencies if ms > SLOW_PROBE_MS]
        # while the address *holds* its connections (every one of them open): the issue's
        # "while one address holds N connections", apart from the opening burst
        held = [ms for when, ms in self.latencies if opened and when >= opened]
        return {"healthz_probes": total, "healthz_non_200": total - self.statuses[200],
                "healthz_p50_ms": pct([ms for _, ms in self.latencies], 0.5),
                "healthz_p99_ms": pct([ms for _, ms in self.latencies], 0.99),
                "healthz_hold_probes": len(held),
                "healthz_hold_p99_ms": pct(held, 0.99),
                "healthz_max_ms": pct([ms for _, ms in self.latencies], 1.0),
                # when the slow probes were: seconds after the attack's connections were
                # all open (the server still answering the burst), the last of them
                f"healthz_over_{SLOW_PROBE_MS}ms": len(slow),
                "healthz_slow_after_open_s": ([round(w - opened, 1) for w in slow]
                                              if opened else None),
                "healthz_statuses": {str(k): v for k, v in self.statuses.items()}}


class Apart:
    """``make()`` (a ``Player`` or a ``Prober``) run in a forked process until ``finish``,
    which returns its ``figures()``."""

    def __init__(self, make: Callable[[], Any]) -> None:
        ctx = multiprocessing.get_context("fork")
        self.stop = ctx.Event()
        self.queue: Any = ctx.Queue()
        self.opened: Any = ctx.Value("d", 0.0)  # monotonic time the attack was all open
        self.proc = ctx.Process(target=self._main,
                                args=(make, self.stop, self.queue, self.opened), daemon=True)
        self.proc.start()

    @staticmethod
    def _main(make: Callable[[], Any], stop: Any, queue: Any, opened: Any) -> None:
        worker = make()
        worker.stop_event = stop
        worker.opened = opened
        try:
            worker.run()
        finally:
            queue.put(worker.figures())

    def finish(self) -> dict[str, Any]:
        self.stop.set()
        figures = self.queue.get(timeout=120)
        self.proc.join(30)
        return figures


# --- the attacker's connections ---------------------------------------------------------------


class Conn:
    __slots__ = ("answered", "buf", "closed", "kind", "opened", "sock", "status")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.opened = time.monotonic()
        self.answered: float | None = None
        self.closed: float | None = None
        self.status: int | None = None
        self.kind: str | None = None  # the problem's type, when the answer is one
        self.buf = b""


def hold(target: Target, request: Callable[[int], bytes], count: int, seconds: float,
         opened: Callable[[], None] = lambda: None) -> list[Conn]:
    """Open ``count`` connections from ``ATTACKER``, send each ``request(i)``, and watch
    them for ``seconds``: each one's first status and when the server closed it."""
    sel = selectors.DefaultSelector()
    conns: list[Conn] = []
    for i in range(count):
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((ATTACKER, 0))
            sock.settimeout(10)
            sock.connect(("127.0.0.1", target.port))
            sock.sendall(request(i))
            sock.setblocking(False)
        except OSError:
            with contextlib.suppress(Exception):
                sock.close()
            continue
        c = Conn(sock)
        conns.append(c)
        sel.register(sock, selectors.EVENT_READ, c)
    opened()
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        for key, _ in sel.select(timeout=0.2):
            c = key.data
            try:
                data = c.sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            now = time.monotonic()
            if data and c.status is None:
                c.buf += data
                if b"\r\n" in c.buf:
                    c.status = int(c.buf.split(b" ", 2)[1])
                    c.answered = now
                    found = c.buf.find(b'"/problems/')
                    if found >= 0:
                        c.kind = c.buf[found + 11:].split(b'"', 1)[0].decode()
                    c.buf = b""
            if not data:
                c.closed = now
                sel.unregister(c.sock)
                c.sock.close()
    for c in conns:
        if c.closed is None:
            with contextlib.suppress(Exception):
                sel.unregister(c.sock)
            c.sock.close()
    sel.close()
    return conns


def summary(conns: list[Conn], deadline_of: Callable[[Conn], float | None], slack: float,
            seconds: float) -> dict[str, Any]:
    """Statuses; how long connections waited for their first answer (the kernel's listen
    queue and the server's turn included: no deadline of the server's runs before it has
    taken a connection); and how long each stayed open against its deadline
    (``deadline_of``: seconds from its opening for one never answered, from its answer
    for one answered, None for one admitted that may stay open). A connection outlived
    its deadline when it was open ``slack`` seconds past it."""
    statuses = Counter("none" if c.status is None else
                       str(c.status) if c.kind is None else f"{c.status} {c.kind}"
                       for c in conns)
    outlived = 0
    longest = 0.0
    longest_deadline = None
    admitted_open = 0
    to_answer = [c.answered - c.opened for c in conns if c.answered is not None]
    end = max((c.opened for c in conns), default=0.0) + seconds
    for c in conns:
        deadline = deadline_of(c)
        if deadline is None:
            admitted_open += c.closed is None
            continue
        since = c.answered if c.answered is not None else c.opened
        open_s = (c.closed or end) - since
        if open_s > longest:
            longest, longest_deadline = open_s, deadline
        if open_s > deadline + slack:
            outlived += 1
    return {"connections": len(conns), "statuses": dict(statuses),
            "first_answer_p50_s": pct(to_answer, 0.5),
            "first_answer_max_s": pct(to_answer, 1.0),
            "longest_open_s": round(longest, 2), "its_deadline_s": longest_deadline,
            "outlived_deadline": outlived, "admitted_still_open": admitted_open}


def after_answer(c: Conn) -> float:
    """Seconds a connection may stay open after its answer: none after a refusal at a
    cap or a deadline (the server closes it), the head deadline after an answer that
    keeps it alive (a poll's, or a 429 ``rate-limited``: the request budget)."""
    if c.status == 200 or c.kind == "rate-limited":
        return float(HEAD_TIMEOUT_S)
    return 0.0


def under_attack(target: Target, name: str,
                 attack: Callable[[Callable[[], None]], dict[str, Any]]) -> dict[str, Any]:
    """Run ``attack`` while the prober probes and the second client plays; ``attack``
    calls the function it is given once its connections are all open."""
    prober = Apart(lambda: Prober(target, target.args.probe_every))
    player = Apart(lambda: Player(target))

    def opened() -> None:
        prober.opened.value = time.monotonic()

    try:
        out = attack(opened)
    finally:
        probes = prober.finish()
        figures = player.finish()
    base = target.baseline.get("action_p99_ms")
    return {"attack": name, **out, **probes, "player": figures,
            "action_p99_vs_baseline": (round(figures["action_p99_ms"] / base, 2)
                                       if base and figures["action_p99_ms"] else None)}


# --- the attacks: each takes the target, returns one dict -----------------------------------------


def attack_slow_body(target: Target) -> dict[str, Any]:
    """Slow bodies: a ``POST /bots`` head promising 1,000 bytes, 10 sent."""
    a = target.args
    head = (b"POST /bots HTTP/1.1\r\nHost: arena\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n" + b'{"name":"x')

    def attack(opened: Callable[[], None]) -> dict[str, Any]:
        conns = hold(target, lambda i: head, a.slow_bodies, a.hold, opened)
        # answered (a 408 at the body deadline, a refusal at once): closed at once after
        # it; never answered: closed within the body deadline of its opening
        return summary(conns, lambda c: a.body_timeout if c.status is None else
                       after_answer(c), a.slack, a.hold)

    return under_attack(target, "slow_body", attack)


def attack_streams(target: Target) -> dict[str, Any]:
    """Anonymous event streams of one game."""
    a = target.args
    _, bots_game = _game(target)

    def request(i: int) -> bytes:
        return (f"GET /games/{bots_game}/events HTTP/1.1\r\nHost: arena\r\n\r\n").encode()

    def attack(opened: Callable[[], None]) -> dict[str, Any]:
        conns = hold(target, request, a.streams, a.hold, opened)
        # admitted (200): a stream within its share may stay open; a refusal closes its
        # connection at once; one not answered yet is closed by the head deadline
        return summary(conns, lambda c: None if c.status == 200 else
                       (HEAD_TIMEOUT_S if c.status is None else after_answer(c)),
                       a.slack, a.hold)

    return under_attack(target, "streams", attack)


def attack_polls(target: Target) -> dict[str, Any]:
    """Long-polls of one bot (``/bots/me/turns?timeout=30``)."""
    a = target.args
    status, bot, _ = target.call("POST", "/bots", {"name": "poller"}, source=ATTACKER)
    assert status == 201, bot
    req = (f"GET /bots/me/turns?timeout={a.poll_timeout} HTTP/1.1\r\nHost: arena\r\n"
           f"Authorization: Bearer {bot['token']}\r\n\r\n").encode()

    def attack(opened: Callable[[], None]) -> dict[str, Any]:
        conns = hold(target, lambda i: req, a.polls, a.hold, opened)
        # admitted polls answer at their timeout (then the connection is idle: the head
        # deadline); refused ones close at once
        return summary(conns, lambda c: float(a.poll_timeout) if c.status is None else
                       after_answer(c), a.slack, a.hold)

    return under_attack(target, "polls", attack)


def _game(target: Target) -> tuple[list[dict[str, Any]], str]:
    bots = [target.call("POST", "/bots", {"name": f"watched{i}"}, source=ATTACKER)[1]
            for i in range(2)]
    status, game, _ = target.call("POST", "/games", {"players": 2, "seats": [
        b["id"] for b in bots]}, bots[0]["token"], source=ATTACKER)
    assert status == 201, game
    return bots, game["id"]


class Poll:
    """One attacker's long-poll connection: its address, its request, what it was told."""

    __slots__ = ("answers", "buf", "kind", "opened", "request", "sock", "source", "status",
                 "want")

    def __init__(self, source: str, request: bytes) -> None:
        self.source = source
        self.request = request
        self.sock: socket.socket | None = None
        self.buf = b""
        self.want = -1  # bytes of the answer still to come (-1: its head is not in yet)
        self.status: int | None = None  # of the last answer
        self.kind: str | None = None
        self.answers = 0
        self.opened = 0.0


def hold_polls(target: Target, polls: list[Poll], seconds: float, reconnect_s: float,
               opened: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """Open every poll's connection and send its request; for ``seconds``, send the poll
    again on the same connection whenever it is answered 200 (a poll's timeout: it keeps
    its place), and, with ``reconnect_s`` > 0, open a refused or closed one again after that
    many seconds (an attacker that retries). Counts every answer by status and type, and
    how long a refused connection stayed open after its answer."""
    sel = selectors.DefaultSelector()
    answers: Counter[str] = Counter()
    first: Counter[str] = Counter()
    refused_open: list[float] = []
    to_open: list[tuple[float, Poll]] = [(0.0, p) for p in polls]
    refused_at: dict[int, float] = {}
    failed_connects = 0

    def open_one(p: Poll) -> None:
        nonlocal failed_connects
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((p.source, 0))
            sock.settimeout(10)
            sock.connect(("127.0.0.1", target.port))
            sock.sendall(p.request)
            sock.setblocking(False)
        except OSError:
            failed_connects += 1
            sock.close()
            if reconnect_s > 0:
                to_open.append((time.monotonic() + reconnect_s, p))
            return
        p.sock, p.buf, p.want, p.opened = sock, b"", -1, time.monotonic()
        sel.register(sock, selectors.EVENT_READ, p)

    def closed(p: Poll, now: float) -> None:
        assert p.sock is not None
        sel.unregister(p.sock)
        p.sock.close()
        p.sock = None
        since = refused_at.pop(id(p), None)
        if since is not None:
            refused_open.append(now - since)
        if reconnect_s > 0 and now < until:
            to_open.append((now + reconnect_s, p))

    until = time.monotonic() + seconds
    pending, to_open = to_open, []
    for _, p in pending:
        open_one(p)
    opened()
    while time.monotonic() < until:
        now = time.monotonic()
        if to_open:
            due = [p for when, p in to_open if when <= now]
            to_open = [(when, p) for when, p in to_open if when > now]
            for p in due:
                open_one(p)
        for key, _ in sel.select(timeout=0.2):
            p = key.data
            try:
                data = p.sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            now = time.monotonic()
            if not data:
                closed(p, now)
                continue
            p.buf += data
            while True:
                if p.want < 0:
                    head, sep, rest = p.buf.partition(b"\r\n\r\n")
                    if not sep:
                        break
                    p.status = int(head.split(b" ", 2)[1])
                    length = 0
                    for line in head.split(b"\r\n")[1:]:
                        name, _, value = line.partition(b":")
                        if name.strip().lower() == b"content-length":
                            length = int(value)
                    p.buf, p.want = rest, length
                if len(p.buf) < p.want:
                    break
                body, p.buf, p.want = p.buf[:p.want], p.buf[p.want:], -1
                found = body.find(b'"/problems/')
                p.kind = body[found + 11:].split(b'"', 1)[0].decode() if found >= 0 else None
                label = str(p.status) if p.kind is None else f"{p.status} {p.kind}"
                answers[label] += 1
                if p.answers == 0:
                    first[label] += 1
                p.answers += 1
                if p.status == 200 and now < until:
                    with contextlib.suppress(OSError):
                        p.sock.sendall(p.request)  # the poll again, on the same connection
                elif p.status != 200:
                    refused_at[id(p)] = now
    for p in polls:
        if p.sock is not None:
            with contextlib.suppress(Exception):
                sel.unregister(p.sock)
            p.sock.close()
    sel.close()
    return {"connections": len(polls), "first_answers": dict(first),
            "answers": dict(answers), "failed_connects": failed_connects,
            "refused_closed_p50_s": pct(refused_open, 0.5),
            "refused_closed_max_s": pct(refused_open, 1.0),
            "refused_left_open": len(refused_at)}


class CpuSampler:
    """The CPU the service's processes use, sampled every ``every`` seconds from
    ``/proc`` in a thread: per role (``workers``: the gunicorn workers together, ``redis``)
    the busiest interval's share of one core and when it was (seconds after ``opened``),
    and the seconds used in all. Tells a latency that is the machine's CPU (a worker near a
    whole core) from one that is waiting (the workers idle meanwhile)."""

    def __init__(self, root: int, every: float = 0.5) -> None:
        self.root = root
        self.every = every
        self.opened = 0.0
        self.samples: list[tuple[float, dict[str, float]]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def roles(self) -> dict[int, str]:
        out = {}
        for pid in descendants(self.root):
            with contextlib.suppress(OSError):
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                if b"gunicorn" in cmd:
                    out[pid] = "gunicorn"
                elif b"valkey" in cmd or b"redis" in cmd:
                    out[pid] = "redis"
        parents = {pid: ppid_of(pid) for pid in out}
        # a gunicorn whose parent is a gunicorn is a worker; the other is the arbiter
        return {pid: ("workers" if role == "gunicorn" and out.get(parents[pid]) == "gunicorn"
                      else "arbiter" if role == "gunicorn" else role)
                for pid, role in out.items()}

    def run(self) -> None:
        roles = self.roles()
        tick = os.sysconf("SC_CLK_TCK")
        while not self.stop.is_set():
            used: dict[str, float] = {}
            for pid, role in roles.items():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    used[role] = used.get(role, 0.0) + (int(fields[11]) + int(fields[12])) / tick
            self.samples.append((time.monotonic(), used))
            self.stop.wait(self.every)

    def finish(self) -> dict[str, Any]:
        self.stop.set()
        self.thread.join(5)
        out: dict[str, Any] = {}
        for role in ("workers", "redis"):
            busiest, at, total = 0.0, None, 0.0
            for (t0, a), (t1, b) in zip(self.samples, self.samples[1:]):
                share = (b.get(role, 0.0) - a.get(role, 0.0)) / max(1e-6, t1 - t0)
                total += b.get(role, 0.0) - a.get(role, 0.0)
                if share > busiest:
                    busiest, at = share, t0
            out[role] = {"busiest_cores": round(busiest, 2),
                         "busiest_at_s": (round(at - self.opened, 1)
                                          if at is not None and self.opened else None),
                         "cpu_s": round(total, 1)}
        # every interval: (seconds after opened, the workers' cores, Redis' cores)
        out["series"] = [
            (round(t0 - self.opened, 1) if self.opened else None,
             round((b.get("workers", 0.0) - a.get("workers", 0.0)) / max(1e-6, t1 - t0), 2),
             round((b.get("redis", 0.0) - a.get("redis", 0.0)) / max(1e-6, t1 - t0), 2))
            for (t0, a), (t1, b) in zip(self.samples, self.samples[1:])]
        return out


def ppid_of(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def descendants(root: int) -> list[int]:
    """Every process below ``root``."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            parents[int(entry.name)] = ppid_of(int(entry.name))
    found, todo = [], [root]
    while todo:
        parent = todo.pop()
        kids = [p for p, pp in parents.items() if pp == parent]
        found.extend(kids)
        todo.extend(kids)
    return found


def attack_networks(target: Target) -> dict[str, Any]:
    """Long-polls from many networks: ``--networks`` addresses (12), each in a /24 of its
    own (127.10.0.1, 127.11.0.1, ...: loopback answers every 127/8 address), each with
    ``--bots-per-network`` bots (8, one owner's) holding ``--polls-per-bot`` (110)
    ``GET /bots/me/turns?timeout=`` each, for ``--networks-hold`` seconds, re-polling
    whenever a poll is answered (``--reconnect``: a refused one is opened again after that
    many seconds). Meanwhile two honest clients play and read (``GET /games`` before each
    move): one on kept-alive connections (``PLAYER``), one opening a new connection for every
    request (``FRESH``); their baseline is measured first, in the same run, with no attack."""
    a = target.args
    sources = [f"127.{10 + i}.0.1" for i in range(a.networks)]
    polls: list[Poll] = []
    for source in sources:
        status, owner, _ = target.call("POST", "/bots", {"name": "net0"}, source=source)
        assert status == 201, owner
        tokens = [owner["token"]]
        for j in range(1, a.bots_per_network):
            status, bot, _ = target.call("POST", "/bots", {"name": f"net{j}"},
                                         owner["token"], source=source)
            assert status == 201, bot
            tokens.append(bot["token"])
        for token in tokens:
            req = (f"GET /bots/me/turns?timeout={a.poll_timeout} HTTP/1.1\r\n"
                   f"Host: arena\r\nAuthorization: Bearer {token}\r\n\r\n").encode()
            polls.extend(Poll(source, req) for _ in range(a.polls_per_bot))

    def honest() -> tuple[Apart, Apart]:
        return (Apart(lambda: Player(target, PLAYER, fresh=False, reads=True)),
                Apart(lambda: Player(target, FRESH, fresh=True, reads=True)))

    cpu = CpuSampler(target.proc.pid)  # from the baseline on: the service's CPU without
    kept, fresh = honest()
    time.sleep(a.baseline)
    base = {"kept_alive": kept.finish(), "new_connections": fresh.finish()}
    prober = Apart(lambda: Prober(target, target.args.probe_every))
    kept, fresh = honest()

    started = time.monotonic()

    def opened() -> None:
        now = time.monotonic()
        for part in (prober, kept, fresh):
            part.opened.value = now
        cpu.opened = now

    try:
        out = hold_polls(target, polls, a.networks_hold, a.reconnect, opened)
    finally:
        probes = prober.finish()
        during = {"kept_alive": kept.finish(), "new_connections": fresh.finish()}
        usage = cpu.finish()
    out["opening_s"] = round(cpu.opened - started, 1) if cpu.opened else None
    out["opened_unix"] = round(time.time() - (time.monotonic() - cpu.opened), 1)

    def ratio(name: str, key: str) -> float | None:
        before, now = base[name].get(key), during[name].get(key)
        return round(now / before, 2) if before and now else None

    return {"attack": "networks", "networks": a.networks,
            "polls_per_network": a.bots_per_network * a.polls_per_bot, **out, **probes,
            "baseline": base, "during": during,
            "refused_honest": sum(d.get("refused", 0) for d in during.values()),
            "cpu": usage,
            "vs_baseline": {name: {"action_p99": ratio(name, "action_p99_ms"),
                                   "read_p99": ratio(name, "read_p99_ms")}
                            for name in during}}


def attack_storage(target: Target) -> dict[str, Any]:
    """The storage attacks (10,000 anonymous ``POST /bots``, games, 1,000 anonymous
    ``POST /house/games``; then the retention) are bench/abuse_storage.py's: they need a
    service of their own with a short retention, so they run there, as a child, and its
    JSON line is this attack's result. ``--storage-args`` passes it options."""
    args = getattr(target.args, "storage_args", "") or ""
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("abuse_storage.py")),
                           *args.split()], capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        return {"attack": "storage", "error": done.stderr[-2000:]}
    return {"attack": "storage", **json.loads(done.stdout.strip().splitlines()[-1])}


# The attacks by name, each ``f(target) -> dict``.
ATTACKS: dict[str, Callable[[Target], dict[str, Any]]] = {
    "slow_body": attack_slow_body,
    "streams": attack_streams,
    "polls": attack_polls,
    "networks": attack_networks,
    "storage": attack_storage,
}


def _fairness(name: str) -> Callable[[Target], dict[str, Any]]:
    """bench/abuse_fairness.py's attack ``name`` (issue 36: many addresses; each starts a
    service of its own), with ``--fairness-args`` as its options."""
    def attack(target: Target) -> dict[str, Any]:
        from bench import abuse_fairness

        options = (getattr(target.args, "fairness_args", "") or "").split()
        return abuse_fairness.run([name], abuse_fairness.parser().parse_args(options))[0]
    return attack


ATTACKS.update({name: _fairness(name) for name in (
    "house_fresh", "farm", "analysis_flood", "big_analysis", "house_search", "long_game",
    "storage_rotation", "invitations", "webhook_share")})


# --- the service ------------------------------------------------------------------------------


def start(tmp: Path, workers: int | None, settings: dict[str, str]) -> Target:
    port = free_port()
    log = tmp / "serve.log"
    env = {**os.environ, **settings}
    env.pop("REDIS_URL", None)  # the embedded Redis: serve's default
    command = [sys.executable, "-m", "service.cli.main", "serve", "--port", str(port),
               "--data-dir", str(tmp / "data"), "--no-house-bots",
               *(["--workers", str(workers)] if workers else [])]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=out, cwd=tmp,
                                start_new_session=True)
    target = Target(port, proc, log, argparse.Namespace())
    until = time.monotonic() + 90
    while time.monotonic() < until:
        if proc.poll() is not None:
            raise RuntimeError(log.read_text(errors="replace"))
        try:
            if target.call("GET", "/healthz", source=PROBER)[0] == 200:
                return target
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("serve did not become healthy")


def stop(target: Target) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(target.proc.pid, signal.SIGINT)
    try:
        target.proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(target.proc.pid, signal.SIGKILL)
        target.proc.wait()


def service_fd_limit(pid: int) -> int | None:
    """The soft open-file limit of the service's gunicorn processes
    (``/proc/<pid>/limits`` of serve's descendants), None if none is found."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        kids = [p for p, pp in parents.items() if pp == parent]
        found.extend(kids)
        todo.extend(kids)
    limits = []
    for child in found:
        with contextlib.suppress(OSError, ValueError, IndexError):
            if b"gunicorn" in Path(f"/proc/{child}/cmdline").read_bytes():
                for line in Path(f"/proc/{child}/limits").read_text().splitlines():
                    if line.startswith("Max open files"):
                        limits.append(int(line.split()[3]))
    return min(limits) if limits else None


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--attacks", default=",".join(ATTACKS),
                   help=f"comma-separated, of: {', '.join(ATTACKS)}")
    p.add_argument("--slow-bodies", type=int, default=4200)
    p.add_argument("--streams", type=int, default=4300)
    p.add_argument("--polls", type=int, default=4300)
    p.add_argument("--hold", type=float, default=25.0, help="seconds each attack holds")
    p.add_argument("--poll-timeout", type=int, default=30)
    p.add_argument("--probe-every", type=float, default=0.25)
    p.add_argument("--pace", type=float, default=0.02,
                   help="seconds the second client waits after each move")
    p.add_argument("--baseline", type=float, default=15.0,
                   help="seconds of play without an attack, for the baseline")
    p.add_argument("--slack", type=float, default=2.0,
                   help="seconds past a deadline before a connection has outlived it")
    p.add_argument("--networks", type=int, default=12,
                   help="networks: attacking addresses, each in a /24 of its own")
    p.add_argument("--bots-per-network", type=int, default=8)
    p.add_argument("--polls-per-bot", type=int, default=110)
    p.add_argument("--networks-hold", type=float, default=40.0,
                   help="networks: seconds the polls are held (re-polled when answered)")
    p.add_argument("--reconnect", type=float, default=0.0,
                   help="networks: seconds after which a refused poll's connection is "
                        "opened again (0: never)")
    p.add_argument("--workers", type=int, default=None, help="serve's default: 2")
    p.add_argument("--storage-args", default="",
                   help="options for bench/abuse_storage.py (the storage attack), e.g. "
                        "'--bots 2000 --house-games 200'")
    p.add_argument("--fairness-args", default="",
                   help="options for bench/abuse_fairness.py's attacks, e.g. '--hold 20'")
    args = p.parse_args(argv)
    args.body_timeout = float(os.environ.get("ARENA_BODY_TIMEOUT") or BODY_TIMEOUT_S)
    names = [n for n in args.attacks.split(",") if n]
    unknown = [n for n in names if n not in ATTACKS]
    if unknown:
        p.error(f"unknown attacks: {unknown}")

    need = max(args.slow_bodies, args.streams, args.polls,
               args.networks * args.bots_per_network * args.polls_per_bot) + 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE,
                           (need if hard == resource.RLIM_INFINITY else min(need, hard), hard))
    fd_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]

    with tempfile.TemporaryDirectory(prefix="allfours-abuse-") as tmp_dir:
        target = start(Path(tmp_dir), args.workers, {})
        target.args = args
        try:
            if any(n in ("slow_body", "streams", "polls") for n in names):
                player = Apart(lambda: Player(target))  # (networks measures its own)
                time.sleep(args.baseline)
                target.baseline = player.finish()
            results = [ATTACKS[name](target) for name in names]
            output = target.log.read_text(errors="replace")
            out = {"bench": "abuse", "command": " ".join(["python", "bench/abuse.py",
                                                          *(argv or sys.argv[1:])]),
                   "bench_fd_limit": fd_limit, "service_fd_limit": service_fd_limit(
                       target.proc.pid), "baseline": target.baseline, "attacks": results,
                   "tracebacks_in_log": output.count("Traceback")}
        finally:
            stop(target)
    print(json.dumps(out, separators=(",", ":")))


if __name__ == "__main__":
    main()
