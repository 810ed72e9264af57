"""``allfours serve``: the service under gunicorn, with an embedded Redis when none is given.

Why gunicorn runs as a subprocess (``python -m gunicorn -c python:service.http.gunicorn_conf``)
rather than through its Python API: the API turns this process into the gunicorn arbiter,
which installs its own signal handlers and leaves by ``sys.exit`` — there would be no
place left to stop the embedded server afterwards. As a subprocess, gunicorn runs exactly
as the Dockerfile runs it (same command, same config), and this process stays a small
supervisor: start Redis, start gunicorn, wait, and on Ctrl-C or SIGTERM stop, in this
order: the house bots (a client of the service: stopped while the service still answers,
they leave quietly instead of retrying against a server that is going away), gunicorn
(its drain answers or refuses every request; no worker sees Redis vanish mid-request),
then Redis. The signal handler only notes the request; the main loop does the stopping,
so the order holds however the signal lands.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from service.storage.embedded import (
    EmbeddedRedis,
    EmbeddedRedisError,
    spawn_child,
    stop_process,
    stop_processes,
)

DEFAULT_APP = "service.http.wsgi:app"
GUNICORN_CONFIG = "python:service.http.gunicorn_conf"
# gunicorn's own graceful_timeout is 5 s; allow that plus start-up slack before SIGKILL.
_STOP_WAIT = 15.0
# The house process leaves within ``service.arena.accounts.house.STOP_GRACE_S`` of its SIGTERM; past
# this it is killed (nothing of it needs saving: every move it sends is idempotent).
_HOUSE_STOP_WAIT = 3.0


def default_data_dir() -> Path:
    """``$ARENA_DATA_DIR``, else ``./data``: where the embedded server keeps its files."""
    return Path(os.environ.get("ARENA_DATA_DIR") or "data")


def gunicorn_command(
    host: str, port: int, workers: int | None = None, app: str = DEFAULT_APP
) -> list[str]:
    """The gunicorn command line (the Dockerfile's CMD is the same minus the flags).

    With no ``workers``, the config's own count applies ($WEB_CONCURRENCY, else 2).
    """
    bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    count = [] if workers is None else ["--workers", str(workers)]
    return [
        sys.executable, "-m", "gunicorn",
        "-c", GUNICORN_CONFIG,
        "--bind", bind,
        *count,
        app,
    ]  # fmt: skip


# Descriptors a worker uses besides its client connections and pooled Redis connections:
# the listener, the log, the metrics files, the pub/sub listener, an embedded module or two.
FILE_HEADROOM = 64


def open_files_needed(env: dict[str, str] | os._Environ[str] | None = None) -> int:
    """The open files one worker may hold at its connection budget: each client connection
    it serves (``ARENA_WORKER_CONNECTIONS``) plus the ones it is refusing (``SHED_SLOTS``),
    a pooled Redis connection per served one (``redis_client.pool_size``), and
    ``FILE_HEADROOM``. The limit is per process, so ``WEB_CONCURRENCY`` workers each need
    this much, not the sum."""
    from service.http.gevent_worker import SHED_SLOTS
    from service.storage.redis_client import pool_size

    env = os.environ if env is None else env
    cap = int(env.get("ARENA_WORKER_CONNECTIONS") or 2000)
    return cap + SHED_SLOTS + pool_size(cap) + FILE_HEADROOM


def raise_open_files(needed: int) -> str | None:
    """Raise this process's soft RLIMIT_NOFILE towards ``needed`` (gunicorn and its
    workers inherit it); at the common default of 1,024 a worker would fail with "Too many
    open files" near 1,000 connections. Capped by the hard limit, which only root raises:
    return the one line to say when ``needed`` is out of reach, else None."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return None
    return (f"open-file limit is {soft} (hard limit {hard}) but each worker may need "
            f"{needed} at ARENA_WORKER_CONNECTIONS "
            f"{os.environ.get('ARENA_WORKER_CONNECTIONS') or 2000}; connections past it fail "
            f"with 'Too many open files': raise the hard limit (ulimit -Hn {needed} as root, "
            "LimitNOFILE= in systemd, --ulimit nofile= in Docker) or lower "
            "ARENA_WORKER_CONNECTIONS")


def _log(message: str) -> None:
    print(f"allfours serve: {message}", file=sys.stderr, flush=True)


def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    app: str = DEFAULT_APP,
    house_bots: bool | None = None,
    instances: int = 1,
) -> int:
    """Run until a gunicorn exits or we are told to stop; return the exit status.

    ``instances`` > 1 runs that many independent gunicorn processes (each with its own
    workers, sweeper and metrics) on consecutive ports ``port .. port + instances - 1``,
    all on one Redis (or cluster): the scaled deployment's N replicas on one machine, for
    a load balancer or for bots spread over them. If one exits, the others are stopped.

    Everything started here is stopped here, in a ``finally``, so a failed gunicorn
    start (bad port, import error) still stops the embedded server.
    """
    env = os.environ.copy()
    embedded: EmbeddedRedis | None = None
    gunicorns: list[subprocess.Popen[bytes]] = []
    house_proc: subprocess.Popen[bytes] | None = None
    stopping = False

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        if not gunicorns or all(g.poll() is not None for g in gunicorns):
            raise KeyboardInterrupt  # still starting up: unwind through the finally
        if stopping:  # a second signal: gunicorn's quick stop (the house was stopped first)
            for gunicorn in gunicorns:
                if gunicorn.poll() is None:
                    gunicorn.send_signal(signal.SIGINT)
        stopping = True  # the first: the main loop stops everything in order

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    ports = [port + i for i in range(instances)]
    try:
        # what would make the start fail, found before anything starts: one line each
        if instances < 1:
            raise StartupError("--instances must be 1 or more")
        for each in ports:
            check_port(host, each)
        short = raise_open_files(open_files_needed(env))
        if short:
            _log(short)
        if env.get("REDIS_URL"):
            check_redis(env["REDIS_URL"])
            _log(f"using REDIS_URL {_redacted(env['REDIS_URL'])}")
        else:
            embedded = EmbeddedRedis(check_data_dir(data_dir or default_data_dir()))
            try:
                env["REDIS_URL"] = embedded.start()
            except EmbeddedRedisError as exc:
                raise StartupError(f"{str(exc).splitlines()[0].rstrip(':')}; "
                                   "or pick another --data-dir, or set REDIS_URL") from None
            _log(
                f"embedded valkey-server at {embedded.url} "
                f"(data in {embedded.data_dir}, append-only)"
            )
        shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        for each in ports:
            command = gunicorn_command(host, each, workers, app)
            _log(f"starting {' '.join(command[1:])}")
            # own session: we order the shutdown (serve starts no threads)
            gunicorns.append(spawn_child(command, env=instance_env(env, each, instances)))
        if instances > 1:
            _log(f"{instances} instances on http://{shown}:{ports[0]}..{ports[-1]} "
                 "(one Redis; put a load balancer in front, or spread the bots)")
        _log(f"open http://{shown}:{port}/docs for the API page (Ctrl-C stops)")
        house_proc = _start_house_bots(env, shown, port, house_bots)
        status = _wait_any(gunicorns, lambda: stopping)
        if stopping:
            _log("stopping")
            stop_process(house_proc, _HOUSE_STOP_WAIT)  # first: its requests end now
            for gunicorn in gunicorns:
                if gunicorn.poll() is None:
                    gunicorn.send_signal(signal.SIGTERM)
            for gunicorn in gunicorns:
                gunicorn.wait()
            _log("stopped")
            return 0
        _log(f"gunicorn exited with status {status}")
        return status or 1
    except StartupError as exc:
        _log(str(exc))
        return 1
    except KeyboardInterrupt:
        _log("interrupted")
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop_process(house_proc, _HOUSE_STOP_WAIT)
        try:
            stop_processes(gunicorns, _STOP_WAIT)
        finally:
            if embedded is not None and embedded.process is not None:
                embedded.stop()
                _log("embedded valkey-server stopped")
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def instance_env(env: dict[str, str], port: int, instances: int) -> dict[str, str]:
    """One instance's environment. Each gunicorn empties ``$PROMETHEUS_MULTIPROC_DIR`` of
    .db files as it starts (``gunicorn_conf.on_starting``), so with several instances an
    operator's directory is split into one subdirectory per instance's port; each
    instance's ``/metrics`` then counts its own workers (scrape every instance)."""
    if instances == 1 or not env.get("PROMETHEUS_MULTIPROC_DIR"):
        return env
    return {**env, "PROMETHEUS_MULTIPROC_DIR":
            os.path.join(env["PROMETHEUS_MULTIPROC_DIR"], f"instance-{port}")}


def _wait_any(procs: list[subprocess.Popen[bytes]],
              stop: Callable[[], bool] = lambda: False) -> int | None:
    """Wait until one of procs exits (its status) or ``stop()`` is true (None). (A poll
    every 0.1 s: nothing waits on several children at once without threads, and serve
    starts none.)"""
    import time

    while not stop():
        for proc in procs:
            status = proc.poll()
            if status is not None:
                return status
        time.sleep(0.1)
    return None


def _start_house_bots(env: dict[str, str], host: str, port: int,
                      wanted: bool | None) -> subprocess.Popen[bytes] | None:
    """The house bots (``service.arena.accounts.house``): a process of their own playing over
    HTTP, as any bot would. Off with ``--no-house-bots`` or ``ARENA_HOUSE_BOTS=0``."""
    from service.arena.accounts.house import enabled

    if wanted is False or (wanted is None and not enabled(env)):
        _log("house bots off")
        return None
    server = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    _log("starting the house bots (random, heuristic, search)")
    return spawn_child([sys.executable, "-m", "service.arena.accounts.house", "--server", server],
                       env=env)


def _redacted(url: str) -> str:
    """The URL without its password, fit for a log line."""
    scheme, sep, rest = url.partition("://")
    creds, at, hostpart = rest.rpartition("@")
    if not sep or not at:
        return url
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{hostpart}"


class StartupError(Exception):
    """Why ``allfours serve`` cannot start, and how to fix it: printed as one line."""


def check_port(host: str, port: int) -> None:
    """Refuse a port gunicorn could not listen on (in use, not allowed, unknown host)
    now, rather than after the embedded server started and gunicorn retried."""
    where = f"{host}:{port}"
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise StartupError(f"cannot listen on {where}: {_reason(exc)}; give --host an "
                           "address of this machine (127.0.0.1, or 0.0.0.0 for all)") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn does
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise StartupError(f"port {port} on {host} is in use (another allfours serve?)"
                                   f"; stop that process or pick another --port") from None
            if exc.errno == errno.EACCES:
                raise StartupError(f"not allowed to listen on port {port}; pick a --port "
                                   "above 1023") from None
            raise StartupError(f"cannot listen on {where}: {_reason(exc)}; give --host an "
                               "address of this machine and a free --port") from None


def check_redis(url: str) -> None:
    """Refuse a ``REDIS_URL`` that is malformed or answers no PING (every request would
    be a 503)."""
    import redis

    shown = _redacted(url)
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
    except ValueError as exc:
        raise StartupError(f"REDIS_URL {shown} is not a Redis URL ({_reason(exc)}); "
                           "use redis://host:port/db, or unset REDIS_URL for the "
                           "embedded server") from None
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        raise StartupError(f"cannot reach Redis at REDIS_URL {shown} ({_reason(exc)}); "
                           "start that Redis or fix REDIS_URL, or unset it for the "
                           "embedded server") from None
    finally:
        client.close()


def check_data_dir(data_dir: str | os.PathLike[str]) -> Path:
    """The data directory, made if missing, once a file could be written in it."""
    path = Path(data_dir).resolve()
    fix = "pick another with --data-dir (or ARENA_DATA_DIR), or fix its permissions"
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise StartupError(f"cannot write the data directory {path} ({_reason(exc)}); "
                           f"{fix}") from None
    return path


def _reason(exc: BaseException) -> str:
    """An exception's own words, on one line, with no password in them."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:200]
