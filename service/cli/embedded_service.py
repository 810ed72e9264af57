"""A service of our own for a command that needs one (``allfours tournament``, ``allfours
check-bot``): an embedded ``valkey-server`` and gunicorn, started as ``allfours serve``
starts them, on a free port, and stopped in its order (gunicorn, then valkey) with a
bounded wait and SIGKILL as the last resort.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from service.cli.serve import _STOP_WAIT, gunicorn_command
from service.cli.tournament_setup import TournamentCliError
from service.storage.embedded import (
    EmbeddedRedis,
    free_port,
    log_tail,
    spawn_child,
    stop_process,
    wait_started,
)

READY_TIMEOUT = 60.0


class EmbeddedService:
    """``allfours serve`` without blocking: embedded valkey + gunicorn on a free port.

    ``start`` returns the base URL once ``/readyz`` answers 200; ``stop`` (idempotent)
    stops gunicorn, then valkey, then removes a temporary data directory.
    """

    def __init__(
        self,
        admin_token: str,
        data_dir: str | os.PathLike[str] | None = None,
        port: int | None = None,
        workers: int = 2,
        host: str = "127.0.0.1",
    ) -> None:
        self.admin_token = admin_token
        self.host = host
        self.port = port
        self.workers = workers
        self._temp = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="allfours-tournament-"))
        self.redis: EmbeddedRedis | None = None
        self.gunicorn: subprocess.Popen[bytes] | None = None
        self.log_path = self.data_dir / "gunicorn.log"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> str:
        try:
            self.redis = EmbeddedRedis(self.data_dir / "redis" if self._temp else self.data_dir)
            env = os.environ.copy()
            env.update({
                "REDIS_URL": self.redis.start(),
                "ARENA_ADMIN_TOKEN": self.admin_token,
                "ARENA_LOG_LEVEL": env.get("ARENA_LOG_LEVEL", "warning"),
                # each entrant is an owner of its own (one owner's bots are never rated
                # against each other), all registered from this machine: no per-network
                # cap on them
                "ARENA_OWNERS_PER_NETWORK": env.get("ARENA_OWNERS_PER_NETWORK", "0"),
                # the organizer's own entrants, made a moment ago: established at once,
                # or the leaderboard would weigh their games at nothing (docs/ratings.md)
                "ARENA_ESTABLISHED_AGE": env.get("ARENA_ESTABLISHED_AGE", "0"),
            })
            fixed = self.port
            for _attempt in range(3):
                self.port = fixed or free_port(self.host)
                self._spawn(env)
                if self._wait_ready():
                    return self.url
                if fixed:
                    break  # the port was asked for: do not quietly pick another
            raise TournamentCliError(
                f"the service did not start on {self.url}; last lines of {self.log_path}:\n"
                + self.log_tail()
            )
        except BaseException:
            self.stop()
            raise

    def _spawn(self, env: dict[str, str]) -> None:
        self._stop_gunicorn()
        command = gunicorn_command(self.host, self.port or 0, self.workers)
        with self.log_path.open("ab") as log:
            # started before any thread of ours (spawn_child)
            self.gunicorn = spawn_child(command, env=env, stdin=subprocess.DEVNULL,
                                        stdout=log, stderr=log)

    def _wait_ready(self) -> bool:
        """True once ``/readyz`` answers 200; False if gunicorn exits first or
        ``READY_TIMEOUT`` passes."""
        assert self.gunicorn is not None
        return wait_started(self.gunicorn, self._ready, READY_TIMEOUT, interval=0.1)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/readyz", timeout=2) as resp:
                return resp.status == 200
        except (OSError, urllib.error.HTTPError):
            return False

    def alive(self) -> bool:
        return self.gunicorn is not None and self.gunicorn.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        return log_tail(self.log_path, lines)

    def _stop_gunicorn(self) -> None:
        proc, self.gunicorn = self.gunicorn, None
        stop_process(proc, _STOP_WAIT)  # SIGTERM, graceful: workers finish their requests

    def stop(self) -> None:
        try:
            self._stop_gunicorn()  # first, so no worker sees Redis vanish mid-request
        finally:
            if self.redis is not None:
                self.redis.stop()
                self.redis = None
            if self._temp:
                shutil.rmtree(self.data_dir, ignore_errors=True)
