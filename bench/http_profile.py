"""Where an action's CPU goes in the service, by function and by layer.

    python bench/http_profile.py [--games 4] [--top 25] [--keys] [--stats FILE]

``bench/http_cost.py`` says how many instructions an action costs; this says where they
are spent. The same load (four seats playing ``--games`` whole 4-player games to 7, one
``POST /games/{id}/actions?wait=`` per move, over one gunicorn gevent worker and a Redis of
its own) runs with yappi in the worker (``bench/profile_conf.py``: per greenlet, on the CPU
clock; without yappi, a sampler of the running greenlet's stack on the CPU clock), started
after a warm-up game and stopped when the load ends.

Prints one JSON line: CPU microseconds per action in all (``cpu_us_per_action``; the
profiler's own overhead is in it, so compare layers and functions, not this figure with
``http_cost``), its split by layer (``layers``: own time of the functions in each package
— flask/werkzeug, marshmallow, redis-py, gevent/gunicorn, the service's HTTP layer, its
storage, its arena, the engine, the standard library...), the ``--top`` functions by own
time and by inclusive time (µs per action), and the inclusive time of the steps every
action takes (``steps``). ``--stats FILE`` keeps the pstats file for ``python -m pstats``
(and, from the sampler, the stacks in ``FILE.folded``).
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.http import HOST, Client, one_owners_bots, start_redis, stop  # noqa: E402
from bench.http_cost import gunicorn_worker, play_games  # noqa: E402
from service.cli.serve import gunicorn_command  # noqa: E402
from service.storage.embedded import free_port  # noqa: E402

# (layer, path fragment) in order: the first that a function's file contains names its layer
LAYERS = (
    ("engine", "/service/engine/"),
    ("http", "/service/http/"),
    ("storage", "/service/storage/"),
    ("arena", "/service/arena/"),
    ("service_other", "/service/"),
    ("flask", "/flask/"),
    ("werkzeug", "/werkzeug/"),
    ("marshmallow", "/marshmallow/"),
    ("redis_py", "/redis/"),
    ("gevent", "/gevent/"),
    ("gunicorn", "/gunicorn/"),
    ("prometheus", "/prometheus_client/"),
    ("stdlib_logging", "/logging/"),
    ("stdlib_json", "/json/"),
    ("stdlib", "/lib/python3"),
)
# the inclusive time of these (by file suffix and function name) is each action's steps
STEPS = (
    ("service/http/api.py", "inner"),
    ("service/http/api.py", "negotiate"),
    ("service/http/api.py", "authenticate"),
    ("service/http/limits.py", "bot_for_token"),
    ("service/http/limits.py", "count_request"),
    ("service/http/limits.py", "add_quota_fields"),
    ("service/http/connections.py", "admit"),
    ("service/http/api.py", "load"),
    ("service/http/api.py", "read_json"),
    ("service/http/games/routes.py", "act"),
    ("service/arena/games/commands.py", "act"),
    ("service/http/observe.py", "_after"),
    ("service/http/security_headers.py", "_headers"),
    ("flask/app.py", "full_dispatch_request"),
    ("flask/app.py", "wsgi_app"),
    ("gunicorn/workers/base_async.py", "handle_request"),
)


def layer_of(path: str) -> str:
    if path.startswith("~") or path == "":
        return "builtins"
    for name, fragment in LAYERS:
        if fragment in path:
            return name
    return "other"


def where(key: tuple[str, int, str]) -> str:
    path, line, name = key
    short = path.split("/site-packages/")[-1].split("/perf/")[-1]
    return f"{short}:{line}:{name}" if path not in ("~", "") else name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=4, help="4-player games to 7")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--keys", action="store_true",
                        help="every action carries an Idempotency-Key")
    parser.add_argument("--stats", default="", help="keep the pstats file here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="arena-profile-") as tmp:
        redis_proc, redis_port = start_redis(Path(tmp))
        port = free_port()
        out = Path(tmp) / "yappi"
        env = {**os.environ, "REDIS_URL": f"redis://{HOST}:{redis_port}/0",
               "PYTHONPATH": str(ROOT), "BENCH_PROFILE_OUT": str(out),
               "ARENA_KEY_PREFIX": f"prof{os.getpid()}:", "ARENA_RATE_LIMIT": str(10**9),
               "ARENA_LOG_LEVEL": "warning", "ARENA_SWEEPER": "0",
               "ARENA_ANALYSIS_WORKERS": "0"}
        command = gunicorn_command(HOST, port, 1)
        command[command.index("-c") + 1] = "python:bench.profile_conf"
        gunicorn = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if Client(port, timeout=10).get("/healthz")[0] == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline or gunicorn.poll() is not None:
                    raise RuntimeError("the service did not start")
                time.sleep(0.2)
            pid = gunicorn_worker(gunicorn.pid)
            setup = Client(port, timeout=60)
            bots = one_owners_bots(setup, 4, "prof")
            tokens, ids = [b["token"] for b in bots], [b["id"] for b in bots]
            play_games(port, tokens, ids, 1, args.keys)  # warm every code path up
            os.kill(pid, signal.SIGRTMIN)
            time.sleep(0.5)
            actions = play_games(port, tokens, ids, args.games, args.keys)
            saved = Path(f"{out}.{pid}")
            os.kill(pid, signal.SIGRTMIN + 1)
            deadline = time.monotonic() + 60
            while not saved.exists():
                if time.monotonic() > deadline:
                    raise RuntimeError("the worker saved no profile")
                time.sleep(0.2)
            if args.stats:
                shutil.copy(saved, args.stats)
                folded = Path(f"{saved}.folded")
                if folded.exists():
                    shutil.copy(folded, f"{args.stats}.folded")
            stats = pstats.Stats(str(saved))
        finally:
            stop(gunicorn, 30)
            stop(redis_proc)
    raw = stats.stats  # type: ignore[attr-defined]
    per = 1e6 / max(1, actions)
    total = sum(tt for _, _, tt, _, _ in raw.values())
    layers: dict[str, float] = {}
    for key, (_, _, tt, _, _) in raw.items():
        layers[layer_of(key[0])] = layers.get(layer_of(key[0]), 0.0) + tt
    own = sorted(raw.items(), key=lambda kv: -kv[1][2])[:args.top]
    inclusive = sorted(raw.items(), key=lambda kv: -kv[1][3])[:args.top]
    steps = {}
    for suffix, name in STEPS:
        for key, (_, nc, _, ct, _) in raw.items():
            if key[0].endswith(suffix) and key[2] == name:
                steps[f"{suffix}:{name}"] = {"us": round(ct * per, 1),
                                             "calls_per_action": round(nc / actions, 2)}
    print(json.dumps({
        "bench": "http_profile", "games": args.games, "actions": actions, "keys": args.keys,
        "cpu_us_per_action": round(total * per, 1),
        "layers": {k: round(v * per, 1) for k, v in sorted(layers.items(),
                                                            key=lambda kv: -kv[1])},
        "steps": steps,
        "top_own": [[where(k), round(v[2] * per, 1), round(v[1] / actions, 2)]
                    for k, v in own],
        "top_inclusive": [[where(k), round(v[3] * per, 1)] for k, v in inclusive],
    }))


if __name__ == "__main__":
    main()
