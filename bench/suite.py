"""The test suite's own time (issue 26): the README's test command, with or without other
work on the machine, timed and summed by module.

Runs ``python3 -m pytest -q --durations=0`` (plus any pytest arguments given after
``--``) while ``--load N`` busy-loop processes keep N cores busy, and prints one JSON
line: the wall seconds, the CPU seconds the suite and everything it started used (children
waited for: gunicorn, bots, browsers), the pytest summary, the load, and per module the
summed seconds of its tests (setup, call and teardown, whichever worker ran them) with
the ``EXPECTED_S`` it states. tests/conftest.py hands the modules to the workers longest
first by that figure, so a module whose measured time is far from it is listed under
``restate`` with the figure to write.

Why the CPU seconds matter: with other work taking cores, the CPU the suite needs
divided by the cores left bounds the wall time from below, however many workers run.

    python bench/suite.py [--load 1] [-- -n 4 tests/engine]
"""

from __future__ import annotations

import argparse
import ast
import json
import multiprocessing
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DURATION = re.compile(r"^\s*([\d.]+)s (setup|call|teardown)\s+(\S+)")
SUMMARY = re.compile(r"^=*\s*(.*\b(passed|failed|error)\b.* in [\d.]+s.*?)\s*=*$")


def busy() -> None:
    while True:
        pass


def stated(module: Path) -> float | None:
    """The ``EXPECTED_S = N`` a test module states, read without importing it."""
    try:
        tree = ast.parse(module.read_text())
    except (OSError, SyntaxError):
        return None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "EXPECTED_S"
                and isinstance(node.value, ast.Constant)):
            return float(node.value.value)
    return None


def by_module(output: str) -> dict[str, float]:
    seconds: dict[str, float] = {}
    for line in output.splitlines():
        m = DURATION.match(line)
        if m:
            module = m.group(3).split("::", 1)[0]
            seconds[module] = seconds.get(module, 0.0) + float(m.group(1))
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--load", type=int, default=0, help="busy-loop processes beside the suite")
    ap.add_argument("--top", type=int, default=25, help="modules listed, longest first")
    ap.add_argument("--log", type=Path, help="write pytest's whole output here")
    ap.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments")
    args = ap.parse_args()
    loads = [multiprocessing.Process(target=busy, daemon=True) for _ in range(args.load)]
    for p in loads:
        p.start()
    cpu_dir = Path(tempfile.mkdtemp(prefix="suite-cpu-"))
    env = {**os.environ, "SUITE_CPU_DIR": str(cpu_dir),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "bench" / "pytest_plugins"),
                                                       os.environ.get("PYTHONPATH")]))}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "--durations=0", "-p", "no:cacheprovider",
             "-p", "cpu_by_module", *args.pytest_args], cwd=ROOT, env=env,
            capture_output=True, text=True, check=False)
    finally:
        for p in loads:
            p.terminate()
    wall = time.monotonic() - began
    if args.log:
        args.log.write_text(done.stdout + done.stderr)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    summary = next((m.group(1) for line in reversed(done.stdout.splitlines())
                    if (m := SUMMARY.match(line))), None)
    seconds = by_module(done.stdout)
    cpu: dict[str, float] = {}
    for worker in cpu_dir.glob("*.json"):
        for module, c in json.loads(worker.read_text())["modules"].items():
            cpu[module] = cpu.get(module, 0.0) + c
    modules = []
    restate = {}
    for module, s in sorted(seconds.items(), key=lambda kv: -kv[1]):
        expected = stated(ROOT / module)
        if len(modules) < args.top:
            modules.append({"module": module, "seconds": round(s, 1), "expected_s": expected,
                            "cpu_s": round(cpu.get(module, 0.0), 1)})
        if s >= 25 and (expected is None or not 0.5 <= s / expected <= 2):
            restate[module] = int(round(s / 5) * 5)
    print(json.dumps({
        "bench": "suite",
        "exit_status": done.returncode,
        "summary": summary,
        "load_processes": args.load,
        "wall_s": round(wall, 1),
        "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 1),
        "test_seconds_summed": round(sum(seconds.values()), 1),
        "test_cpu_s_summed": round(sum(cpu.values()), 1),
        "by_cpu": [{"module": m, "cpu_s": round(c, 1)}
                   for m, c in sorted(cpu.items(), key=lambda kv: -kv[1])[:args.top]],
        "modules": modules,
        "restate": restate,
    }))
    if done.returncode not in (0,):
        sys.stderr.write(done.stdout[-4000:])


if __name__ == "__main__":
    main()
