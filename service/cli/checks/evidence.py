"""What the proxy's log and a game's timeline prove about the bot: why each of its moves
was played by the clock, how long it took to decide, and what it last heard before its
process exited.

Why a module of its own: advice that guesses sends an author the wrong way (a bot that
exits on a 409 was told to "play every seat"; a bot acting 0.3 s before its deadline was
told to "treat a reset connection as transient"). Every sentence check-bot says about a
timeout is read here from evidence: the bot's own requests in that decision's window.

A timeout is one of these ``kind`` s:

* ``exited``: the bot's process was gone by the deadline;
* ``injected``: check-bot took the time (it held the action until the clock played, or the
  service was away for a restart): not counted against the bot;
* ``slow``: the bot saw its turn and sent its action too late to be applied in time (its
  own decision time, or too little margin left for a ``Retry-After`` or a retry);
* ``silent``: it saw its turn and sent nothing;
* ``refused``: it sent an action in time and the service refused it;
* ``one_game``: it never looked at this game in the window, while acting in another one;
* ``one_seat``: it asked about this game only for its other seat;
* ``unseen``: it sent nothing about this game, nor anything else, in the window.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from service.cli.checks.games import Entry, GameRun
from service.cli.checks.proxy import Exchange

RESTART_GRACE = 2.5  # seconds after the service is back that a decision is still excused
# a decision sent with less margin than this before its deadline left no room for one
# Retry-After or retry: the bot's own slowness, whatever then took the rest
MARGIN = 1.0

COUNTED = ("slow", "silent", "refused", "one_game", "one_seat", "unseen", "exited")


@dataclass
class Timeout:
    """One move of the bot played by the clock, and why (read from the evidence)."""

    game: str
    seat: int
    ply: int
    kind: str
    why: str

    @property
    def counted(self) -> bool:
        return self.kind != "injected"


def is_view_of(ex: Exchange, game_id: str) -> bool:
    a = ex.answer
    return isinstance(a, dict) and a.get("id") == game_id and "your_turn" in a


def _in_window(log: Iterable[Exchange], a: float, b: float) -> list[Exchange]:
    return [e for e in log if a <= e.start <= b]


def classify(run: GameRun, t: dict[str, Any], log: list[Exchange],
             exited_at: float | None, restarts: list[tuple[float, float]]) -> Timeout:
    """Why the clock played ``t`` (a record's timeout: seat, ply) for the bot."""
    seat, ply = t["seat"], t["ply"]
    entry = run.due(ply)
    out = Timeout(run.name, seat, ply, "unseen", "")
    if entry is None or entry.deadline_at is None:
        out.kind, out.why = "unseen", f"seat {seat} ply {ply}: no window was seen"
        return out
    start, deadline = entry.seen, entry.deadline_at
    held = run.rules.get("stale_version")
    if held and held.fired is not None and isinstance(held.fired.body, dict) and \
            held.fired.body.get("version") == entry.version:
        out.kind, out.why = "injected", "check-bot held this action until the clock played"
        return out
    for down, up in restarts:
        if down <= deadline and start <= up + RESTART_GRACE and deadline <= up + RESTART_GRACE:
            out.kind, out.why = "injected", "the service was away (a restart) for this decision"
            return out
    if exited_at is not None and exited_at <= deadline:
        out.kind, out.why = "exited", "the bot's process had exited"
        return out
    mine = [e for e in log if e.game == run.game_id]
    saw = [e for e in mine if e.end is not None and start - 0.05 <= e.end <= deadline
           and is_view_of(e, run.game_id) and e.answer.get("your_turn")
           and e.answer.get("seat") == seat and e.answer.get("version") == entry.version]
    if saw:
        seen = saw[0].end or start
        acts = [e for e in mine if e.is_action and e.start >= seen - 0.05 and isinstance(
            e.body, dict) and e.body.get("version", entry.version) == entry.version]
        if not acts:
            out.kind = "silent"
            out.why = (f"seat {seat} ply {ply}: saw its turn {deadline - seen:.1f} s before the "
                       "deadline and sent no action")
            return out
        first = acts[0]
        left = deadline - first.start
        took = first.start - seen
        delayed = next((e for e in acts if e.injected or e.outcome != "forwarded"), None)
        if left < 0:
            out.kind = "slow"
            out.why = (f"seat {seat} ply {ply}: saw its turn, decided in {took:.1f} s and sent "
                       f"its action {-left:.1f} s after the deadline")
        elif left < MARGIN:
            out.kind = "slow"
            out.why = (f"seat {seat} ply {ply}: decided in {took:.1f} s, leaving {left:.1f} s; "
                       + (f"the {_fault(delayed)} took the rest" if delayed else
                          "too little for the answer to arrive in time"))
        elif delayed:
            out.kind = "injected"
            out.why = (f"seat {seat} ply {ply}: sent its action {left:.1f} s before the "
                       f"deadline; the {_fault(delayed)} took the rest")
        else:
            answered = next((e for e in acts if e.service_status is not None), first)
            out.kind = "refused"
            out.why = (f"seat {seat} ply {ply}: sent its action {left:.1f} s before the "
                       f"deadline; the service answered {answered.service_status} "
                       f"{answered.problem or ''}").rstrip()
        return out
    window = _in_window(log, start, deadline)
    blocked = next((e for e in log if e.injected and e.start <= deadline
                    and (e.end is None or e.end >= start) and e.game != run.game_id), None)
    if blocked is not None and not any(e.game == run.game_id for e in window):
        out.kind = "injected"
        out.why = (f"seat {seat} ply {ply}: check-bot held the bot's request in another game "
                   "meanwhile")
        return out
    here = [e for e in window if e.game == run.game_id]
    asked = [e for e in here if not e.is_action]
    seats_asked = {int(e.query["seat"][0]) for e in asked
                   if e.query.get("seat") and e.query["seat"][0].isdigit()}
    if asked and seats_asked and seat not in seats_asked and all(
            e.query.get("seat") for e in asked):
        out.kind = "one_seat"
        out.why = (f"seat {seat} ply {ply}: in turn for {deadline - start:.1f} s; the bot asked "
                   f"about this game only for seat(s) {sorted(seats_asked)}")
        return out
    elsewhere = sorted({e.game for e in window if e.game and e.game != run.game_id})
    if elsewhere and not here:
        out.kind = "one_game"
        out.why = (f"seat {seat} ply {ply}: in turn for {deadline - start:.1f} s; the bot was "
                   f"busy in {len(elsewhere)} other game(s) and never looked at this one")
        return out
    if not window:
        before = [e for e in log if e.start < start]
        last = before[-1] if before else None
        pending = last is not None and (last.end is None or last.end > start)
        out.kind = "unseen"
        out.why = (f"seat {seat} ply {ply}: the bot sent no request in its "
                   f"{deadline - start:.1f} s" + (
                       f" (its {last.method} {last.path} was still unanswered)" if pending
                       else ""))
        return out
    out.kind = "unseen"
    out.why = (f"seat {seat} ply {ply}: in turn for {deadline - start:.1f} s; the bot's "
               f"{len(window)} request(s) then never showed it this turn")
    return out


def _fault(ex: Exchange) -> str:
    if ex.outcome == "answered":
        return f"injected {ex.status} (Retry-After)"
    if ex.outcome == "held":
        return "proxy's hold"
    if ex.outcome in ("dropped", "cut"):
        return "lost answer and its retry"
    if ex.outcome == "no-service":
        return "restart"
    return "delay"


def decision_times(run: GameRun, log: list[Exchange]) -> list[float]:
    """Seconds the bot took between receiving a view in turn and sending its action on it
    (its own time: nothing of the service's or the proxy's)."""
    out: list[float] = []
    mine = [e for e in log if e.game == run.game_id]
    seen: dict[tuple[int, Any], float] = {}
    for e in mine:
        if is_view_of(e, run.game_id) and e.answer.get("your_turn") and e.end is not None:
            seen.setdefault((e.answer["version"], e.answer.get("seat")), e.end)
    done: set[int] = set()
    for e in mine:
        if not e.is_action or not isinstance(e.body, dict):
            continue
        v = e.body.get("version")
        if not isinstance(v, int) or v in done:
            continue
        at = min((t for (ver, _s), t in seen.items() if ver == v), default=None)
        if at is not None and e.start >= at:
            out.append(e.start - at)
            done.add(v)
    return out


def last_heard(log: list[Exchange], before: float) -> Exchange | None:
    """The bot's last request that met an end (an answer, a cut, no service) before
    ``before``."""
    ended = [e for e in log if e.end is not None and e.end <= before]
    return max(ended, key=lambda e: e.end or 0.0) if ended else None


def entry_text(entry: Entry | None) -> str:
    return "" if entry is None else f"v{entry.version}"
