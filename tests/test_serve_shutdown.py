"""Ctrl-C on ``allfours serve``: a quick, quiet exit that leaves nothing behind.

Why this order of shutdown matters: the house bots are a client of the service. Stopped
after gunicorn (as before), they spun on ``/bots/me/turns`` answered at once by the drain,
then printed a retry warning per thread and "Max retries exceeded" while the port was
gone — some 300 lines and 6.6 s. Now serve stops them first, while the service answers,
and they leave quietly; then gunicorn drains; then valkey. The test plays a little, sends
SIGINT to the process group as a terminal does, and asserts behaviour only: exit status
0 (how quick it is, is ``bench/shutdown.py``'s to measure), no warning, error, traceback
or retry line after the signal, a handful of lines besides the access log's, and no child
(valkey, gunicorn master and workers, the house process) left alive.
"""

from __future__ import annotations

import os
import signal
import time

from tests.test_serve import (  # noqa: F401 (serve is a fixture)
    START_TIMEOUT,
    _post_json,
    alive,
    descendants,
    serve,
    wait_for,
)

# How long the test waits for the exit: far beyond what a slow machine takes, so running
# out of it means "hung", not "slow"
EXIT_PATIENCE_S = 120.0
MAX_LINES = 10  # after the signal, besides one access-log line per request still open


def test_ctrl_c_exits_quickly_and_quietly_leaving_no_child(serve) -> None:  # noqa: F811
    service = serve()
    service.wait_healthy("/readyz")
    answers: list[tuple[int, dict]] = []

    def seated() -> bool:
        answers.append(_post_json(service.url("/house/games"),
                                  {"players": 4, "opponent": "random", "partner": "random"}))
        return answers[-1][0] == 201

    wait_for(seated, START_TIMEOUT, f"a house game; answers: {answers[-3:]}")
    time.sleep(2.0)  # the house bots play, then sit in their long-polls
    children = descendants(service.proc.pid)
    assert any("service.arena.accounts.house" in c for c in children.values()), children
    assert any("valkey-server" in c for c in children.values()), children
    before = len(service.output().splitlines())

    os.killpg(service.proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole group
    assert service.proc.wait(EXIT_PATIENCE_S) == 0
    wait_for(lambda: not any(alive(pid) for pid in children), 10, "every child to exit")

    after = service.output().splitlines()[before:]
    said = [line for line in after if '"logger":"allfours.access"' not in line]
    loud = [line for line in after
            if '"level":"warning"' in line or '"level":"error"' in line
            or "Traceback" in line or "retry" in line.lower() or "Max retries" in line]
    assert not loud, "\n".join(after)
    assert len(said) <= MAX_LINES, "\n".join(after)
    assert "allfours serve: stopped" in after and "embedded valkey-server stopped" in \
        after[-1], "\n".join(after)
