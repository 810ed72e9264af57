"""A bot that is a command (any language): started with ``ARENA_URL`` and ``ARENA_TOKEN``
in its environment, its output to a log file, in a session of its own so that stopping it
stops whatever it started (a ``java`` under a shell, a ``node`` under ``npm``). What
``check-bot`` and ``allfours tournament --bot-cmd`` both run a bot with."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

STOP_WAIT_S = 5.0  # after SIGTERM, before SIGKILL


def start_bot(command: list[str] | str, url: str, token: str, log_path: Path,
              extra_env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``command`` (a string runs through the shell) as a bot of ``url`` with
    ``token``; its stdout and stderr appended to ``log_path``."""
    return start_command(command, {**(extra_env or {}), "ARENA_URL": url,
                                   "ARENA_TOKEN": token}, log_path)


def start_command(command: list[str] | str, env: dict[str, str], log_path: Path
                  ) -> subprocess.Popen[bytes]:
    """Start ``command`` with ``env`` over this process's environment, in a session of its
    own, its output appended to ``log_path``."""
    with log_path.open("ab") as log:
        return subprocess.Popen(command, shell=isinstance(command, str),
                                env={**os.environ, **env}, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, start_new_session=True)


def stop_bot(proc: subprocess.Popen[bytes] | None, wait_s: float = STOP_WAIT_S) -> None:
    """SIGTERM the bot's whole session, then SIGKILL after ``wait_s``; reaped."""
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
