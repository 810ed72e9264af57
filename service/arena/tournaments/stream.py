"""A tournament's own event stream (``GET /tournaments/{id}/events``): what changed in it,
as server-sent events, for bots and pages that would otherwise poll it.

Events (each ``event:`` with a JSON ``data:``): ``snapshot`` first (the tournament's
summary, as ``GET /tournaments`` lists it), then ``entrants`` (while registering: the
count changed), ``status`` (started, paused, resumed, finished, cancelled — with
``reason``), ``round`` (a round was paired: its number and games), ``game`` (a game of it
started or finished, as ``GET /tournaments/{id}`` shows it: an embargoed deal's result
stays hidden until every table of it has finished) and ``standings`` (the table changed,
after a recorded result). The stream ends after the tournament is finished or cancelled.

How: each stream reads the tournament's document every ``POLL_S`` (one GET; nothing is
kept in the process) and sends what differs from the last read, so any worker serves any
stream and nothing in ``advance`` has to publish. Ids count up per stream; a client that
reconnects gets a fresh ``snapshot`` first, which holds everything it missed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from service.arena.core.problems import Problem
from service.arena.tournaments.views import TournamentViews

EVENTS = ("snapshot", "entrants", "status", "round", "game", "standings")
POLL_S = 1.0  # a change reaches the stream at most this late
KEEPALIVE_S = 5.0
OVER = ("finished", "cancelled")


def _frame(n: int, event: str, data: Any) -> bytes:
    return f"id: {n}\nevent: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n" \
        .encode()


def events(t: TournamentViews, tid: str, poll_s: float = POLL_S,
           keepalive_s: float = KEEPALIVE_S, stop: Any = None) -> Iterator[bytes]:
    """The stream's frames (see the module docstring); 404 before the first if there is
    no such tournament. ``stop``: a callable that ends the stream when true (shutdown)."""
    doc = t.doc(tid)  # raises not-found now, as an answer, not mid-stream

    def gen() -> Iterator[bytes]:
        n = 0
        current = doc
        last: dict[str, Any] = {}
        quiet = time.monotonic()
        yield b"retry: 2000\n\n"
        while True:
            frames = []
            summary = t._summary(current)
            if not last:
                frames.append(("snapshot", summary))
            else:
                if summary["status"] != last["status"]:
                    frames.append(("status", {"status": summary["status"],
                                              "was": last["status"],
                                              "reason": summary.get("reason")}))
                if summary["entrant_count"] != last["entrant_count"]:
                    frames.append(("entrants", {"entrant_count": summary["entrant_count"],
                                                "entrants": summary["entrants"]}))
                for rnd in current["rounds"][last["rounds"]:]:
                    frames.append(("round", {"round": rnd["round"], "byes": rnd["byes"],
                                             "games": [t._slot_out(s)
                                                       for s in rnd["slots"]]}))
                for slot in (s for r in current["rounds"] for s in r["slots"]):
                    if last["slots"].get(slot["slot"]) != slot["status"] and \
                            slot["status"] != "pending":  # started, finished or voided
                        frames.append(("game", t._slot_out(slot)))
                if current.get("recorded", 0) != last["recorded"] or \
                        (summary["status"] != last["status"] and summary["status"] in OVER):
                    frames.append(("standings", {"items": t._standings(current)["items"]}))
            for event, data in frames:
                n += 1
                yield _frame(n, event, data)
            if frames:
                quiet = time.monotonic()
            last = {"status": summary["status"], "entrant_count": summary["entrant_count"],
                    "rounds": len(current["rounds"]), "recorded": current.get("recorded", 0),
                    "slots": {s["slot"]: s["status"] for r in current["rounds"]
                              for s in r["slots"]}}
            if summary["status"] in OVER and not current.get("closing"):
                return
            if stop is not None and stop():
                return
            time.sleep(poll_s)
            if time.monotonic() - quiet >= keepalive_s:
                quiet = time.monotonic()
                yield b": keep-alive\n\n"
            try:
                current = t.doc(tid)
            except Problem:
                return  # removed (an unstarted registration expired)

    return gen()
