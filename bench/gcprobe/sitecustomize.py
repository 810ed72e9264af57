"""Garbage-collector pauses of the service's processes, for the benchmarks' ``--gc-pauses``.

On ``PYTHONPATH`` only when a benchmark asks (``bench.harness.gc_probe``): with
``BENCH_GC_LOG`` set to a directory, every Python process started with it appends one line
per collection to ``<dir>/<pid>.gc``: wall time at the start, generation, wall and CPU
milliseconds the collection took. A gevent worker runs nothing else meanwhile, so a
collection's wall time is a stall of every request the worker holds; its CPU time is what
the collection itself cost (the rest of the wall time, a busy box's preemption).
"""

from __future__ import annotations

import atexit
import gc
import os
import time

_DIR = os.environ.get("BENCH_GC_LOG")

if _DIR:
    _started = [0.0, 0.0, 0.0]
    _files: dict[int, object] = {}  # pid -> its log (a forked worker opens its own)

    def _log() -> object:
        pid = os.getpid()
        out = _files.get(pid)
        if out is None:
            # line-buffered: the benchmark reads it while the process runs
            out = _files[pid] = open(os.path.join(_DIR, f"{pid}.gc"), "a",  # noqa: SIM115
                                     buffering=1)
        return out

    def _flush() -> None:
        out = _files.get(os.getpid())
        if out is not None:
            out.flush()  # type: ignore[attr-defined]

    def _pause(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            _started[:] = [time.time(), time.perf_counter(), time.thread_time()]
            return
        wall = (time.perf_counter() - _started[1]) * 1000
        cpu = (time.thread_time() - _started[2]) * 1000
        out = _log()
        out.write(f"{_started[0]:.4f} {info['generation']} {wall:.3f} {cpu:.3f}\n")  # type: ignore[attr-defined]

    os.register_at_fork(before=_flush)  # the child's copy of the buffer is not written
    atexit.register(_flush)
    gc.callbacks.append(_pause)
