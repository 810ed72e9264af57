"""``allfours serve``: the service under gunicorn, with an embedded Redis when none is given.

Why gunicorn runs as a subprocess (``python -m gunicorn -c python:service.gunicorn_conf``)
rather than through its Python API: the API turns this process into the gunicorn arbiter,
which installs its own signal handlers and leaves by ``sys.exit`` — there would be no
place left to stop the embedded server afterwards. As a subprocess, gunicorn runs exactly
as the Dockerfile runs it (same command, same config), and this process stays a small
supervisor: start Redis, start gunicorn, wait, and on Ctrl-C or SIGTERM stop gunicorn
first (so no worker sees Redis vanish mid-request) and then Redis.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType

from .embedded_redis import EmbeddedRedis, die_with_parent

DEFAULT_APP = "service.wsgi:app"
GUNICORN_CONFIG = "python:service.gunicorn_conf"
# gunicorn's own graceful_timeout is 5 s; allow that plus start-up slack before SIGKILL.
_STOP_WAIT = 15.0


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


def _log(message: str) -> None:
    print(f"allfours serve: {message}", file=sys.stderr, flush=True)


def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    app: str = DEFAULT_APP,
    house_bots: bool | None = None,
) -> int:
    """Run until gunicorn exits or we are told to stop; return the exit status.

    Everything started here is stopped here, in a ``finally``, so a failed gunicorn
    start (bad port, import error) still stops the embedded server.
    """
    env = os.environ.copy()
    embedded: EmbeddedRedis | None = None
    gunicorn: subprocess.Popen[bytes] | None = None
    house_proc: subprocess.Popen[bytes] | None = None
    stopping = False

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        if gunicorn is None or gunicorn.poll() is not None:
            raise KeyboardInterrupt  # still starting up: unwind through the finally
        # First signal: graceful stop (SIGTERM). A second one: gunicorn's quick stop.
        gunicorn.send_signal(signal.SIGINT if stopping else signal.SIGTERM)
        stopping = True

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        if env.get("REDIS_URL"):
            _log(f"using REDIS_URL {_redacted(env['REDIS_URL'])}")
        else:
            embedded = EmbeddedRedis(data_dir or default_data_dir())
            env["REDIS_URL"] = embedded.start()
            _log(
                f"embedded valkey-server at {embedded.url} "
                f"(data in {embedded.data_dir}, append-only)"
            )
        command = gunicorn_command(host, port, workers, app)
        shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        _log(f"starting {' '.join(command[1:])}")
        _log(f"open http://{shown}:{port}/docs for the API page (Ctrl-C stops)")
        gunicorn = subprocess.Popen(
            command,
            env=env,
            # Own session so a terminal Ctrl-C reaches only us and we order the shutdown;
            # the kernel still SIGTERMs gunicorn if we die without cleaning up.
            start_new_session=True,
            preexec_fn=die_with_parent,  # safe: serve starts no threads
        )
        house_proc = _start_house_bots(env, shown, port, house_bots)
        status = gunicorn.wait()
        if stopping:
            _log("stopped")
            return 0
        _log(f"gunicorn exited with status {status}")
        return status or 1
    except KeyboardInterrupt:
        _log("interrupted")
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _stop_house_bots(house_proc)
        try:
            if gunicorn is not None and gunicorn.poll() is None:
                gunicorn.terminate()
                try:
                    gunicorn.wait(_STOP_WAIT)
                except subprocess.TimeoutExpired:
                    gunicorn.kill()
                    gunicorn.wait()
        finally:
            if embedded is not None:
                embedded.stop()
                _log("embedded valkey-server stopped")
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def _start_house_bots(env: dict[str, str], host: str, port: int,
                      wanted: bool | None) -> subprocess.Popen[bytes] | None:
    """The house bots (``service.house``): a process of their own playing over HTTP, as
    any bot would. Off with ``--no-house-bots`` or ``ARENA_HOUSE_BOTS=0``."""
    from .house import enabled

    if wanted is False or (wanted is None and not enabled(env)):
        _log("house bots off")
        return None
    server = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    _log("starting the house bots (random, heuristic, search)")
    return subprocess.Popen(
        [sys.executable, "-m", "service.house", "--server", server],
        env=env, start_new_session=True, preexec_fn=die_with_parent,
    )


def _stop_house_bots(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(_STOP_WAIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _redacted(url: str) -> str:
    """The URL without its password, fit for a log line."""
    scheme, sep, rest = url.partition("://")
    creds, at, hostpart = rest.rpartition("@")
    if not sep or not at:
        return url
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{hostpart}"
