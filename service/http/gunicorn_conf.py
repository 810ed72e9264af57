"""gunicorn settings, shared by ``allfours serve``, the Dockerfile and the benchmark.

Load with ``gunicorn -c python:service.http.gunicorn_conf service.http.wsgi:app``;
command-line flags (``--bind``, ``--workers``) override these values, and so does
``GUNICORN_CMD_ARGS``.

Why the **gevent** worker class: a bot waiting for its turn holds a request open — a
long-poll for up to N seconds, or an SSE stream for the whole game. A sync worker spends a
whole process on each open request, so two workers would serve two waiting bots and
everyone else would queue; a threaded worker spends an OS thread (and its stack) on each.
gevent runs each request in a greenlet (a few KB) and parks it on the Redis socket
(pub/sub or a blocking read) until Redis wakes it, so one worker process holds thousands
of waiting bots while still answering ordinary requests. gunicorn monkey-patches the
standard library in each worker before the app is imported, which makes the blocking
redis-py client cooperative without code changes. ``timeout`` is only a heartbeat for
async workers; it does not cut long requests short.
"""

from __future__ import annotations

import os

# ARENA_BIND wins; else all interfaces on $PORT (what containers and PaaS hosts set).
bind = os.environ.get("ARENA_BIND") or f"0.0.0.0:{os.environ.get('PORT', '8000')}"
# Two processes per 2-core box: the work is I/O-bound (Redis round trips), so more
# workers buy little; gevent gives the concurrency within each worker.
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
# gunicorn's gevent worker, with each response's headers sent along with its body (one
# write per small response instead of two; see ``service.http.gevent_worker``).
worker_class = "service.http.gevent_worker.GeventWorker"
# Simultaneous open connections per worker (long-polls and streams included).
worker_connections = int(os.environ.get("ARENA_WORKER_CONNECTIONS", "2000"))
# Connections the kernel queues for the workers to take (the kernel caps it at
# net.core.somaxconn): a burst of one client's connections (bench/abuse.py: 4,300 at once)
# filled gunicorn's default 2,048, and every SYN past it, a probe's too, waited 1 s and more
# for its retransmit; the workers refuse queued connections quickly (SHED_SLOTS, a share
# per client), so a longer queue empties in moments.
backlog = int(os.environ.get("ARENA_BACKLOG", "8192"))
timeout = 30
# On SIGTERM, open long-polls get this long to finish before the worker exits; clients
# retry a cut long-poll, so waiting the full poll length is not worth a slow shutdown.
graceful_timeout = 5
# Seconds a request head may take to arrive, the first on a connection included (gunicorn
# runs its parser under this timeout), and an idle keep-alive connection stays open:
# ARENA_HEAD_TIMEOUT (service.http.connections). Body and send deadlines: the app's
# ARENA_BODY_TIMEOUT and ARENA_SEND_TIMEOUT.
keepalive = max(1, int(os.environ.get("ARENA_HEAD_TIMEOUT") or 5))  # whole seconds
# gunicorn's own access log stays off: the app writes one JSON line per request
# (``service.logs``; ARENA_ACCESS_LOG=0 turns it off).
accesslog = None
errorlog = "-"
loglevel = os.environ.get("ARENA_LOG_LEVEL", "info")
# Every line on stderr is one JSON object: gunicorn's, the app's and the access lines.
logger_class = "service.logs.GunicornLogger"
proc_name = "allfours-arena"
# gunicorn 24+ opens a control socket at one fixed path per user; two services on one
# machine (tests, the statelessness check, the benchmark) would fight over it. Unused here.
control_socket_disable = True


def post_worker_init(worker: object) -> None:
    """Every worker runs a deadline sweeper (a greenlet under gevent) next to the app:
    move deadlines are enforced and open tournaments re-checked with no client involved.
    Several sweepers at once are harmless (see ``service.arena.games.deadlines``); set
    ``ARENA_SWEEPER=0`` to run none (e.g. when a separate process runs them).

    First, the app is loaded: what its imports made (modules, classes, schemas, some
    50,000 objects) lives as long as the worker, yet each full garbage collection would
    walk it again — and a gevent worker serves nobody while it collects. ``gc.freeze``
    sets it aside for good (``ARENA_GC_FREEZE=0`` keeps the default behaviour)."""
    if os.environ.get("ARENA_GC_FREEZE", "1") != "0":
        import gc

        gc.collect()
        gc.freeze()

    if os.environ.get("ARENA_CALLBACKS", "1") != "0":
        from service.arena.webhooks.dispatcher import start_dispatcher

        # webhook bots are called from every worker too (ARENA_CALLBACKS=0: not this one)
        start_dispatcher(worker.wsgi)  # type: ignore[attr-defined]
    if os.environ.get("ARENA_SWEEPER", "1") == "0":
        return
    from service.arena.games.deadlines import start_sweeper
    from service.arena.ladder.ladders import start_matchmaker

    start_sweeper(worker.wsgi)  # type: ignore[attr-defined]
    # the tournament clock, likewise: starts tournaments at their time, makes the schedule's
    from service.arena.tournaments.schedule import start_clock

    start_clock(worker.wsgi)  # type: ignore[attr-defined]
    # the ladder's matchmaker, likewise in every worker (see ``service.arena.ladder.ladders``)
    start_matchmaker(worker.wsgi)  # type: ignore[attr-defined]


# --- metrics: prometheus_client's multiprocess mode (see service.metrics) ------------------
_METRICS_ENV = "PROMETHEUS_MULTIPROC_DIR"
_made_metrics_dir: list[str] = []


def on_starting(server: object) -> None:
    """Before any worker exists: every worker writes its metrics to files in
    ``$PROMETHEUS_MULTIPROC_DIR`` and a scrape sums them. The operator's directory is
    emptied of an earlier run's files (their counters would be summed in); without one,
    a private directory is made (and removed at exit). The workers inherit the variable;
    nothing here imports prometheus_client, whose mode is fixed when it is first imported."""
    import tempfile

    path = os.environ.get(_METRICS_ENV)
    if path:
        os.makedirs(path, exist_ok=True)
        for name in os.listdir(path):
            if name.endswith(".db"):
                os.unlink(os.path.join(path, name))
    else:
        path = tempfile.mkdtemp(prefix="allfours-metrics-")
        os.environ[_METRICS_ENV] = path
        _made_metrics_dir.append(path)


def child_exit(server: object, worker: object) -> None:
    """A worker is gone: its open long-polls and streams no longer count."""
    from prometheus_client import multiprocess  # the variable is set: multiprocess mode

    multiprocess.mark_process_dead(worker.pid)  # type: ignore[attr-defined]


_analysis_supervisor: list[object] = []


def when_ready(server: object) -> None:
    """The post-game analysis workers (``service.arena.analyses.worker``): processes of their own
    next to the gunicorn workers (CPU-bound, they would hold a gunicorn worker's GIL),
    ``ARENA_ANALYSIS_WORKERS`` of them (default 1; 0: none), under one supervisor that
    restarts a dead one and leaves when this arbiter does."""
    # read here, not imported: the arbiter imports nothing of the app (its workers fork
    # from it and monkey-patch the standard library first)
    if int(os.environ.get("ARENA_ANALYSIS_WORKERS") or 1) > 0:
        import subprocess
        import sys

        from service.storage.embedded import die_with_parent  # (the standard library only)

        # SIGTERMed by Linux if this arbiter dies without its on_exit (a SIGKILL)
        _analysis_supervisor.append(subprocess.Popen(
            [sys.executable, "-m", "service.arena.analyses.worker"], preexec_fn=die_with_parent))


def on_exit(server: object) -> None:
    import shutil

    for proc in _analysis_supervisor:
        proc.terminate()  # type: ignore[attr-defined]
        proc.wait(15)  # type: ignore[attr-defined]

    for path in _made_metrics_dir:
        shutil.rmtree(path, ignore_errors=True)


def worker_exit(server: object, worker: object) -> None:
    """The worker is done serving: write its last second of request tallies."""
    import sys

    metrics = sys.modules.get("service.metrics")
    if metrics is not None:
        metrics.flush()


def worker_int(worker: object) -> None:
    """Quick stop (SIGINT, SIGQUIT): the worker exits 0.1 s after this. Waking the open
    long-polls and streams first (as SIGTERM does, ``service.http.gevent_worker``) lets them
    answer in that moment rather than be cut off."""
    from service.http.gevent_worker import shut_down

    shut_down(worker.wsgi)  # type: ignore[attr-defined]


def worker_abort(worker: object) -> None:
    """gunicorn is killing a worker that missed its heartbeat (``timeout``): say what it
    was holding, since its clients will see their connections drop."""
    import sys

    metrics = sys.modules.get("service.metrics")
    if metrics is not None:
        worker.log.warning(  # type: ignore[attr-defined]
            "worker aborted with %d open long-polls and %d open streams",
            metrics.LIVE.polls, metrics.LIVE.streams)
