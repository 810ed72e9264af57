"""The verdicts of a pulling check: one ``judge_<situation>`` per situation, each returning
``(passed, what, fix)``, and :meth:`PullJudges.explain`, which gives every failure its
cause, what real play would do to the bot, and the failure that explains it.

Why judged from evidence only: a game's failure is told by why each of the bot's moves
was played by the clock (:mod:`.evidence`), so the advice follows what the bot did — an
exited process, a turn seen and decided too late, a game or a seat never looked at — and
not what a bot usually gets wrong.
"""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

from service.cli.checks.evidence import Timeout, classify, decision_times, last_heard
from service.cli.checks.faults import FaultJudges, Verdict, ok_status
from service.cli.checks.games import GameRun, decision_kind
from service.cli.checks.proxy import Exchange
from service.cli.checks.report import Result
from service.cli.checks.situations import (
    BANK_HOLD,
    BUSY_RATE,
    CLOCK_LIMIT,
    CLOCKED,
    GAME_CAP,
    HOUSE_RULES,
    HOUSE_RULES_4P,
    INVITE_WAIT,
    MAX_PER_MOVE,
    REAL_PLAY,
    SITUATIONS,
)

# the kind of a timeout -> (the cause it is, what to change)
TIMEOUT_CAUSE: dict[str, tuple[str, str]] = {
    "exited": ("exited", "keep the process running: handle every answer and every broken "
                         "connection of one request, then go on (see the first cause)"),
    "one_game": ("one_game", "keep every game moving: after each move go back to GET "
                             "/bots/me/turns (or give each game a thread of its own, naming "
                             "them in ?playing=) instead of playing one game to its end"),
    "one_seat": ("one_seat", "play every seat you hold: ask GET /games/{id} without ?seat= "
                             "(it shows the seat in turn), also after a reconnect"),
    "slow": ("slow", "decide well within the move limit and send the action at least 1 s "
                     "before `deadline`: a Retry-After or a retry needs that time; pace by "
                     "move_limit, not by time_left"),
    "refused": ("refused", "send only one of the view's legal_actions, with its version; "
                           "after a 409 read the view again"),
    "silent": ("other", "act on every view whose your_turn is true"),
    "unseen": ("other", "keep asking for your turns (GET /bots/me/turns long-poll) while any "
                        "game is on; do not sleep between a turn and its action"),
}
ORDER = ["exited", "one_game", "one_seat", "slow", "refused", "silent", "unseen"]
# situations a cause is best told by, when several fail with it
ROOTS = {"one_game": ["several_games"],
         "one_seat": ["four_player_reconnect", "lost_answer", "four_player_two_seats"],
         "slow": ["time_bank", "move_limit"],
         "refused": ["house_rules_four_player", "house_rules"]}
PROTOCOL = ("stale_version", "rate_limited", "unavailable", "lost_answer", "idempotency_key",
            "illegal_action")
# A restart (check-bot's own) overlapping a quiet window is left out of it: a service going
# down answers every long-poll at once and then refuses connections, so a bot that polls
# again at once then (as it should) is not busy; its first seconds back are left out too.
RESTART_SLACK_S = 1.0


def _overlap(since: float, until: float, spans: list[tuple[float, float]]) -> float:
    """How much of [since, until] the (disjoint) ``spans`` cover."""
    return sum(max(0.0, min(until, b) - max(since, a)) for a, b in spans)


class PullJudges(FaultJudges):
    """The judges; mixed into ``pulling.Check`` (which provides the runs and the log)."""

    runs: dict[str, GameRun]
    notes: dict[str, dict[str, Any]]
    exited_at: float | None
    restarts: list[tuple[float, float]]
    invite: dict[str, Any]
    idle: tuple[float, float] | None
    quiet_window: tuple[float, float] | None
    log: list[Exchange]
    bot: Any

    def bot_actions(self, run: GameRun) -> list[Exchange]:
        raise NotImplementedError

    # --- a game as a whole ------------------------------------------------------------------

    def timeouts(self, run: GameRun) -> list[Timeout]:
        log = self.log
        return [classify(run, t, log, self.exited_at, self.restarts) for t in run.bot_timeouts()]

    def game(self, run: GameRun, note: str, since: float = 0.0) -> Verdict:
        """A game played to its end with no move of the bot's played by the clock (except
        those check-bot caused; only those due after ``since``, when given); ``note`` is
        the situation the verdict is noted for."""
        acted = sum(1 for e in self.bot_actions(run) if ok_status(e.service_status))
        outs = [t for t in self.timeouts(run)
                if not since or (run.due(t.ply) is not None
                                 and run.due(t.ply).seen >= since)]  # type: ignore[union-attr]
        counted = [t for t in outs if t.counted]
        excused = len(outs) - len(counted)
        if counted:
            kinds = Counter(t.kind for t in counted)
            main = min(kinds, key=ORDER.index)
            cause, fix = TIMEOUT_CAUSE[main]
            seats = Counter(t.seat for t in counted)
            per_seat = ", ".join(f"seat {s}: {n}" for s, n in sorted(seats.items()))
            self.notes[note] = {"cause": cause, "kinds": set(kinds),
                                "real_play": f"{CLOCKED}: here {len(counted)} time(s) in this "
                                             f"game ({per_seat})"}
            why = "; ".join(t.why for t in counted[:3]) + (
                f"; and {len(counted) - 3} more" if len(counted) > 3 else "")
            return False, (f"the clock played {len(counted)} of the bot's moves ({why})"
                           + (f"; {excused} more caused by check-bot" if excused else "")
                           + f"; its own actions applied: {acted}"), fix
        if not run.finished:
            if "bot_exited" in run.marks or self.exited_at is not None:
                self.notes[note] = {"cause": "exited", "kinds": {"exited"},
                                    "real_play": "its games are played by the clock to "
                                                 "their end"}
                return False, (f"the bot's process exited (status {run.marks.get('bot_exited')})"
                               f" mid-game; its actions applied: {acted}"), \
                    TIMEOUT_CAUSE["exited"][1]
            self.notes[note] = {"cause": "other", "kinds": set()}
            return False, (f"the game was not over after {GAME_CAP[run.name.split('-')[0]]:.0f}"
                           f" s; the bot's actions applied: {acted}"), \
                "play every game to its end"
        if acted == 0:
            self.notes[note] = {"cause": "other", "kinds": set()}
            return False, "the bot made no move of its own in this game", \
                "find games with GET /bots/me/turns and act on your turn"
        return True, (f"finished, {len(run.record.get('actions') or [])} actions, {acted} of "
                      f"them the bot's, scores {run.record.get('scores')}"
                      + (f" ({excused} move(s) played by the clock because check-bot held "
                         "them)" if excused else "")), ""

    def judge_two_player(self) -> Verdict:
        ok, what, fix = self.game(self.runs["duel"], "two_player")
        return ok, f"2 players, target 7: {what}", fix

    def judge_four_player_two_seats(self) -> Verdict:
        run = self.runs["team"]
        ok, what, fix = self.game(run, "four_player_two_seats")
        seats = Counter(run.seat_of(e) for e in self.bot_actions(run)
                        if ok_status(e.service_status))
        per_seat = {s: seats.get(s, 0) for s in run.bot_seats}
        return ok, (f"4 players, the bot in seats 0 and 2 (a fault injected at each): {what}; "
                    f"actions applied per seat {per_seat}"), fix

    def judge_house_rules(self) -> Verdict:
        ok, what, fix = self.game(self.runs["clock"], "house_rules")
        return ok, f"variants {HOUSE_RULES}: {what}", fix

    def judge_house_rules_four_player(self) -> Verdict:
        run = self.runs["house4"]
        ok, what, fix = self.game(run, "house_rules_four_player")
        refused = [e for e in self.bot_actions(run)
                   if e.problem in ("/problems/illegal-action", "/problems/not-your-turn")]
        if refused:
            first = refused[0]
            action = first.body.get("action") if isinstance(first.body, dict) else None
            detail = first.answer.get("detail") if isinstance(first.answer, dict) else ""
            self.notes["house_rules_four_player"] = {"cause": "refused", "kinds": {"refused"},
                                                     "real_play": REAL_PLAY["illegal_action"]}
            return False, (f"variants {HOUSE_RULES_4P}: {len(refused)} action(s) refused as "
                           f"illegal, the first {action!r}: "
                           f"{detail}; {what}"), (
                "choose only from the view's legal_actions: the house rules change what is "
                "legal, and your own reading of the rules does not")
        return ok, f"variants {HOUSE_RULES_4P}: {what}", fix

    def judge_several_games(self) -> Verdict:
        runs = [r for n, r in sorted(self.runs.items()) if n.startswith("multi-")]
        parts, fixes, ok, causes = [], [], True, []
        for run in runs:
            good, what, fix = self.game(run, run.name)
            ok = ok and good
            parts.append(f"{run.name}: {what}")
            if not good:
                fixes.append(fix)
                causes.append(self.notes.get(run.name, {}))
        if causes:
            kinds = set().union(*(c.get("kinds", set()) for c in causes))
            main = min(kinds, key=ORDER.index) if kinds else "unseen"
            self.notes["several_games"] = {
                "cause": TIMEOUT_CAUSE.get(main, ("other", ""))[0], "kinds": kinds,
                "real_play": f"{CLOCKED}, in every game but the one it is playing"}
            fixes = [TIMEOUT_CAUSE.get(main, ("", fixes[0]))[1]]
        return ok, f"{len(runs)} games started at once: " + "; ".join(parts), \
            fixes[0] if fixes else ""

    def judge_time_bank(self) -> Verdict:
        run = self.runs["bank"]
        ok, what, fix = self.game(run, "time_bank")
        limit = run.move_limit or 1.0
        bank = float(run.settings.get("time_bank") or 0)
        own = decision_times(run, self.log)
        wasted = sum(max(0.0, d - limit) for d in own)
        rule = run.rules.get("bank_delay")
        held = rule.fired if rule else None
        left = run.marks.get("bank_left")
        fate = f"answered {held.service_status}" if held else "not reached"
        said = (f"move limit {limit:.0f} s, bank {bank:.0f} s; the proxy delayed one action "
                f"{BANK_HOLD} s ({fate});"
                f" the bot's own decisions: median {statistics.median(own) if own else 0:.2f} s, "
                f"longest {max(own, default=0):.2f} s; bank left at the end: {left}")
        if ok and wasted > bank / 3:
            self.notes["time_bank"] = {"cause": "slow", "kinds": {"slow"},
                                       "real_play": "its bank is gone when a slow network or a "
                                                    "hard decision needs it, and then the clock "
                                                    "plays its seat"}
            return False, f"{said}; it spent {wasted:.1f} s of its bank on its own time", (
                "keep the bank for the odd slow decision: decide within move_limit, do not "
                "wait until time_left runs out")
        if ok and held is not None and not ok_status(held.service_status):
            return False, f"{said}; the delayed action was not applied", \
                "a late action within the bank is applied: send it, do not drop it"
        return ok, f"{said}; {what}", fix

    def judge_invitation(self) -> Verdict:
        if "refused" in self.invite:
            return True, ("the bot's policy refuses strangers: the stranger's game was refused "
                          f"at once ({self.invite['refused']})"), ""
        run = self.runs["invited"]
        inv_id = None
        listed = 0
        for e in self.log:
            if e.path in ("/bots/me/turns", "/bots/me/invitations") and isinstance(e.answer, dict):
                mine = [i for i in e.answer.get("invitations") or []
                        if i.get("game_id") == run.game_id]
                if mine:
                    listed += 1
                    inv_id = mine[0]["id"]
        answered = [e for e in self.log if inv_id and e.path.startswith(f"/invitations/{inv_id}")]
        t0 = self.invite.get("created", run.started)
        active = next((e for e in sorted(run.by_version.values(), key=lambda e: e.version)
                       if e.status != "waiting"), None)
        if run.marks.get("cancelled") == "declined":
            return True, (f"declined in {run.ended - run.started:.1f} s: the challenger knew at "
                          "once"), ""
        if run.marks.get("unanswered") or active is None:
            self.notes["invitation"] = {"cause": "ignored", "kinds": set(),
                                        "real_play": REAL_PLAY["invitation"]}
            seen = (f"it was in {listed} of the bot's turn answers" if listed else
                    "the bot never asked GET /bots/me/turns (or /bots/me/invitations)")
            return False, (f"a stranger invited the bot to a 2-player game; {seen}, and in "
                           f"{INVITE_WAIT:.0f} s it was not accepted, declined or refused"
                           + "".join(f"; it sent {e.method} {e.path} at +{e.start - t0:.1f} s: "
                                     + (f"answered {e.status} {e.problem or ''}".rstrip()
                                        if e.status is not None else
                                        f"no answer ({e.outcome}), and did not send it again")
                                     for e in answered[-2:])
                           + f"; the game's status: {run.last.status if run.last else None}"), (
                "answer each of GET /bots/me/turns' `invitations`: POST "
                "/invitations/{id}/accept (or /decline); or refuse strangers at once with "
                'PUT /bots/me/policy {"accept": "nobody"} (or a list)')
        ok, what, fix = self.game(run, "invitation")
        return ok, f"accepted in {active.seen - run.started:.1f} s; {what}", fix

    def judge_move_limit(self) -> Verdict:
        ok, what, fix = self.game(self.runs["clock"], "move_limit")
        return ok, f"move_limit {CLOCK_LIMIT} s: {what}", fix

    def judge_decisions(self) -> Verdict:
        kinds = {"stand_or_beg": 0, "give_one_or_run": 0, "play": 0}
        clock = dict.fromkeys(kinds, 0)
        for run in self.runs.values():
            for e in self.bot_actions(run):
                if ok_status(e.service_status) and isinstance(e.body, dict):
                    kinds[decision_kind(e.body.get("action"))] += 1
            counted = {(t.seat, t.ply) for t in self.timeouts(run) if t.counted}
            for t in run.bot_timeouts():
                if (t["seat"], t["ply"]) in counted:
                    clock[decision_kind(t["action"])] += 1
        missed = [k for k, n in clock.items() if n]
        unseen = [k for k in kinds if not kinds[k] and not clock[k]]
        what = f"decided by the bot: {kinds}" + (
            f"; played by the clock: {clock}" if missed else "") + (
            f"; never met in these games: {', '.join(unseen)}" if unseen else "")
        if missed:
            self.notes["decisions"] = {"cause": "other", "kinds": set()}
        return not missed and bool(kinds["play"]), what, (
            f"the clock decided {', '.join(missed) or 'every move'} for the bot: answer every "
            "decision kind (stand/beg, give_one/run_pack, a card) with one of legal_actions")

    # --- reconnects ---------------------------------------------------------------------

    def reconnects(self, run: GameRun) -> list[tuple[str, float]]:
        """When the bot had to reconnect in this game: the restart, and (in the team game)
        the connection cut with an answer lost."""
        out = []
        if "restart_done" in run.marks:
            out.append((f"the restart (away {run.marks['restart_took']} s)",
                        run.marks["restart_done"]))
        lost = run.rules.get("lost_answer") if run.name == "team" else None
        if lost is not None and lost.fired is not None:
            out.append((f"the cut connection at seat {run.seat_of(lost.fired)}",
                        lost.fired.end or lost.fired.start))
        return out

    def _after(self, run: GameRun, note: str, events: list[tuple[str, float]]) -> Verdict:
        if not events:
            return False, "the game ended before the reconnect", "play the game"
        first = min(at for _, at in events)
        ok, what, fix = self.game(run, note, since=first)
        per = []
        for label, at in events:
            seats = Counter(run.seat_of(e) for e in self.bot_actions(run)
                            if e.start > at and ok_status(e.service_status))
            per.append(f"after {label}: actions applied per seat "
                       f"{dict(sorted((s, seats.get(s, 0)) for s in run.bot_seats))}")
            if ok and run.finished and not all(seats.get(s) for s in run.bot_seats):
                # a seat never played again, though the game went on: say so even when the
                # game ended before the clock played it
                in_turn = {e.turn for e in run.timeline.values() if e.seen > at}
                missing = sorted(s for s in run.bot_seats if not seats.get(s) and s in in_turn)
                if missing:
                    kind = "one_seat" if len(missing) < len(run.bot_seats) else "unseen"
                    ok, fix = False, TIMEOUT_CAUSE[kind][1]
                    self.notes[note] = {"cause": TIMEOUT_CAUSE[kind][0], "kinds": {kind},
                                        "real_play": CLOCKED}
                    what += f"; seat(s) {missing} never played after {label}"
        return ok, "; ".join(per) + f"; {what}", fix or (
            "treat a refused or reset connection as transient: wait a little and try again "
            "(the same key for an action); do not exit")

    def judge_restart(self) -> Verdict:
        run = self.runs["duel"]
        return self._after(run, "restart", self.reconnects(run))

    def judge_four_player_reconnect(self) -> Verdict:
        run = self.runs["team"]
        return self._after(run, "four_player_reconnect", self.reconnects(run))

    # --- the whole check ----------------------------------------------------------------

    def judge_illegal_action(self) -> Verdict:
        bad: list[str] = []
        games: set[str] = set()
        loops = 0
        for run in self.runs.values():
            acts = self.bot_actions(run)
            for e in acts:
                if e.injected or e.problem not in ("/problems/illegal-action",
                                                   "/problems/not-your-turn"):
                    continue
                action = e.body.get("action") if isinstance(e.body, dict) else None
                bad.append(f"{action!r} in {run.name}: {e.problem}")
                games.add(run.name)
                loops = max(loops, sum(1 for o in acts if o.seq > e.seq and o.body == e.body))
        if bad:
            self.notes["illegal_action"] = {"cause": "refused", "games": games,
                                            "real_play": REAL_PLAY["illegal_action"]}
        what = (f"{len(bad)} refused as illegal or out of turn" + (f": {bad[:4]}" if bad else "")
                + (f"; the same body re-sent up to {loops}x" if loops else ""))
        return not bad, what, ("send only one of the view's legal_actions, on your turn; after "
                               "a 409 read the view again instead of re-sending")

    def judge_idempotency_key(self) -> Verdict:
        acts = [e for run in self.runs.values() for e in self.bot_actions(run)]
        missing = [e for e in acts if not e.key or len(e.key) > 100]
        return not missing and bool(acts), (
            f"{len(acts) - len(missing)} of {len(acts)} actions carried an Idempotency-Key"), (
            "send an Idempotency-Key header (1-100 characters, new per decision) with every "
            "action, and the same one on its retries")

    def _rate(self, since: float, until: float, game: str | None = None) -> tuple[int, float]:
        """Requests in a window; with ``game``, only those about it and the turn polls that
        found nothing (a poll answered with another game's turn is the bot at work)."""
        def idle(e: Exchange) -> bool:
            if game is None or e.game == game:
                return True
            return e.path == "/bots/me/turns" and isinstance(e.answer, dict) and \
                not e.answer.get("games")
        down = [(a - 0.1, b + RESTART_SLACK_S) for a, b in self.restarts]
        n = sum(1 for e in self.log if since <= e.start <= until and idle(e)
                and not any(a <= e.start <= b for a, b in down))
        return n, n / max(0.001, until - since - _overlap(since, until, down))

    def judge_no_busy_loop(self) -> Verdict:
        windows = []
        if self.idle:
            windows.append(("no game at all", *self.idle))
        duel = self.runs["duel"].game_id if "duel" in self.runs else None
        if self.quiet_window:
            windows.append(("the opponent thinking", *self.quiet_window))
        parts, ok = [], True
        down = [(x - 0.1, y + RESTART_SLACK_S) for x, y in self.restarts]
        for label, a, b in windows:
            quiet = b - a - _overlap(a, b, down)
            if quiet < 1.0 and len(windows) > 1:
                parts.append(f"{label}: not measured (check-bot restarted the service)")
                continue
            n, rate = self._rate(a, b, duel if label.startswith("the opponent") else None)
            parts.append(f"{label}: {n} requests in {quiet:.1f} s ({rate:.1f}/s)")
            ok = ok and rate <= BUSY_RATE
        return ok and bool(windows), "; ".join(parts) or "no quiet time was measured", (
            f"while not in turn, long-poll (GET /bots/me/turns?timeout=, GET /games/{{id}}/turn"
            f"?timeout=, or ?wait= on the action) instead of polling: at most {BUSY_RATE:.0f} "
            "requests a second")

    def judge_requests_per_move(self) -> Verdict:
        moves = sum(1 for run in self.runs.values() for e in self.bot_actions(run)
                    if ok_status(e.service_status))
        total = len(self.log)
        per = total / moves if moves else float("inf")
        return per <= MAX_PER_MOVE, (f"{total} requests for {moves} moves: {per:.1f} per "
                                     f"move (the project's bots: 1.1-1.9)"), (
            f"at most {MAX_PER_MOVE:.0f} requests per move: act with ?wait= or long-poll "
            "for the next turn instead of polling")

    # --- causes ---------------------------------------------------------------------------

    def explain(self, results: list[Result]) -> list[Result]:
        """Give each failure its cause and what real play would do, and mark the failures
        another one explains: everything after the bot's process exited is explained by the
        situation whose answer it exited on; timeouts of one kind by the situation that tells
        that kind best."""
        by_name = {r.situation: r for r in results}
        failed = [r for r in results if not r.passed]
        for r in failed:
            note = self.notes.get(r.situation, {})
            r.cause = note.get("cause") or (
                "refused" if r.situation in PROTOCOL else
                "busy" if r.situation in ("no_busy_loop", "requests_per_move") else "other")
            r.real_play = note.get("real_play") or REAL_PLAY.get(r.situation, "")
        root = self._exit_root(by_name)
        if root is not None:
            for r in failed:
                if r is root:
                    continue
                if r.situation != "idempotency_key":  # a missing key is its own defect
                    r.explained_by = root.situation
        waits = [by_name.get(n) for n in ("rate_limited", "unavailable")]
        if all(r is not None and not r.passed and r.fix.startswith("wait at least Retry-After")
               for r in waits):
            waits[1].explained_by = "rate_limited"  # type: ignore[union-attr]  # one defect
        for cause, names in ROOTS.items():
            head = next((by_name[n] for n in names if n in by_name
                         and not by_name[n].passed and by_name[n].cause == cause), None)
            if head is None or head.explained_by:
                continue
            for r in failed:
                if r is head or r.explained_by:
                    continue
                if r.cause == cause or self._explained(r, head, cause):
                    r.explained_by = head.situation
        return results

    def _explained(self, r: Result, head: Result, cause: str) -> bool:
        """A failure whose evidence is all of ``cause`` (or, for illegal actions, all in the
        head's game) is explained by ``head``."""
        note = self.notes.get(r.situation, {})
        if r.situation == "illegal_action" and cause == "refused":
            games = {"house_rules_four_player": "house4", "house_rules": "clock"}
            return note.get("games") == {games.get(head.situation)}
        if r.situation == "decisions":
            return True
        kinds = note.get("kinds")
        return bool(kinds) and {TIMEOUT_CAUSE[k][0] for k in kinds} == {cause}

    def _exit_root(self, by_name: dict[str, Result]) -> Result | None:
        """The failure the bot's process exited on, marked as the cause of the exit."""
        if self.exited_at is None or self.bot is None:
            return None
        last = last_heard(self.log, self.exited_at)
        name, heard = self._situation_of(last)
        root = by_name.get(name) if name else None
        if root is None or root.passed:
            root = next((r for r in by_name.values() if not r.passed), None)
        if root is None:
            return None
        root.cause = "exited"
        root.real_play = "every game in progress is played by the clock to its end"
        status = self.bot.returncode
        root.what = (f"the bot's process exited (status {status}) "
                     f"{self.exited_at - (last.end or self.exited_at) if last else 0:.1f} s after "
                     f"{heard}; " + root.what)
        own = "" if root.fix in ("", "-", "play the game") else f"; {root.fix}"
        root.fix = (f"handle {heard.split(' to ')[0]} and go on: never exit on one answer, "
                    f"every game in play needs the process{own}")
        return root

    def _situation_of(self, last: Exchange | None) -> tuple[str | None, str]:
        if last is None:
            return None, "no answer"
        game = next((r.name for r in self.runs.values() if r.game_id == last.game), None)
        heard = (f"{last.status} {last.problem or ''}".strip() if last.status is not None
                 else f"a {last.outcome} connection") + f" to {last.method} {last.path}"
        injected = {"bank_delay": "time_bank"}.get(last.injected or "", last.injected)
        if injected in SITUATIONS:
            return injected, heard
        if last.outcome == "no-service":
            return ("four_player_reconnect" if game == "team" else "restart"), heard
        problem = last.problem or ""
        if problem.endswith(("version-conflict", "precondition-failed")):
            return "stale_version", heard
        if problem.endswith(("illegal-action", "not-your-turn")):
            return "illegal_action", heard
        if last.status == 429:
            return "rate_limited", heard
        if last.status == 503:
            return "unavailable", heard
        return {"duel": "two_player", "team": "four_player_two_seats", "clock": "house_rules",
                "house4": "house_rules_four_player", "bank": "time_bank",
                "invited": "invitation"}.get(game or "", "several_games"), heard
