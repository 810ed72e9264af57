"""Fair to everyone when one actor has many addresses (issue 36): the attacks of an actor
that spreads itself over the loopback range (127.0.0.0/8: any 127.x.y.z binds on Linux,
so a network here is a 127.x.y.0/24), each against ``allfours serve`` of its own (a Redis
of the run's own, every setting at its default unless the attack says), each bounded in
time; ONE JSON line with each attack's figures.

- ``house_fresh``: 256 addresses in 16 networks flood anonymous ``POST /bots`` and ``POST
  /house/games`` while a new network every second plays the house anonymously: how many
  of the fresh networks' house games were accepted (target: all).
- ``farm``: a bot that plays its highest card on the 2p ladder against four throwaway
  owners' bots that play their lowest (each owner new, from an address of its own), until
  it has 12 rated games: its rank and whether it is provisional (target: neither rank 1
  nor a ranked rating).
- ``analysis_flood``: a player's analysis of a game, unloaded; then 6 networks (2 owners
  each) ask for the analyses of their bots' games against themselves (as many as
  ``--flood-games``), and the player asks for another game's: its time to be served,
  against the unloaded one (target: within 2x). The service analyses at ``fast`` quality
  (both runs), so that the bench takes minutes.
- ``big_analysis``: a ~720 KB analysis (a real one's decisions repeated), read by 4
  addresses at once as fast as they go (``Accept-Encoding: gzip``, as a browser sends it)
  while an honest client lists games on a new connection each time: its p99 against
  its own without the readers, and what the readers got (statuses, bytes each).
- ``house_search``: 30 addresses in 8 networks play 4-player games against the house's
  search bots, answering every turn at once, while an honest client plays 2-player games:
  its action p99 against its baseline, the house process's niceness, and what its search
  decisions were (``/metrics``: searched, or the heuristic and why).
- ``long_game``: a person plays a 1,000-point house game against the search bot for
  ``--hold`` seconds; the log bytes and tracebacks written meanwhile, and whether the
  analysis of a 1,000-point game's first decisions runs (in this process).
- ``storage_rotation``: 256 addresses in 16 networks, each an owner, register bots (with
  the owner's token) and create waiting 4-player games with them for ``--hold`` seconds:
  what was accepted, the bytes each kept (``MEMORY USAGE``), and the growth an hour at
  that rate and at the service-wide budget.
- ``invitations``: 10 owners in 5 networks challenge one bot without end while another
  owner, from a fresh network, challenges it every second: how many of the honest
  challenges were made (target: all), the bot's ``/bots/me/turns`` answer's size, and
  how many invitations a bot that declines at once receives a minute.
- ``webhook_share``: two owners' webhook bots on one host name, other ports (the host's
  rate lowered to ``--host-rate`` calls a second for both runs, so that this machine can
  send more): the victim's calls a second in its one game alone, and while the other
  owner's 16 games run, and the victim's turns the host budget refused (each left to the
  clock) (target: unchanged, none).

    python bench/abuse_fairness.py                      # every attack (about 15 minutes)
    python bench/abuse_fairness.py --attacks farm,invitations --hold 20
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as ``python bench/abuse_fairness.py``, this file's directory comes first on sys.path,
# where bench/http.py would shadow the standard library's ``http``: drop it.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))
ROOT = _HERE.parent

import argparse  # noqa: E402
import contextlib  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Callable  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402
from typing import Any  # noqa: E402

import redis  # noqa: E402

from bench.harness import pct, start_redis  # noqa: E402
from service.storage.embedded import free_port  # noqa: E402

PREFIX = "af:"


def addr(net: int, host: int, base: int = 20) -> str:
    """Address ``host`` of network ``net`` (127.<base + net // 256>.<net % 256>.<host>)."""
    return f"127.{base + net // 256}.{net % 256}.{host}"


class Service:
    """``allfours serve`` on a Redis of its own (so the bench reads what was stored)."""

    def __init__(self, tmp: Path, env: dict[str, str], house: bool) -> None:
        self.redis_proc, rport = start_redis(tmp)
        self.redis_url = f"redis://127.0.0.1:{rport}/0"
        self.r = redis.Redis.from_url(self.redis_url)
        self.port = free_port()
        self.log = tmp / "serve.log"
        full = {**os.environ, "REDIS_URL": self.redis_url, "ARENA_KEY_PREFIX": PREFIX,
                **env}
        command = [sys.executable, "-m", "service.cli.main", "serve", "--port",
                   str(self.port), "--data-dir", str(tmp / "unused"),
                   *([] if house else ["--no-house-bots"])]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(command, env=full, stdout=out, stderr=out, cwd=tmp,
                                         start_new_session=True)
        until = time.monotonic() + 90
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(self.log.read_text(errors="replace")[-3000:])
            with contextlib.suppress(OSError, http.client.HTTPException):
                if self.call("GET", "/healthz")[0] == 200 and (
                        not house or self.r.exists(f"{PREFIX}house:alive")):
                    break
            if time.monotonic() > until:
                raise RuntimeError("serve did not become healthy")
            time.sleep(0.2)

    def call(self, method: str, path: str, body: Any = None, token: str | None = None,
             source: str = "127.0.0.1", headers: dict[str, str] | None = None,
             conn: http.client.HTTPConnection | None = None, timeout: float = 30
             ) -> tuple[int, Any, float, dict[str, str], int]:
        """(status, JSON body or None, ms, headers, bytes on the wire) of one request."""
        own = conn is None
        conn = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout,
                                                  source_address=(source, 0))
        sent = dict(headers or {})
        if body is not None:
            sent["Content-Type"] = "application/json"
        if token:
            sent["Authorization"] = f"Bearer {token}"
        started = time.perf_counter()
        try:
            conn.request(method, path, json.dumps(body) if body is not None else None, sent)
            resp = conn.getresponse()
            data = resp.read()
            ms = (time.perf_counter() - started) * 1000
            heads = {k.lower(): v for k, v in resp.getheaders()}
            value = None
            if data and "json" in heads.get("content-type", "") and \
                    heads.get("content-encoding") != "gzip":
                with contextlib.suppress(ValueError):
                    value = json.loads(data)
            return resp.status, value, ms, heads, len(data)
        finally:
            if own:
                conn.close()

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.redis_proc.terminate()
        self.redis_proc.wait(10)


def until(seconds: float) -> Callable[[], bool]:
    end = time.monotonic() + seconds
    return lambda: time.monotonic() < end


def play_out(svc: Service, gid: str, tokens: list[str], source: str,
             choose: Callable[[list[str]], str] = lambda legal: legal[0]) -> None:
    """Every seat's decision, as soon as it is its turn, until the game is over."""
    for _ in range(5000):
        moved = False
        for token in dict.fromkeys(tokens):
            st, v, *_ = svc.call("GET", f"/games/{gid}", token=token, source=source)
            if st != 200 or v["status"] == "finished":
                return
            if v["your_turn"]:
                svc.call("POST", f"/games/{gid}/actions", {
                    "action": choose(v["legal_actions"]), "version": v["version"]},
                    token=token, source=source)
                moved = True
        if not moved:
            time.sleep(0.02)


def metrics(svc: Service) -> dict[str, float]:
    """The ``/metrics`` samples whose names start with ``allfours_house`` or
    ``allfours_redis`` or ``allfours_rate_limited``."""
    conn = http.client.HTTPConnection("127.0.0.1", svc.port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    out = {}
    for line in text.splitlines():
        if line.startswith(("allfours_house", "allfours_redis", "allfours_rate_limited",
                            "allfours_storage")):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


# --- the attacks ------------------------------------------------------------------------------


def attack_house_fresh(tmp: Path, a: argparse.Namespace) -> dict[str, Any]:
    svc = Service(tmp, {}, house=True)
    try:
        flood: Counter[str] = Counter()
        go = until(a.hold)
        lock = threading.Lock()

        def flooder(i: int) -> None:
            n = 0
            while go():
                source = addr(i % 16, 1 + (n + i) % 16)
                path = "/bots" if n % 2 else "/house/games"
                body = {"name": "f"} if n % 2 else {"players": 2, "opponent": "random"}
                with contextlib.suppress(OSError):
                    st, v, *_ = svc.call("POST", path, body, source=source)
                    kind = (v or {}).get("type", "").rsplit("/", 1)[-1] if st != 201 else ""
                    with lock:
                        flood[f"{path} {st} {kind}".strip()] += 1
                n += 1

        threads = [threading.Thread(target=flooder, args=(i,)) for i in range(32)]
        for t in threads:
            t.start()
        fresh: Counter[int] = Counter()
        details: list[str] = []
        k = 0
        time.sleep(2)  # the flood has begun
        while go():
            source = addr(k, 1, base=40)  # a network nobody used
            st, v, *_ = svc.call("POST", "/house/games", {"players": 2, "opponent": "random"},
                                 source=source)
            fresh[st] += 1
            if st != 201 and len(details) < 3:
                details.append((v or {}).get("detail", ""))
            k += 1
            time.sleep(1.0)
        for t in threads:
            t.join(60)
        return {"attack": "house_fresh", "seconds": a.hold, "flood": dict(flood),
                "fresh_networks": k, "fresh_accepted": fresh[201],
                "fresh_statuses": {str(s): n for s, n in fresh.items()},
                "fresh_refusals": details}
    finally:
        svc.stop()


def attack_farm(tmp: Path, a: argparse.Namespace) -> dict[str, Any]:
    from clients.api import ArenaClient
    from clients.runner import BotRunner

    svc = Service(tmp, {"ARENA_LADDER_REMATCH_WAIT": "0"}, house=True)
    url = f"http://127.0.0.1:{svc.port}"
    try:
        clients, ids = [], []
        for name in ("farmer", "throw1", "throw2", "throw3", "throw4"):
            client = ArenaClient(url)
            ids.append(client.register(name).id)  # each an owner of its own
            clients.append(client)
        farmer = ids[0]
        stop = threading.Event()

        def highest(view: dict[str, Any], legal: list[str]) -> str:
            return legal[-1]

        def lowest(view: dict[str, Any], legal: list[str]) -> str:
            return legal[0]

        runners = [BotRunner(c, highest if i == 0 else lowest, ladder="2p", stop_event=stop,
                             poll_timeout=2.0, act_wait=2.0, name=f"farm{i}")
                   for i, c in enumerate(clients)]
        threads = [threading.Thread(target=r.run, daemon=True) for r in runners]
        started = time.monotonic()
        for t in threads:
            t.start()
        row: dict[str, Any] = {}
        go = until(a.farm_seconds)
        while go():
            _, body, *_ = svc.call("GET", "/ladders/2p/standings?limit=100")
            rows = {r["bot_id"]: r for r in (body or {}).get("items", [])}
            row = rows.get(farmer, {})
            if row.get("games", 0) >= 12:
                break
            time.sleep(1.0)
        elapsed = time.monotonic() - started
        stop.set()
        for r in runners:
            r.stop()
        for t in threads:
            t.join(5)
        _, body, *_ = svc.call("GET", "/ladders/2p/standings?limit=100")
        items = (body or {}).get("items", [])
        rows = {r["bot_id"]: r for r in items}
        row = rows.get(farmer, row)
        return {"attack": "farm", "seconds": round(elapsed, 1),
                "farmer": {k: row.get(k) for k in ("rank", "provisional", "games", "wins",
                                                   "mu", "sigma", "ordinal")},
                "ranked_bots": sum(1 for r in items if r.get("rank") is not None),
                "rank_1": next((r["bot_id"] == farmer for r in items if r.get("rank") == 1),
                               False)}
    finally:
        svc.stop()


def _self_game(svc: Service, token: str, bot: str, source: str, seed: int,
               target: int) -> str | None:
    st, g, *_ = svc.call("POST", "/games", {"players": 2, "seats": [bot, bot], "seed": seed,
                                            "variants": {"target": target}},
                         token=token, source=source)
    if st != 201:
        return None
    play_out(svc, g["id"], [token], source)
    return g["id"]


def _served(svc: Service, gid: str, token: str, source: str, limit: float) -> float | None:
    """Seconds from asking for ``gid``'s analysis to its 200 (None: not within ``limit``)."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        st, *_ = svc.call("GET", f"/games/{gid}/analysis", token=token, source=source)
        if st == 200:
            return round(time.monotonic() - started, 2)
        time.sleep(0.25)
    return None


def attack_analysis_flood(tmp: Path, a: argparse.Namespace) -> dict[str, Any]:
    svc = Service(tmp, {"ARENA_ANALYSIS_QUALITY": "fast"}, house=False)
    try:
        honest = addr(0, 1, base=41)
        st, me, *_ = svc.call("POST", "/bots", {"name": "honest"}, source=honest)
        first = _self_game(svc, me["token"], me["id"], honest, 1, a.target)
        unloaded = _served(svc, first, me["token"], honest, 300) if first else None
        # the flood: 6 networks, 2 owners each, their bots' games against themselves
        owners = []
        for net in range(6):
            for h in (1, 2):
                source = addr(net, h, base=42)
                st, bot, *_ = svc.call("POST", "/bots", {"name": f"f{net}{h}"}, source=source)
                if st == 201:
                    owners.append((bot, source))
        games: list[tuple[str, str, str]] = []
        lock = threading.Lock()

        def make(i: int) -> None:
            bot, source = owners[i % len(owners)]
            gid = _self_game(svc, bot["token"], bot["id"], source, 100 + i, a.target)
            if gid:
                with lock:
                    games.append((gid, bot["token"], source))

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(make, range(a.flood_games)))
        asked: Counter[int] = Counter()
        for gid, token, source in games:
            asked[svc.call("GET", f"/games/{gid}/analysis", token=token, source=source)[0]] += 1
        second = _self_game(svc, me["token"], me["id"], honest, 2, a.target)
        loaded = _served(svc, second, me["token"], honest, a.analysis_limit) if second else None
        given_up = svc.log.read_text(errors="replace").count("given up for a lighter")
        return {"attack": "analysis_flood", "quality": "fast", "target": a.target,
                "games_given_up_for_the_player": given_up,
                "unloaded_s": unloaded, "while_flooded_s": loaded,
                "ratio": round(loaded / unloaded, 2) if loaded and unloaded else None,
                "flood_games": len(games),
                "flood_asks": {str(s): n for s, n in asked.items()}}
    finally:
        svc.stop()


def _big_analysis(svc: Service, size: int) -> tuple[str, int]:
    """A finished game whose stored analysis is about ``size`` bytes: a real one (at fast
    quality, computed here) with its decisions repeated."""
    from service.analysis import analyse
    from service.arena.analyses.queue import Analyses
    from service.storage.store import Store

    _, me, *_ = svc.call("POST", "/bots", {"name": "big"})
    gid = _self_game(svc, me["token"], me["id"], "127.0.0.1", 3, 7)
    store = Store(svc.r, PREFIX)
    game = store.get_game(gid)
    result = analyse(game.players, game.meta["seed"], game.variants, game.actions,
                     quality="fast")
    real = result["decisions"]
    one = len(json.dumps(real)) / len(real)
    rng = random.Random(7)

    def varied(value: Any) -> Any:
        """Each number moved a little, as another game's would be (a real analysis
        compresses to about a tenth; the same decisions over and over, to a fiftieth)."""
        if isinstance(value, float):
            return round(value + rng.uniform(-0.5, 0.5), 4)
        if isinstance(value, dict):
            return {k: varied(v) for k, v in value.items()}
        if isinstance(value, list):
            return [varied(v) for v in value]
        return value

    result["decisions"] = [dict(varied(real[i % len(real)]), ply=i)
                           for i in range(int(size / one))]
    q = Analyses(store)
    svc.call("GET", f"/games/{gid}/analysis", token=me["token"])  # asked, as a player does
    assert q.claim(gid, "bench") == 1
    assert q.finish(gid, "bench", result)
    return gid, len(json.dumps(result))


def _honest_reads(svc: Service, seconds: float, every: float = 0.05) -> list[float]:
    """``GET /games`` on a new connection every ``every`` s from a client of its own."""
    out = []
    go = until(seconds)
    while go():
        with contextlib.suppress(OSError):
            st, _, ms, _, _ = svc.call("GET", "/games?limit=20", source="127.51.0.1")
            if st == 200:
                out.append(ms)
        time.sleep(every)
    return out


def attack_big_analysis(tmp: Path, a: argparse.Namespace) -> dict[str, Any]:
    svc = Service(tmp, {"ARENA_ANALYSIS_WORKERS": "0"}, house=False)
    try:
        gid, size = _big_analysis(svc, 720_000)
        baseline = _honest_reads(svc, a.baseline)
        got: Counter[str] = Counter()
        wire: list[int] = []
        go = until(a.hold)
        lock = threading.Lock()

        def reader(i: int) -> None:
            source = addr(i % 4, 1, base=52)
            conn = http.client.HTTPConnection("127.0.0.1", svc.port, timeout=30,
                                              source_address=(source, 0))
            while go():
                try:
                    st, _, _, heads, n = svc.call("GET", f"/games/{gid}/analysis",
                                                  headers={"Accept-Encoding": "gzip"},
                                                  conn=conn)
                except (OSError, http.client.HTTPException):
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", svc.port, timeout=30,
                                                      source_address=(source, 0))
                    continue
                with lock:
                    got[str(st)] += 1
                    if st == 200:
                        wire.append(n)
                if st == 429:
                    time.sleep(float(heads.get("retry-after", "1")))
            conn.close()

        threads = [threading.Thread(target=reader, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        during = _honest_reads(svc, a.hold)
        for t in threads:
            t.join(60)
        return {"attack": "big_analysis", "analysis_bytes": size, "readers": 16,
                "reader_networks": 4, "seconds": a.hold,
                "reads": dict(got), "reads_per_s": round(sum(got.values()) / a.hold, 1),
                "bytes_per_200": pct([float(x) for x in wire], 0.5),
                "honest_p50_ms": [pct(baseline, 0.5), pct(during, 0.5)],
                "honest_p99_ms": [pct(baseline, 0.99), pct(during, 0.99)],
                "honest_p99_vs_baseline": (round(pct(during, 0.99) / pct(baseline, 0.99), 2)
                                           if baseline and during else None)}
    finally:
        svc.stop()


def _honest_player(svc: Service) -> Any:
    """bench/abuse.py's second client (2-player games, move after move) on this service."""
    from bench.abuse import Apart, Player, Target

    target = Target(svc.port, svc.proc, svc.log, argparse.Namespace(pace=0.02))
    return Apart(lambda: Player(target))


def _cpu_s(pid: int | None) -> float:
    """CPU seconds ``pid`` has used (user and system, from /proc)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _house_pid(svc: Service) -> int | None:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if b"service.arena.accounts.house" in (entry / "cmdline").read_bytes():
                    stat = (entry / "stat").read_text()
                    if int(stat.rsplit(")", 1)[1].split()[1]) == svc.proc.pid:
                        return int(entry.name)
    return None


def attack_house_search(tmp: Path, a: argparse.Namespace) -> dict[str, Any]:
    svc = Service(tmp, {}, house=True)
    try:
        player = _honest_player(svc)
        time.sleep(a.baseline)
        baseline = player.finish()
        before = metrics(svc)
        go = until(a.hold)
        made: Counter[int] = Counter()

        def person(i: int) -> None:
            source = addr(i % 8, 1 + i // 8, base=60)
            st, h, *_ = svc.call("POST", "/house/games", {
                "players": 4, "opponent": "search", "partner": "search"}, source=source)
            made[st] += 1
            if st != 201:
                return
            token, gid = h["player"]["token"], h["game"]["id"]
            while go():
                st, v, *_ = svc.call("GET", f"/games/{gid}/turn?timeout=5", token=token,
                                     source=source)
                view = (v or {}).get("view") or {}
                if st != 200 or view.get("status") == "finished":
                    st, h, *_ = svc.call("POST", "/house/games", {
                        "players": 4, "opponent": "search", "partner": "search"},
                        source=source)
                    made[st] += 1
                    if st != 201:
                        return
                    token, gid = h["player"]["token"], h["game"]["id"]
                    continue
                if view.get("your_turn"):
                    svc.call("POST", f"/games/{gid}/actions", {
                        "action": view["legal_actions"][0], "version": view["version"]},
                        token=token, source=source)

        pid = _house_pid(svc)
        player = _honest_player(svc)
        threads = [threading.Thread(target=person, args=(i,)) for i in range(a.people)]
        cpu0, wall0 = _cpu_s(pid), time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(a.hold + 60)
        house_cores = (_cpu_s(pid) - cpu0) / (time.monotonic() - wall0)
        during = player.finish()
        time.sleep(11)  # the house's next beat writes its counts
        after = metrics(svc)
        base99, now99 = baseline.get("action_p99_ms"), during.get("action_p99_ms")
        return {"attack": "house_search", "people": a.people, "seconds": a.hold,
                "house_games": {str(s): n for s, n in made.items()},
                "honest_action_p99_ms": [base99, now99],
                "honest_action_p99_vs_baseline": (round(now99 / base99, 2)
                                                  if base99 and now99 else None),
                "honest_actions": [baseline.get("actions"), during.get("actions")],
                "house_nice": os.getpriority(os.PRIO_PROCESS, pid) if pid else None,
                "house_cores": round(house_cores, 2),
                "house_decisions": {k: v - before.get(k, 0) for k, v in after.items()
                                    if k.startswith("allfours_house_decisions")}}
    finally:
        svc.stop()


def attack_long_game(tmp: Path, a: argparse.Namespace) -> dict[str, Any]:
    svc = Service(tmp, {}, house=True)
    try:
        _, h, *_ = svc.call("POST", "/house/games", {
            "players": 2, "opponent": "search", "variants": {"target": 1000}})
        token, gid = h["player"]["token"], h["game"]["id"]
        size = svc.log.stat().st_size
        text = svc.log.read_text(errors="replace")
        go = until(a.hold)
        moves = 0
        while go():
            _, v, *_ = svc.call("GET", f"/games/{gid}/turn?timeout=5", token=token)
            view = (v or {}).get("view") or {}
            if view.get("your_turn"):
                svc.call("POST", f"/games/{gid}/actions", {
                    "action": view["legal_actions"][0], "version": view["version"]},
                    token=token)
                moves += 1
        time.sleep(1)
        written = svc.log.read_text(errors="replace")[len(text):]
        # the errors: every line at error level, and the tracebacks' lines with them
        errors = [line for line in written.splitlines()
                  if '"level":"error"' in line or "ERROR" in line or "Traceback" in line
                  or line.startswith(("  ", "RecursionError"))]
        _, v, *_ = svc.call("GET", f"/games/{gid}")
        analysis: Any
        try:
            from service.analysis import analyse
            from service.engine import action_name, apply, legal_actions, new_game
            from service.engine.variants import Variants

            state, _ = new_game(2, 9, Variants.from_dict({"target": 1000}))
            actions = []
            for _ in range(20):
                act = legal_actions(state)[0]
                actions.append(action_name(act))
                state, _ = apply(state, act)
            analyse(2, 9, {"target": 1000}, actions, quality="fast")
            analysis = "ok"
        except RecursionError:
            analysis = "RecursionError"
        return {"attack": "long_game", "seconds": a.hold, "person_moves": moves,
                "game_version": (v or {}).get("version"),
                "log_bytes": svc.log.stat().st_size - size,
                "error_lines": len(errors),
                "error_bytes": sum(len(line) + 1 for line in errors),
                "error_bytes_per_day_at_this_rate": round(
                    sum(len(line) + 1 for line in errors) * 86400 / a.hold),
                "tracebacks": written.count("Traceback"),
                "analysis_of_a_1000_point_game": analysis}
    finally:
        svc.stop()


STORED = [("bot", r"(bot|token):"), ("game", r"game:"), ("index", r"games:|deadlines"),
          ("counter", r"rl:|quota:|\{budget\}|owners-made"), ("owner", r"owner:")]


def _families(r: redis.Redis, keys: set[bytes]) -> dict[str, list[int]]:
    """[keys, bytes (MEMORY USAGE)] of ``keys`` by family (``STORED``)."""
    out: dict[str, list[int]] = {}
    for k in keys:
        name = k.decode()[len(PREFIX):]
        fam = next((f for f, rx in STORED if re.match(rx, name)), "other")
        row = out.setdefault(fam, [0, 0])
        row[0] += 1
        row[1] += int(r.memory_usage(k) or 0)
    return out


def attack_storage_rotation(tmp: Path, a: argparse.Namespace) -> dict[str, Any]:
    svc = Service(tmp, {}, house=False)
    try:
        before = set(svc.r.scan_iter(match=f"{PREFIX}*", count=1000))
        used0 = int(svc.r.info("memory")["used_memory"])
        made: Counter[str] = Counter()
        go = until(a.hold)
        lock = threading.Lock()

        owners: dict[str, str] = {}  # address -> the token of its owner's first bot

        def rotate(i: int) -> None:
            n = 0
            while go():
                source = addr((i + n) % 16, 1 + (i * 7 + n) % 16, base=70)
                n += 1
                with contextlib.suppress(OSError):
                    # one owner an address, its further bots registered with its token
                    st, bot, *_ = svc.call("POST", "/bots", {"name": "r"},
                                           token=owners.get(source), source=source)
                    with lock:
                        made[f"bots {st}"] += 1
                    if st != 201:
                        continue
                    owners.setdefault(source, bot["token"])
                    st, _, *_ = svc.call("POST", "/games", {"players": 4},
                                         token=bot["token"], source=source)
                    with lock:
                        made[f"games {st}"] += 1

        threads = [threading.Thread(target=rotate, args=(i,)) for i in range(64)]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(a.hold + 60)
        seconds = time.monotonic() - started
        new = set(svc.r.scan_iter(match=f"{PREFIX}*", count=1000)) - before
        families = _families(svc.r, new)
        bots, games = made["bots 201"], made["games 201"]
        bot_b = families.get("bot", [0, 0])[1] / max(1, bots)
        game_b = (families.get("game", [0, 0])[1] + families.get("owner", [0, 0])[1]) \
            / max(1, games)
        kept = (families.get("bot", [0, 0])[1] + families.get("game", [0, 0])[1]
                + families.get("owner", [0, 0])[1])
        # an hour at the service-wide budget, if set (defaults 60 a minute each, plus each
        # of the 16 networks' reserve of 5): what is kept (bots a week, waiting games a day)
        cap = 60 + 5 * 16
        return {"attack": "storage_rotation", "addresses": 256, "networks": 16,
                "seconds": round(seconds, 1), "made": dict(made),
                "bytes_by_family": families,
                "used_memory_grew": int(svc.r.info("memory")["used_memory"]) - used0,
                "bytes_per_bot": round(bot_b), "bytes_per_game": round(game_b),
                "kept_per_hour_at_this_rate_mb": round(kept * 3600 / seconds / 1e6, 1),
                "kept_per_hour_at_the_budget_mb": round(cap * 60 * (bot_b + game_b) / 1e6, 1)}
    finally:
        svc.stop()


def attack_invitations(tmp: Path, a: argparse.Namespace) -> dict[str, Any]:
    svc = Service(tmp, {}, house=False)
    try:
        st, victim, *_ = svc.call("POST", "/bots", {"name": "victim"},
                                  source=addr(0, 1, base=80))
        squatters = []
        for net in range(5):
            for h in (1, 2):
                source = addr(net, h, base=81)
                st, bot, *_ = svc.call("POST", "/bots", {"name": "sq"}, source=source)
                if st == 201:
                    squatters.append((bot, source))
        go = until(a.hold)
        sent: Counter[str] = Counter()

        def squat(bot: dict[str, Any], source: str) -> None:
            while go():
                st, *_ = svc.call("POST", "/games", {"players": 2,
                                                     "seats": [bot["id"], victim["id"]]},
                                  token=bot["token"], source=source)
                sent[str(st)] += 1
                if st != 201:
                    time.sleep(0.5)

        threads = [threading.Thread(target=squat, args=s) for s in squatters]
        for t in threads:
            t.start()
        time.sleep(2)
        challenges: Counter[int] = Counter()
        k = 0
        while go():  # a new honest owner, from a network of its own, every second
            honest_src = addr(k, 1, base=82)
            k += 1
            st, honest, *_ = svc.call("POST", "/bots", {"name": "honest"}, source=honest_src)
            if st != 201:
                challenges[-st] += 1  # (its registration refused)
                continue
            st, *_ = svc.call("POST", "/games", {"players": 2,
                                                 "seats": [honest["id"], victim["id"]]},
                              token=honest["token"], source=honest_src)
            challenges[st] += 1
            time.sleep(1.0)
        for t in threads:
            t.join(30)
        st, turns, _, _, size = svc.call("GET", "/bots/me/turns?timeout=0",
                                         token=victim["token"])
        # a bot that declines at once: how many it receives in --hold seconds
        st, quick, *_ = svc.call("POST", "/bots", {"name": "decliner"},
                                 source=addr(1, 1, base=80))
        go = until(a.hold)
        received = 0

        def squat2(bot: dict[str, Any], source: str) -> None:
            while go():
                st, *_ = svc.call("POST", "/games", {"players": 2,
                                                     "seats": [bot["id"], quick["id"]]},
                                  token=bot["token"], source=source)
                if st != 201:
                    time.sleep(0.5)

        threads = [threading.Thread(target=squat2, args=s) for s in squatters]
        started = time.monotonic()
        for t in threads:
            t.start()
        while go():
            st, mine, *_ = svc.call("GET", "/bots/me/invitations", token=quick["token"])
            for inv in (mine or {}).get("invitations", []):
                st, *_ = svc.call("POST", f"/invitations/{inv['id']}/decline",
                                  token=quick["token"])
                received += st == 200
        for t in threads:
            t.join(30)
        minutes = (time.monotonic() - started) / 60
        return {"attack": "invitations", "squatters": len(squatters), "networks": 5,
                "seconds": a.hold, "squat_answers": dict(sent),
                "honest_challenges": {str(s): n for s, n in challenges.items()},
                "victim_turns_bytes": size,
                "victim_turns_invitations": len((turns or {}).get("invitations", [])),
                "declined": received, "declined_a_minute": round(received / minutes)}
    finally:
        svc.stop()


class _Hook(BaseHTTPRequestHandler):
    """A webhook bot's server: echoes verifications, answers a turn with its first legal
    action, counts the turn calls (``server.turns``)."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        if body.get("event") == "verify":
            out = {"challenge": body["challenge"]}
        elif body.get("event") == "turn":
            self.server.turns.append(time.monotonic())  # type: ignore[attr-defined]
            time.sleep(self.server.think_s)  # type: ignore[attr-defined]
            out = {"action": body["view"]["legal_actions"][0]}
        else:
            out = {}
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def _hook_server(think_s: float = 0.0) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    server.turns = []  # type: ignore[attr-defined]
    server.think_s = think_s  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _hooked_pair(svc: Service, url: str, source: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two webhook bots of one owner, calling ``url``, verified."""
    _, one, *_ = svc.call("POST", "/bots", {"name": "h1"}, source=source)
    _, two, *_ = svc.call("POST", "/bots", {"name": "h2"}, token=one["token"], source=source)
    for bot in (one, two):
        svc.call("PUT", "/bots/me/callback", {"url": url}, token=bot["token"], source=source)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if all((svc.call("GET", "/bots/me/callback", token=b["token"], source=source)[1]
                or {}).get("verified") for b in (one, two)):
            break
        time.sleep(0.5)
    return one, two


def _keep_playing(svc: Service, pair: tuple[dict[str, Any], dict[str, Any]], source: str,
                  games: int, go: Callable[[], bool]) -> None:
    """``games`` games at once between the pair, a new one as each ends, while ``go``."""
    one, two = pair
    live: list[str] = []
    seed = 0
    while go():
        for gid in list(live):
            st, v, *_ = svc.call("GET", f"/games/{gid}", source=source)
            if st != 200 or v["status"] == "finished":
                live.remove(gid)
        while len(live) < games:
            seed += 1
            st, g, *_ = svc.call("POST", "/games", {
                "players": 2, "seats": [one["id"], two["id"]], "move_limit": 60,
                "seed": seed}, token=one["token"], source=source)
            if st != 201:
                break
            live.append(g["id"])
        time.sleep(0.5)


def _limited(svc: Service, bots: tuple[dict[str, Any], ...], source: str, since: float
             ) -> int:
    """The bots' turn deliveries since ``since`` (unix s) that the host budget refused
    (each a turn left to the clock)."""
    n = 0
    for bot in bots:
        _, d, *_ = svc.call("GET", "/bots/me/callback/deliveries?limit=200",
                            token=bot["token"], source=source)
        n += sum(1 for x in (d or {}).get("deliveries", [])
                 if x["at"] >= since and x["outcome"] == "host-rate-limited")
    return n


def attack_webhook_share(tmp: Path, a: argparse.Namespace) -> dict[str, Any]:
    svc = Service(tmp, {"ARENA_CALLBACK_NETWORKS": "127.0.0.0/8",
                        "ARENA_CALLBACK_HOST_RATE": str(a.host_rate)}, house=False)
    # the victim thinks 50 ms a turn (about 15 calls a second, well inside its share);
    # the attacker answers at once, in 16 games
    victim_srv, attacker_srv = _hook_server(0.05), _hook_server()
    stop = threading.Event()
    try:
        vurl = f"http://127.0.0.1:{victim_srv.server_address[1]}/bot"
        aurl = f"http://127.0.0.1:{attacker_srv.server_address[1]}/bot"
        vsrc, asrc = addr(0, 1, base=90), addr(1, 1, base=90)
        victim = _hooked_pair(svc, vurl, vsrc)
        attacker = _hooked_pair(svc, aurl, asrc)
        playing = threading.Thread(target=_keep_playing, args=(
            svc, victim, vsrc, 1, lambda: not stop.is_set()), daemon=True)
        playing.start()
        time.sleep(3)

        def rate(server: Any, seconds: float) -> float:
            start = len(server.turns)
            time.sleep(seconds)
            return round((len(server.turns) - start) / seconds, 1)

        since = time.time()
        alone = rate(victim_srv, a.baseline)
        lost_alone = _limited(svc, victim, vsrc, since)
        since = time.time()
        flood = threading.Thread(target=_keep_playing, args=(
            svc, attacker, asrc, 16, lambda: not stop.is_set()), daemon=True)
        flood.start()
        time.sleep(3)
        before = len(attacker_srv.turns)
        attacked = rate(victim_srv, a.hold)
        attacker_rate = round((len(attacker_srv.turns) - before) / a.hold, 1)
        lost = _limited(svc, victim, vsrc, since)
        return {"attack": "webhook_share", "host_rate": a.host_rate,
                "victim_calls_per_s": [alone, attacked],
                "victim_vs_alone": round(attacked / alone, 2) if alone else None,
                "victim_turns_refused_by_the_host_budget": [lost_alone, lost],
                "attacker_calls_per_s": attacker_rate}
    finally:
        stop.set()
        for server in (victim_srv, attacker_srv):
            server.shutdown()
        svc.stop()


ATTACKS: dict[str, Callable[[Path, argparse.Namespace], dict[str, Any]]] = {
    "house_fresh": attack_house_fresh,
    "farm": attack_farm,
    "analysis_flood": attack_analysis_flood,
    "big_analysis": attack_big_analysis,
    "house_search": attack_house_search,
    "long_game": attack_long_game,
    "storage_rotation": attack_storage_rotation,
    "invitations": attack_invitations,
    "webhook_share": attack_webhook_share,
}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--attacks", default=",".join(ATTACKS),
                   help=f"comma-separated, of: {', '.join(ATTACKS)}")
    p.add_argument("--hold", type=float, default=30.0, help="seconds each attack lasts")
    p.add_argument("--baseline", type=float, default=10.0,
                   help="seconds of the honest client's figures without the attack")
    p.add_argument("--farm-seconds", type=float, default=180.0)
    p.add_argument("--target", type=int, default=7, help="analysis_flood's games' target")
    p.add_argument("--flood-games", type=int, default=72)
    p.add_argument("--analysis-limit", type=float, default=300.0,
                   help="seconds the player's analysis is waited for at most")
    p.add_argument("--people", type=int, default=30, help="house_search's players")
    p.add_argument("--host-rate", type=int, default=30,
                   help="webhook_share's ARENA_CALLBACK_HOST_RATE (both runs)")
    return p


def run(names: list[str], a: argparse.Namespace) -> list[dict[str, Any]]:
    out = []
    for name in names:
        with tempfile.TemporaryDirectory(prefix=f"allfours-{name}-") as tmp:
            started = time.monotonic()
            try:
                result = ATTACKS[name](Path(tmp), a)
            except Exception as exc:  # one attack's failure is its figure, not the run's end
                result = {"attack": name, "error": f"{type(exc).__name__}: {exc}"}
            result["bench_seconds"] = round(time.monotonic() - started, 1)
            out.append(result)
    return out


def main(argv: list[str] | None = None) -> None:
    p = parser()
    a = p.parse_args(argv)
    names = [n for n in a.attacks.split(",") if n]
    unknown = [n for n in names if n not in ATTACKS]
    if unknown:
        p.error(f"unknown attacks: {unknown}")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    results = run(names, a)
    print(json.dumps({"bench": "abuse_fairness", "commit": head,
                      "command": " ".join(["python", "bench/abuse_fairness.py",
                                           *(argv if argv is not None else sys.argv[1:])]),
                      "attacks": results}, separators=(",", ":")))


if __name__ == "__main__":
    main()
