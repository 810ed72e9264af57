"""The verdicts on the faults check-bot injects into a pulling bot's requests — a stale
version, a 429 and a 503 with ``Retry-After``, an answer lost after the action was applied —
each judged in every game it was injected into (the 2-player game and, at a seat of its
own, the 4-player one): the request the bot sent next, read from the proxy's log.
"""

from __future__ import annotations

from typing import Any

from service.cli.checks.games import GameRun
from service.cli.checks.proxy import Exchange
from service.cli.checks.situations import SLACK

Verdict = tuple[bool, str, str]


def ok_status(status: int | None) -> bool:
    return status is not None and 200 <= status < 300


def _key_word(first: Exchange, then: Exchange) -> str:
    if then.key and then.key == first.key:
        return "same"
    return "new" if then.key else "none"


class FaultJudges:
    """Mixed into the pulling check's judges (which provide the runs and the log)."""

    runs: dict[str, GameRun]
    log: list[Exchange]

    def bot_actions(self, run: GameRun) -> list[Exchange]:
        raise NotImplementedError

    # --- the faults, each in the 2- and the 4-player game --------------------------------

    def both(self, name: str, judge: Any) -> Verdict:
        parts, ok, fix = [], True, ""
        for game, label in (("duel", "2 players"), ("clock", "2 players"),
                            ("team", "4 players")):
            run = self.runs.get(game)
            if run is None or name not in run.rules:
                continue
            good, what, f = judge(run, run.rules[name])
            parts.append(f"{label}: {what}")
            if not good and ok:
                ok, fix = False, f
        if not parts:
            return False, "no game of this situation was played", "play the game"
        return ok, "; ".join(parts), fix

    def judge_stale_version(self) -> Verdict:
        return self.both("stale_version", self._stale)

    def _stale(self, run: GameRun, rule: Any) -> Verdict:
        held = rule.fired
        if held is None:
            return False, "the bot sent too few actions for the proxy to hold one", \
                "play the game"
        if "stale_from" not in run.marks:
            return False, "the held action's game never moved on", "-"
        body = held.body if isinstance(held.body, dict) else {}
        versioned = "version" in body or "if-match" in held.headers
        answer = f"{held.service_status} {held.problem or ''}".strip()
        later = [e for e in self.bot_actions(run) if e.seq > held.seq]
        repeats = sum(1 for e in later if e.body == held.body and e.key == held.key)
        moved = any(ok_status(e.service_status) for e in later)
        seat = run.seat_of(held)
        what = (f"held the bot's action {body.get('action')!r} (seat {seat}, version "
                f"{body.get('version', 'none')}) until the clock played it "
                f"(v{run.marks['stale_from']}→v{run.marks['stale_to']}); the service answered "
                f"{answer}; re-sent unchanged {repeats}x; acted afterwards: {moved}")
        if not versioned:
            return False, what, ('send the view\'s "version" (or If-Match) with every '
                                 "action, so a stale decision is refused, not applied")
        if held.service_status not in (409, 412):
            return False, what, "send the version of the view you decided on"
        if repeats > 1 or not moved:
            return False, what, ("after a 409/412, read the view again and decide again; "
                                 "do not resend the same action, and do not stop")
        return True, what, ""

    def _next_after(self, ex: Exchange, same_path: bool) -> Exchange | None:
        for e in self.log:
            if e.seq > ex.seq and (e.path == ex.path and e.method == ex.method if same_path
                                   else e.game == ex.game):
                return e
        return None

    def _waited(self, run: GameRun, rule: Any, same_path: bool) -> Verdict:
        ex = rule.fired
        if ex is None or ex.end is None:
            return False, "the bot sent too few actions to be refused", "play the game"
        nxt = self._next_after(ex, same_path)
        if nxt is None:
            return False, f"refused {rule.status}; the bot sent nothing after it", (
                f"after {rule.status}, wait Retry-After seconds and send the same request")
        gap = nxt.start - ex.end
        what = (f"answered {rule.status} with Retry-After: {rule.retry_after} to the action of "
                f"seat {run.seat_of(ex)}; the bot's next request "
                f"{'to it ' if same_path else ''}came {gap:.2f} s later "
                f"({nxt.method} {nxt.path}, key {_key_word(ex, nxt)})")
        if gap < rule.retry_after - SLACK:
            return False, what, (f"wait at least Retry-After ({rule.retry_after} s) before "
                                 "the next request")
        if nxt.is_action and nxt.body == ex.body and nxt.key != ex.key:
            return False, what, "retry the same action with the same Idempotency-Key"
        return True, what, ""

    def judge_rate_limited(self) -> Verdict:
        # the next request about the same game: a bot with a thread per game may go on in
        # its other games (the service's own 429 would tell those threads so, each)
        return self.both("rate_limited", lambda run, rule: self._waited(run, rule, False))

    def judge_unavailable(self) -> Verdict:
        return self.both("unavailable", lambda run, rule: self._waited(run, rule, True))

    def judge_lost_answer(self) -> Verdict:
        return self.both("lost_answer", self._lost)

    def _lost(self, run: GameRun, rule: Any) -> Verdict:
        ex = rule.fired
        if ex is None:
            return False, "the bot sent too few actions to lose an answer", "play the game"
        applied = ex.service_status
        later = [e for e in self.bot_actions(run) if e.seq > ex.seq]
        # the first retry the service answered (one sent while it restarts finds nobody), and
        # every try before it must be the same request
        answered = next((i for i, e in enumerate(later) if e.service_status is not None),
                        len(later) - 1)
        tries = later[:answered + 1]
        nxt = tries[-1] if tries else None
        odd = next((e for e in tries if e.key != ex.key or e.body != ex.body), None)
        if odd is not None:
            nxt = odd
        body = ex.body.get("action") if isinstance(ex.body, dict) else None
        if nxt is None:
            return False, (f"the service applied {body!r} ({applied}) and the answer was "
                           "lost; the bot never sent an action again in this game"), \
                "retry an unanswered action: the same request with the same key"
        same_key = ex.key is not None and nxt.key == ex.key
        what = (f"the service applied {body!r} (seat {run.seat_of(ex)}, {applied}), the proxy "
                f"cut the connection; the bot's next action: key {_key_word(ex, nxt)}"
                f", body {'same' if nxt.body == ex.body else 'different'}"
                f"{f' (after {len(tries) - 1} unanswered tries)' if len(tries) > 1 else ''}, "
                f"answered {nxt.service_status} {nxt.problem or ''}".rstrip())
        if not same_key or nxt.body != ex.body:
            return False, what, ("when a request goes unanswered, send the same request with "
                                 "the same Idempotency-Key: the service answers it as the "
                                 "first time and applies it once")
        if not ok_status(nxt.service_status):
            return False, what, "retry with the same key and body"
        return True, what + ": applied once", ""

