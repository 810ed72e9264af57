"""``allfours serve`` refuses to start on a bad ``REDIS_URL``, a busy port or a data
directory it cannot write, with one line that says what is wrong and how to fix it, a
non-zero exit and no traceback. Real subprocesses, as in ``test_serve.py``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from service.storage.embedded import free_port

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT = 60.0


def serve(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """Run ``allfours serve`` to its end (bounded); a healthy start would not end, so a
    timeout here means it started instead of refusing."""
    full_env = {**os.environ, **env}
    if "REDIS_URL" not in env:
        full_env.pop("REDIS_URL", None)
    command = [sys.executable, "-m", "service.cli.main", "serve", "--workers", "1", *args]
    return subprocess.run(command, env=full_env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=START_TIMEOUT)


def one_line(done: subprocess.CompletedProcess, *words: str) -> str:
    """The refusal: non-zero exit, nothing on stdout, exactly one line on stderr (no
    traceback, no gunicorn or valkey chatter), naming the problem and the fix."""
    assert done.returncode not in (0, None), done
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    line = lines[0]
    assert line.startswith("allfours serve: "), line
    assert "Traceback" not in line
    for word in words:
        assert word in line, (word, line)
    return line


@pytest.mark.parametrize("url, words", [
    ("redis://127.0.0.1:{port}/0", ("cannot reach Redis", "REDIS_URL")),
    ("http://127.0.0.1:{port}/0", ("REDIS_URL", "redis://")),
    ("redis://:secret@127.0.0.1:{port}/0", ("cannot reach Redis", "***")),
])
def test_a_bad_redis_url_is_one_line(tmp_path, url, words) -> None:
    closed = free_port()  # nothing listens there
    done = serve(tmp_path, "--port", str(free_port()), REDIS_URL=url.format(port=closed))
    line = one_line(done, *words)
    assert "secret" not in line


def test_a_busy_port_is_one_line(tmp_path) -> None:
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        done = serve(tmp_path, "--port", str(port), "--data-dir", str(tmp_path / "data"))
    one_line(done, f"port {port}", "in use", "--port")
    assert not (tmp_path / "data").exists()  # refused before anything was started


def test_an_unknown_host_is_one_line(tmp_path) -> None:
    done = serve(tmp_path, "--host", "no-such-host.invalid", "--port", str(free_port()),
                 "--data-dir", str(tmp_path / "data"))
    one_line(done, "no-such-host.invalid", "--host")


def test_a_data_dir_that_cannot_be_made_is_one_line(tmp_path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    done = serve(tmp_path, "--port", str(free_port()), "--data-dir", str(blocker / "data"))
    one_line(done, "data directory", str(blocker / "data"), "--data-dir")


def test_a_read_only_data_dir_is_one_line(tmp_path) -> None:
    """A data directory the service may not write. As root (CI) mode bits bind nobody, so
    the directory is made immutable instead (``chattr +i``: not even root may create a
    file in it)."""
    data = tmp_path / "read-only"
    data.mkdir()
    if os.geteuid() == 0:
        made = subprocess.run(["chattr", "+i", str(data)], capture_output=True)
        assert made.returncode == 0, made.stderr  # ext4/xfs/btrfs; tmp_path is on disk
        undo = ["chattr", "-i", str(data)]
    else:
        data.chmod(0o555)
        undo = ["chmod", "755", str(data)]
    try:
        done = serve(tmp_path, "--port", str(free_port()), "--data-dir", str(data))
    finally:
        subprocess.run(undo, check=True)
    one_line(done, "data directory", "--data-dir")


def test_a_data_dir_in_use_is_one_line(tmp_path) -> None:
    """A second server on the same files is refused (the lock), also in one line."""
    import fcntl

    data = tmp_path / "data"
    data.mkdir()
    fd = os.open(data / ".embedded.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        done = serve(tmp_path, "--port", str(free_port()), "--data-dir", str(data))
    finally:
        os.close(fd)
    one_line(done, "in use by another embedded server", "--data-dir")
