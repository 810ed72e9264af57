"""gunicorn settings for ``bench/http_profile.py``: the deployed ones
(``service.http.gunicorn_conf``), plus a profiler in each worker, switched by signals.

yappi when installed rather than cProfile: under gevent many requests interleave in one
thread, and yappi follows each greenlet (``set_context_backend("greenlet")``) on the CPU
clock, so a function is charged the CPU it used, not the time other greenlets ran while it
waited. Without yappi, a sampler: ``SIGPROF`` on the process's CPU clock (the kernel
delivers it at its tick at most, some 250 a second however short the interval asked), its
handler walking the interrupted frame's stack — which is the
running greenlet's own, so a sample is charged to the request that used the CPU, and a
wait (no CPU) is never sampled. Its statistics are written in the same pstats shape: a
function's own time is the samples it was on top of, its inclusive time the samples it
was anywhere in, each sample worth the process's CPU time over the samples taken; call
counts are sample counts, not calls.
``SIGRTMIN``: clear and start; ``SIGRTMIN+1``: stop and save the statistics (pstats
format) to ``$BENCH_PROFILE_OUT.<pid>`` (the sampler: its stacks too, one per line with
its count, in ``.folded``).
"""

from __future__ import annotations

import marshal
import os
import signal
import time
from collections import Counter
from types import FrameType
from typing import Any

from service.http import gunicorn_conf as _deployed
from service.http.gunicorn_conf import *  # noqa: F403


def _yappi(out: str) -> bool:
    try:
        import yappi
    except ImportError:
        return False
    yappi.set_context_backend("greenlet")
    yappi.set_clock_type("cpu")

    def start(*_: object) -> None:
        yappi.stop()
        yappi.clear_stats()
        yappi.start(builtins=True)

    def save(*_: object) -> None:
        yappi.stop()
        yappi.get_func_stats().save(out + ".tmp", type="pstat")
        os.replace(out + ".tmp", out)

    signal.signal(signal.SIGRTMIN, start)
    signal.signal(signal.SIGRTMIN + 1, save)
    return True


def _sampler(out: str) -> None:
    stacks: Counter[tuple[Any, ...]] = Counter()
    began = [0.0]

    def sample(_: int, frame: FrameType | None) -> None:
        codes = []
        while frame is not None:
            codes.append(frame.f_code)
            frame = frame.f_back
        stacks[tuple(codes)] += 1

    def start(*_: object) -> None:
        stacks.clear()
        began[0] = time.process_time()
        signal.setitimer(signal.ITIMER_PROF, 0.001, 0.001)

    def save(*_: object) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        interval = (time.process_time() - began[0]) / max(1, sum(stacks.values()))
        stats: dict[tuple[str, int, str], tuple[int, int, float, float, dict[Any, Any]]] = {}
        own: Counter[tuple[str, int, str]] = Counter()
        inclusive: Counter[tuple[str, int, str]] = Counter()
        for codes, n in stacks.items():
            keys = [(c.co_filename, c.co_firstlineno, c.co_name) for c in codes]
            if keys:
                own[keys[0]] += n
            for key in set(keys):
                inclusive[key] += n
        for key, n in inclusive.items():
            stats[key] = (n, n, own[key] * interval, n * interval, {})
        with open(out + ".tmp", "wb") as f:
            marshal.dump(stats, f)
        # the stacks themselves, root first, for a flame graph or a look under one function
        with open(out + ".folded", "w") as f:
            for codes, n in stacks.items():
                f.write(";".join(f"{c.co_filename}:{c.co_firstlineno}:{c.co_name}"
                                 for c in reversed(codes)) + f" {n}\n")
        os.replace(out + ".tmp", out)

    signal.signal(signal.SIGPROF, sample)
    signal.signal(signal.SIGRTMIN, start)
    signal.signal(signal.SIGRTMIN + 1, save)


def post_worker_init(worker: object) -> None:
    _deployed.post_worker_init(worker)
    out = f"{os.environ['BENCH_PROFILE_OUT']}.{os.getpid()}"
    if not _yappi(out):
        _sampler(out)
