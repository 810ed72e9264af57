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
- ``storage``: bench/abuse_storage.py's attacks on storage (anonymous bots, games and house
  games from one address, then the retention), run as a child with a service of its own.

Every attack is a function in ``ATTACKS`` that takes a ``Target`` and returns a dict.

    python bench/abuse.py                          # the issue's figures (a few minutes)
    python bench/abuse.py --slow-bodies 400 --streams 400 --polls 400 --hold 12   # quick
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
SLOW_PROBE_MS = 100  # the target: /healthz p99 within this


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
    """A second client playing 2-player games, one move after another, from ``PLAYER``:
    the latency of each action (``POST /games/{id}/actions``) is recorded. Runs in a
    process of its own (``Apart``): the attacker's loop must not hold its interpreter."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.stop_event: Any = threading.Event()
        self.latencies: list[float] = []
        self.failures: Counter[Any] = Counter()
        self.games = 0

    def run(self) -> None:
        t = self.target
        conns = [http.client.HTTPConnection("127.0.0.1", t.port, timeout=30,
                                            source_address=(PLAYER, 0)) for _ in range(2)]
        plain_call = t.call

        def call(method: str, path: str, body: Any = None, token: str | None = None,
                 conn: http.client.HTTPConnection | None = None) -> tuple[int, Any, float]:
            """As a bot does: a keep-alive connection the server closed meanwhile (idle
            past the head deadline) is opened again and the request sent again."""
            for attempt in range(3):
                try:
                    return plain_call(method, path, body, token, conn=conn)
                except (OSError, http.client.HTTPException):
                    self.failures["reconnected"] += 1
                    assert conn is not None
                    conn.close()
                    if attempt == 2:
                        raise
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
                action = view["legal_actions"][0]
                st, v, ms = t.call("POST", f"/games/{game['id']}/actions",
                                   {"action": action, "version": view["version"]},
                                   bots[seat]["token"], conn=conns[seat])
                if st != 200:
                    self.failures[st] += 1
                    view = None
                    continue
                self.latencies.append(ms)
                time.sleep(t.args.pace)  # a bot's pace, well inside its request budget
                view = v if v["your_turn"] else None
                if v["turn"] is None:
                    break
        for c in conns:
            c.close()

    def figures(self) -> dict[str, Any]:
        return {"actions": len(self.latencies), "games": self.games,
                "action_p50_ms": pct(self.latencies, 0.5),
                "action_p99_ms": pct(self.latencies, 0.99),
                "failures": dict(self.failures)}


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
    "storage": attack_storage,
}


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
    p.add_argument("--workers", type=int, default=None, help="serve's default: 2")
    p.add_argument("--storage-args", default="",
                   help="options for bench/abuse_storage.py (the storage attack), e.g. "
                        "'--bots 2000 --house-games 200'")
    args = p.parse_args(argv)
    args.body_timeout = float(os.environ.get("ARENA_BODY_TIMEOUT") or BODY_TIMEOUT_S)
    names = [n for n in args.attacks.split(",") if n]
    unknown = [n for n in names if n not in ATTACKS]
    if unknown:
        p.error(f"unknown attacks: {unknown}")

    need = max(args.slow_bodies, args.streams, args.polls) + 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE,
                           (need if hard == resource.RLIM_INFINITY else min(need, hard), hard))
    fd_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]

    with tempfile.TemporaryDirectory(prefix="allfours-abuse-") as tmp_dir:
        target = start(Path(tmp_dir), args.workers, {})
        target.args = args
        try:
            player = Apart(lambda: Player(target))
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
