"""``allfours serve``, the Dockerfile and docker-compose.yml, run as real processes.

Why real processes: what matters here is process lifecycle — an embedded valkey-server
that starts, keeps its data across restarts and never outlives its supervisor; gunicorn
stopped before Redis. Every wait is bounded and every process is stopped in a finalizer.
No Docker engine runs in CI, so the container tests run the Dockerfile's and compose
file's own commands (parsed from the files) as plain processes.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

from service.storage.embedded import find_server_binary, free_port, ping

# each test starts what it needs (no module-wide service): pytest-xdist may run them on
# different workers (tests/conftest.py)
SPREAD_OVER_WORKERS = True
EXPECTED_S = 75  # seconds, the whole module: the order workers take it in (tests/conftest.py)

ROOT = Path(__file__).resolve().parent.parent
APP = "service.http.wsgi:app"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


# --- small helpers ---------------------------------------------------------------------


def resp(port: int, *args: str, host: str = "127.0.0.1") -> object:
    """Send one command in RESP and return the decoded reply (enough for SET/GET/INFO)."""
    payload = f"*{len(args)}\r\n".encode()
    for arg in args:
        data = arg.encode()
        payload += b"$%d\r\n%s\r\n" % (len(data), data)
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(payload)
        return _reply(sock.makefile("rb"))


def _reply(reader: BinaryIO) -> object:
    line = reader.readline().rstrip(b"\r\n")
    kind, rest = line[:1], line[1:]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RuntimeError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        size = int(rest)
        return None if size < 0 else reader.read(size + 2)[:-2].decode()
    if kind == b"*":
        return [_reply(reader) for _ in range(int(rest))]
    raise AssertionError(f"unexpected reply {line!r}")


def http_status(url: str, timeout: float = 3.0) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of a live process, or None if it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, ppid = stat.rsplit(")", 1)[1].split()[:2]
    return None if state in "ZX" else (state, int(ppid))


def alive(pid: int) -> bool:
    return _proc_stat(pid) is not None


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def descendants(pid: int) -> dict[int, str]:
    """Live descendants of pid (from /proc), mapped to their command lines.

    A process that is exiting (a zombie) has an empty command line: it is left out, so a
    watcher that keeps the latest line of each pid never replaces a real line with ''
    (under load a scan often lands on the moment a child exits)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _proc_stat(int(entry.name))
            if stat:
                children.setdefault(stat[1], []).append(int(entry.name))
    found: dict[int, str] = {}
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            line = cmdline(child)
            if line:
                found[child] = line
            todo.append(child)
    return found


def stop_process(proc: subprocess.Popen, sig: int = signal.SIGINT) -> int:
    """Signal proc and wait (bounded); SIGKILL as a last resort so a test never hangs."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def kill_leftovers(pids: dict[int, str]) -> None:
    """Finalizer: if a test failed half-way, leave nothing running."""
    for pid, line in pids.items():
        if alive(pid) and cmdline(pid) == line:
            os.kill(pid, signal.SIGKILL)


# --- fixtures ----------------------------------------------------------------------------


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[int]:
    """A private throwaway Redis on a free port (never the shared 6379)."""
    port = free_port()
    workdir = tmp_path / "own-redis"
    workdir.mkdir()
    proc = subprocess.Popen(
        [find_server_binary(), "--bind", "127.0.0.1", "--port", str(port), "--save", "",
         "--appendonly", "no", "--dir", str(workdir), "--maxclients", "10000"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(lambda: ping("127.0.0.1", port), 20, "the test's own Redis")
        yield port
    finally:
        stop_process(proc, signal.SIGTERM)


class Serve:
    """One ``allfours serve`` process, its stderr captured to a file: the one way the tests
    start the command and wait for it (``tests/test_operations.py``'s ``Service`` and the
    tournament CLI's services build on it).

    ``data_dir`` None: no ``--data-dir`` (a service on ``REDIS_URL`` has no use for one).
    Without ``REDIS_URL`` in ``env`` the process gets none, so it starts its embedded Redis.
    """

    def __init__(self, tmp_path: Path, data_dir: Path | None, workers: int = 1,
                 **env: str) -> None:
        self.port = free_port()
        self.log = tmp_path / f"serve-{uuid.uuid4().hex[:8]}.log"
        full_env = {**os.environ, **env}
        if "REDIS_URL" not in env:
            full_env.pop("REDIS_URL", None)
        command = [
            sys.executable, "-m", "service.cli.main", "serve",
            "--port", str(self.port), "--workers", str(workers),
            *(["--data-dir", str(data_dir)] if data_dir is not None else []),
        ]  # fmt: skip
        with self.log.open("wb") as log:
            # Own session: a signal sent to it reaches serve alone, like a terminal's
            # Ctrl-C reaching the foreground command.
            self.proc = subprocess.Popen(
                command, env=full_env, stderr=log, stdout=log, cwd=tmp_path,
                start_new_session=True,
            )  # fmt: skip
        self.seen: dict[int, str] = {}

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def wait_healthy(self, path: str = "/healthz") -> None:
        """Until ``path`` answers 200 (``/readyz``: and its Redis answers too); then
        ``seen`` holds the process's children, for ``kill_leftovers``."""

        def up() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"serve exited early:\n{self.output()}")
            return http_status(self.url(path), 1) == 200

        wait_for(up, START_TIMEOUT, f"{path}; serve said:\n{self.output()}")
        self.seen = descendants(self.proc.pid)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def embedded_port(self) -> int:
        match = re.search(r"embedded valkey-server at redis://127\.0\.0\.1:(\d+)/", self.output())
        assert match, self.output()
        return int(match.group(1))

    def stop(self, sig: int = signal.SIGINT) -> int:
        return stop_process(self.proc, sig)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator:
    """A factory of ``Serve`` processes, all stopped (and their children killed) at teardown."""
    started: list[Serve] = []

    def start(data_dir: Path | None = None, **env: str) -> Serve:
        process = Serve(tmp_path, data_dir or tmp_path / "data", **env)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()
        kill_leftovers(process.seen)


# --- allfours serve ----------------------------------------------------------------------


def test_serve_without_redis_url_starts_embedded_server_and_gunicorn(serve) -> None:
    service = serve()
    service.wait_healthy()
    assert http_status(service.url("/healthz")) == 200
    assert http_status(service.url("/readyz")) == 200
    port = service.embedded_port()
    assert resp(port, "PING") == "PONG"
    assert resp(port, "CONFIG", "GET", "appendonly") == ["appendonly", "yes"]
    commands = " | ".join(service.seen.values())
    assert "valkey-server" in commands and "gunicorn" in commands, commands
    assert "gevent" in service.output()  # "Using worker: service.http.gevent_worker.GeventWorker"


def test_games_survive_a_restart_with_the_same_data_dir(serve, tmp_path: Path) -> None:
    data_dir = tmp_path / "keep"
    key = f"arena-test:{uuid.uuid4().hex}:game"
    first = serve(data_dir)
    first.wait_healthy()
    assert resp(first.embedded_port(), "SET", key, '{"version": 7}') == "OK"
    assert first.stop() == 0
    assert (data_dir / "appendonlydir").is_dir()

    second = serve(data_dir)
    second.wait_healthy()
    assert http_status(second.url("/readyz")) == 200
    assert resp(second.embedded_port(), "GET", key) == '{"version": 7}'


def test_ctrl_c_leaves_no_server_or_gunicorn_behind(serve) -> None:
    service = serve()
    service.wait_healthy()
    children = dict(service.seen)
    assert any("valkey-server" in c for c in children.values()), children
    assert sum("gunicorn" in c for c in children.values()) >= 2, children  # master + worker
    port = service.embedded_port()

    # A terminal's Ctrl-C signals the whole foreground process group, not one process.
    os.killpg(service.proc.pid, signal.SIGINT)
    assert service.proc.wait(STOP_TIMEOUT) == 0
    wait_for(lambda: not any(alive(pid) for pid in children), 10, "children to exit")
    assert not ping("127.0.0.1", port)
    assert "embedded valkey-server stopped" in service.output()


def test_even_a_killed_serve_leaves_nothing_behind(serve) -> None:
    """SIGKILL gives serve no chance to clean up; the kernel's parent-death signal does."""
    service = serve()
    service.wait_healthy()
    children = dict(service.seen)
    service.proc.kill()
    service.proc.wait()
    wait_for(lambda: not any(alive(pid) for pid in children), 20, "orphans to exit")


def test_sigterm_stops_cleanly_too(serve) -> None:
    service = serve()
    service.wait_healthy()
    children = dict(service.seen)
    assert service.stop(signal.SIGTERM) == 0
    wait_for(lambda: not any(alive(pid) for pid in children), 10, "children to exit")


def test_with_redis_url_uses_it_and_starts_no_embedded_server(
    serve, own_redis: int, tmp_path: Path
) -> None:
    before = int(re.search(r"total_connections_received:(\d+)",
                           str(resp(own_redis, "INFO", "stats"))).group(1))  # fmt: skip
    service = serve(REDIS_URL=f"redis://127.0.0.1:{own_redis}/0")
    service.wait_healthy()
    assert http_status(service.url("/readyz")) == 200
    after = int(re.search(r"total_connections_received:(\d+)",
                          str(resp(own_redis, "INFO", "stats"))).group(1))  # fmt: skip
    assert after > before + 1  # the service connected to the Redis we gave it
    assert not any("valkey-server" in c for c in service.seen.values()), service.seen
    assert "embedded" not in service.output()
    assert not (tmp_path / "data").exists()


def test_failed_gunicorn_start_still_stops_the_embedded_server(serve) -> None:
    # (a busy port is refused before anything starts: tests/test_serve_startup.py) a
    # worker class gunicorn cannot load fails it after the embedded server started
    service = serve(GUNICORN_CMD_ARGS="--worker-class no_such_module.NoWorker")
    service.proc.wait(START_TIMEOUT)
    assert service.proc.returncode != 0
    port = service.embedded_port()
    assert not ping("127.0.0.1", port)
    assert not any(f"127.0.0.1:{port}" in cmdline(int(p.name))
                   for p in Path("/proc").iterdir() if p.name.isdigit())  # fmt: skip


def test_a_second_serve_on_the_same_data_dir_is_refused(serve, tmp_path: Path) -> None:
    first = serve(tmp_path / "shared")
    first.wait_healthy()
    second = serve(tmp_path / "shared")
    assert second.proc.wait(START_TIMEOUT) != 0
    assert "in use by another embedded server" in second.output()
    assert http_status(first.url("/readyz")) == 200


# --- Dockerfile and docker-compose.yml, run without Docker -------------------------------


def dockerfile() -> dict[str, list[str]]:
    """Instructions of the Dockerfile: name -> list of raw arguments (continuations joined)."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, rest = line.partition(" ")
            found.setdefault(name.upper(), []).append(rest.strip())
    return found


def exec_form(raw: str) -> list[str]:
    """A Dockerfile exec-form argument list (``["a", "b"]``); shell form would be a smell."""
    assert raw.startswith("["), f"use the exec form, got {raw!r}"
    return json.loads(raw)


def docker_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for raw in dockerfile().get("ENV", []):
        for item in shlex.split(raw):
            name, _, value = item.partition("=")
            env[name] = value
    return env


def test_dockerfile_shape() -> None:
    spec = dockerfile()
    # Two stages: the wheels are built where a C compiler is (the engine compiles with
    # mypyc), and the image that runs is a plain slim Python.
    assert re.fullmatch(r"python:3\.11-slim AS build", spec["FROM"][0]), spec["FROM"]
    assert re.fullmatch(r"python:3\.11-slim\S*", spec["FROM"][-1]), spec["FROM"]
    assert any("gcc" in run for run in spec["RUN"])
    assert spec["EXPOSE"] == ["8000"]
    assert spec["USER"] and spec["USER"][-1] not in ("root", "0")
    assert any("pip install" in run for run in spec["RUN"])
    # the build stage makes the wheels from the sources (`COPY . /src`); that the engine
    # comes out compiled is checked in the built image (tests/test_container.py)
    build = next(run for run in spec["RUN"] if "pip wheel" in run)
    assert shlex.split(build)[:2] == ["pip", "wheel"] and shlex.split(build)[-1] == "/src"
    cmd = exec_form(spec["CMD"][0])
    assert cmd[:3] == ["gunicorn", "-c", "python:service.http.gunicorn_conf"] and cmd[-1] == APP
    # `allfours serve` runs gunicorn with the same config module and app.
    from service.cli.serve import GUNICORN_CONFIG, gunicorn_command

    assert cmd[2] == GUNICORN_CONFIG and gunicorn_command("h", 1, 1)[-1] == APP
    # `--workers N` only when asked: otherwise the config's $WEB_CONCURRENCY (the
    # Dockerfile's knob) decides, for `allfours serve` as for the image.
    assert gunicorn_command("h", 1, 3)[-3:-1] == ["--workers", "3"]
    assert "--workers" not in gunicorn_command("h", 1)
    assert "REDIS_URL" not in docker_env()  # it comes from the environment at run time


def _as_local_command(argv: list[str]) -> list[str]:
    """Run an image's ``gunicorn``/``python`` with this interpreter's installation."""
    if argv[0] == "gunicorn":
        return [sys.executable, "-m", "gunicorn", *argv[1:]]
    if argv[0] == "python":
        return [sys.executable, *argv[1:]]
    return argv


def test_dockerfile_cmd_and_healthcheck_run_against_a_real_redis(
    own_redis: int, tmp_path: Path
) -> None:
    spec = dockerfile()
    cmd = _as_local_command(exec_form(spec["CMD"][0]))
    health = spec["HEALTHCHECK"][0]
    health_cmd = _as_local_command(exec_form(health[health.index("CMD") + 3 :].strip()))
    port = free_port()
    env = {
        **os.environ,
        **docker_env(),
        "PORT": str(port),  # like `docker run -e PORT=...`: the test must not take 8000
        "REDIS_URL": f"redis://127.0.0.1:{own_redis}/0",
    }
    log = (tmp_path / "gunicorn.log").open("wb")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=log)
    try:
        wait_for(
            lambda: (
                subprocess.run(health_cmd, env=env, capture_output=True).returncode == 0
                or proc.poll() is not None
            ),
            START_TIMEOUT,
            "the HEALTHCHECK to pass",
        )
        assert proc.poll() is None, (tmp_path / "gunicorn.log").read_text()
        assert http_status(f"http://127.0.0.1:{port}/readyz") == 200
        # Our gevent worker (one send per response), a subclass of gunicorn's.
        from gunicorn.workers.ggevent import GeventWorker

        from service.http import gunicorn_conf
        from service.http.gevent_worker import GeventWorker as Ours

        assert issubclass(Ours, GeventWorker)
        used = f"Using worker: {gunicorn_conf.worker_class}"
        assert used in (tmp_path / "gunicorn.log").read_text()
    finally:
        children = descendants(proc.pid)
        stop_process(proc, signal.SIGTERM)
        kill_leftovers(children)  # a worker outliving a master killed on a slow stop
        log.close()
    # With nothing listening, the healthcheck must fail (it is not a no-op).
    assert subprocess.run(health_cmd, env=env, capture_output=True).returncode != 0


def test_compose_redis_is_append_only_on_a_volume_and_its_command_runs(tmp_path: Path) -> None:
    import yaml
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    arena, redis = compose["services"]["arena"], compose["services"]["redis"]
    assert redis["image"].startswith("redis:7")
    command = redis["command"]
    assert command[0] == "redis-server" and command[1:] == ["--appendonly", "yes"]
    volume, _, mount = redis["volumes"][0].partition(":")
    assert mount == "/data" and volume in compose["volumes"]
    assert "REDIS_URL=redis://redis:6379/0" in arena["environment"]
    assert "redis" in arena["depends_on"] and "command" not in arena  # the Dockerfile's CMD
    assert arena["ports"] == ["8000:8000"]

    # The redis service's command, run locally: it writes an append-only file in its dir.
    binary = shutil.which("redis-server") or find_server_binary()
    port = free_port()
    proc = subprocess.Popen(
        [binary, *command[1:], "--port", str(port), "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: ping("127.0.0.1", port), 20, "the compose Redis command")
        assert resp(port, "SET", "arena-test:compose", "1") == "OK"
    finally:
        stop_process(proc, signal.SIGTERM)
    assert (tmp_path / "appendonlydir").is_dir()


def test_worker_count_comes_from_web_concurrency_unless_given(monkeypatch) -> None:
    """WEB_CONCURRENCY sets the worker count for the image and for `allfours serve`
    alike (the serve command passes --workers only when asked to)."""
    import importlib

    from service.http import gunicorn_conf

    monkeypatch.setenv("WEB_CONCURRENCY", "3")
    assert importlib.reload(gunicorn_conf).workers == 3
    monkeypatch.delenv("WEB_CONCURRENCY")
    assert importlib.reload(gunicorn_conf).workers == 2


# --- house bots ---------------------------------------------------------------


def _post_json(url: str, body: dict, timeout: float = 5.0) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_serve_runs_the_house_bots_and_a_person_gets_a_game_against_them(serve) -> None:
    service = serve()
    service.wait_healthy()
    answers: list[tuple[int, dict]] = []

    def seated() -> bool:
        answers.append(_post_json(service.url("/house/games"),
                                  {"players": 4, "opponent": "random", "partner": "random"}))
        return answers[-1][0] == 201

    wait_for(seated, START_TIMEOUT, f"a house game; answers: {answers[-3:]}")
    made = answers[-1][1]
    assert made["player"]["token"] and made["seat"] == 0
    game = made["game"]
    assert [s["bot_name"] for s in game["seats"]][1:] == [
        "house-random", "house-random-partner", "house-random"]
    assert game["move_limit"] and game["status"] == "active"
    processes = descendants(service.proc.pid)
    assert any("service.arena.accounts.house" in c for c in processes.values()), processes
    # the house plays at a lower CPU priority than the web workers (ARENA_HOUSE_NICE)
    house_pid = next(p for p, c in processes.items() if "service.arena.accounts.house" in c)
    web_pid = next(p for p, c in processes.items() if "gunicorn" in c)
    assert os.getpriority(os.PRIO_PROCESS, house_pid) >= \
        os.getpriority(os.PRIO_PROCESS, web_pid) + 10

    # The house bots play their seats: the game moves on without the person until seat 0
    # is to act (the dealer's left begs or stands first, so at least one house move when
    # seat 0 is not the first to decide).
    def view() -> dict:
        with urllib.request.urlopen(service.url(f"/games/{game['id']}"), timeout=5) as r:
            return json.loads(r.read())

    wait_for(lambda: view()["turn"] == 0, 30, "the house bots to play up to seat 0's turn")
    children = dict(processes)
    assert service.stop(signal.SIGTERM) == 0
    wait_for(lambda: not any(alive(pid) for pid in children), 20, "children to exit")


def test_house_bots_can_be_switched_off(serve) -> None:
    service = serve(ARENA_HOUSE_BOTS="0")
    service.wait_healthy()
    assert "house bots off" in service.output()
    status, problem = _post_json(service.url("/house/games"), {"players": 2})
    assert status == 503 and problem["type"] == "/problems/service-unavailable", problem
    children = descendants(service.proc.pid).values()
    assert not any("service.arena.accounts.house" in c for c in children)
    from service.cli.main import build_parser

    assert build_parser().parse_args(["serve", "--no-house-bots"]).no_house_bots is True
