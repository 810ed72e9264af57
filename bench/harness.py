"""What the HTTP benchmarks share: their own Redis and service, process figures, requests.

``bench/http.py``, ``bench/sse.py`` and ``bench/connections.py`` each start a
``redis-server`` of their own (free port, no persistence: the shared 6379 is never
touched) and the service under gunicorn as deployed (``service.cli.serve.gunicorn_command``),
and read the processes' CPU, memory and scheduling delays from ``/proc``. Imported as
``bench.harness`` by those scripts, after they drop ``bench/`` from ``sys.path`` (where
``bench/http.py`` would shadow the standard library's ``http``).
"""

from __future__ import annotations

import http.client
import json
import os
import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from service.cli.serve import gunicorn_command
from service.storage.embedded import die_with_parent, find_server_binary, free_port, ping

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parents[1]
CLK_TCK = os.sysconf("SC_CLK_TCK")


# --- figures ---------------------------------------------------------------------------------


def pct(values: list[float], q: float, digits: int | None = None) -> float | None:
    """The ``q`` quantile (nearest rank) of ``values``, None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    value = ordered[min(len(ordered) - 1, int(q * len(ordered)))]
    return value if digits is None else round(value, digits)


def wait_until(predicate: Callable[[], Any], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid`` (all its threads), 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_kb(pid: int) -> int:
    """Resident memory of process ``pid`` in KiB (``VmRSS``), 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def runqueue_s(pid: int) -> float:
    """Seconds the threads of ``pid`` have spent runnable but waiting for a CPU (the
    second field of ``/proc/<pid>/task/<tid>/schedstat``): on a shared box, the delay a
    process suffered because every core was busy with something else."""
    total = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0.0
    for task in tasks:
        try:
            total += int((task / "schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total / 1e9


def box_busy_s() -> float:
    """CPU seconds the whole machine has spent busy since boot, all cores summed (every
    field of ``/proc/stat``'s ``cpu`` line but idle and iowait): less what this run's
    processes used, the share other work on a shared box took meanwhile."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / CLK_TCK


def thread_runqueue_s() -> float:
    """``runqueue_s`` of the calling thread alone: a thread that has ended is no longer
    listed under its process, so threads that come and go measure themselves."""
    try:
        return int(Path("/proc/thread-self/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid:
                found.append(int(entry.name))
    return found


def raise_open_files(needed: int) -> int:
    """Raise this process's soft RLIMIT_NOFILE towards ``needed`` (at most the hard limit;
    children inherit it): a load client of thousands of sockets, and the gunicorn it
    starts, would otherwise stop at 1,024. Returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return soft
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


def send_queue_bytes(port: int) -> int:
    """Bytes the kernel holds unsent (``tx_queue``) on the TCP sockets whose local port is
    ``port``: the service's share of a slow consumer's cost that no RSS shows."""
    total = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                total += int(fields[4].split(":")[0], 16)
    return total


def gc_probe(log_dir: Path, code: Path = ROOT) -> dict[str, str]:
    """Settings that make the service's processes log their garbage collections into
    ``log_dir`` (``bench/gcprobe/sitecustomize.py``); add them to ``start_service``'s."""
    log_dir.mkdir(parents=True, exist_ok=True)
    return {"BENCH_GC_LOG": str(log_dir),
            "PYTHONPATH": f"{ROOT / 'bench' / 'gcprobe'}{os.pathsep}{code}"}


def gc_pauses(log_dir: Path, pids: list[int], since: float, until: float) -> dict[str, Any]:
    """The collections processes ``pids`` logged (``gc_probe``) that started between
    ``since`` and ``until`` (``time.time()``): per generation, how many, and the wall and
    CPU milliseconds (sum, max); and how many stalled the worker over 10 ms."""
    out: dict[str, Any] = {}
    over = 0
    for pid in pids:
        path = log_dir / f"{pid}.gc"
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            try:
                at, gen, wall, cpu = line.split()
            except ValueError:
                continue
            if not since <= float(at) <= until:
                continue
            g = out.setdefault(f"gen{gen}", {"n": 0, "wall_ms_sum": 0.0, "wall_ms_max": 0.0,
                                             "cpu_ms_sum": 0.0, "cpu_ms_max": 0.0})
            g["n"] += 1
            g["wall_ms_sum"] += float(wall)
            g["cpu_ms_sum"] += float(cpu)
            g["wall_ms_max"] = max(g["wall_ms_max"], float(wall))
            g["cpu_ms_max"] = max(g["cpu_ms_max"], float(cpu))
            over += float(wall) > 10
    for g in out.values():
        for k in ("wall_ms_sum", "wall_ms_max", "cpu_ms_sum", "cpu_ms_max"):
            g[k] = round(g[k], 1)
    return {**dict(sorted(out.items())), "stalls_over_10ms": over}


# --- processes -------------------------------------------------------------------------------


def stop(proc: subprocess.Popen[bytes] | None, timeout: float = 20.0,
         sig: int = signal.SIGTERM) -> None:
    """Signal ``proc`` (SIGINT for ``allfours serve``, as Ctrl-C would) and wait at most
    ``timeout`` s, then SIGKILL it: a bench never hangs on its way out."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_redis(workdir: Path, maxclients: int | None = None
                ) -> tuple[subprocess.Popen[bytes], int]:
    """A ``redis-server`` of this run's own: free port, no persistence."""
    port = free_port()
    extra = [] if maxclients is None else ["--maxclients", str(maxclients)]
    proc = subprocess.Popen(
        [shutil.which("redis-server") or find_server_binary(), "--bind", HOST, "--port",
         str(port), "--save", "", "--appendonly", "no", "--dir", str(workdir), *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent)
    wait_until(lambda: ping(HOST, port) or proc.poll() is not None, 20, "redis-server")
    if proc.poll() is not None:
        raise RuntimeError("redis-server exited")
    return proc, port


# Every load these benchmarks make comes from one address (loopback), thousands of streams
# and polls of a few bots: the caps per client, per network and per bot
# (service.http.connections) are off here, as the rate limit is, so that what is measured
# is the service's cost, not its refusals (bench/abuse.py measures those, with the caps
# on). The worker's held budget stays: it bounds any deployment, as its connection cap does.
ONE_ADDRESS_LOAD = {
    "ARENA_STREAMS_PER_CLIENT": "0", "ARENA_STREAMS_PER_BOT": "0",
    "ARENA_POLLS_PER_CLIENT": "0", "ARENA_POLLS_PER_BOT": "0",
    "ARENA_SPECTATOR_SHARE": "0", "ARENA_CLIENT_SHARE": "0",
    "ARENA_HELD_NETWORK_SHARE": "0",
}


def start_service(redis_port: int | str, workers: int, log: Path, settings: Mapping[str, str],
                  code: Path = ROOT) -> tuple[subprocess.Popen[bytes], int]:
    """The service under gunicorn (``workers`` gevent workers) on a free port, ``code``
    first on ``PYTHONPATH``, over the Redis at ``redis_port`` (or a URL), with ``settings``
    in its environment; once ``/healthz`` answers. Its output goes to ``log``."""
    port = free_port()
    url = redis_port if isinstance(redis_port, str) else f"redis://{HOST}:{redis_port}/0"
    env = {**os.environ, "PYTHONPATH": str(code), "REDIS_URL": url, **ONE_ADDRESS_LOAD,
           **settings}
    with log.open("wb") as out:
        proc = subprocess.Popen(gunicorn_command(HOST, port, workers), env=env, stdout=out,
                                stderr=out, cwd=code, preexec_fn=die_with_parent)

    def up() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"gunicorn exited:\n{log.read_text(errors='replace')}")
        try:
            return request(port, "GET", "/healthz", timeout=1)[0] == 200
        except OSError:
            return False

    wait_until(up, 60, "gunicorn /healthz")
    return proc, port


# --- requests --------------------------------------------------------------------------------


def request(port: int, method: str, path: str, body: Any = None, token: str | None = None,
            conn: http.client.HTTPConnection | None = None, timeout: float = 30
            ) -> tuple[int, Any]:
    """One JSON request (on ``conn``, else on a connection of its own): status, body."""
    own = conn is None
    conn = conn or http.client.HTTPConnection(HOST, port, timeout=timeout)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn.request(method, path, json.dumps(body) if body is not None else None, headers)
        r = conn.getresponse()
        data = r.read()
        return r.status, (json.loads(data) if data else None)
    finally:
        if own:
            conn.close()
