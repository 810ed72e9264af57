"""Stopping a tournament, and entrants that leave it (issue 16): cancel, pause, resume,
withdrawal, the no-show rule and disqualification after too many timeouts.

**Statuses.** ``running`` → ``paused`` → ``running`` (any number of times) → ``finished``
(every game played) or ``cancelled`` (by the admin, from running or paused). Finished and
cancelled are final: pausing, resuming, cancelling (except a repeat) or withdrawing from
them is 409 ``/problems/tournament-over``. A repeated cancel, pause or resume is answered
with the tournament as it is (safe to retry).

**Cancel.** Every live game is *voided*: the game ends at once (game status ``finished``,
no winner, ``meta.ended = {"reason": "void"}``; the bots waiting on it hear it end and a
move on it is refused), its slot becomes ``void`` with no result, and it counts nowhere —
not in the standings, the matchpoints, the tournament ratings or the leaderboard.
Games not yet started become ``void`` too (no game id). Games that had finished stay as
they were played: their results are recorded (even when another table of their deal was
voided), their ratings taken in slot order as always. Nothing is scheduled again, the
tournament leaves the sweeper's set of open tournaments, its seed is shown, and every
shared deal of the tournament leaves ``{p}embargoed``: nothing of it is live any more, so
every game's record, view and result become public like any finished game's (a deal
left in the set would hide those games for good).

**Pause and resume.** While paused no game is started; games already live play on to
their end, with their move clocks running as usual (stopping a clock in the middle of a
game would leave bots that are playing facing refusals, and a paused tournament is a
tournament that stops *scheduling*, as an organizer stops calling the next round).
Finished games are recorded while paused, so standings stay current and embargoes end.
Resume starts games again up to ``parallel`` at once.

**Leaving: withdrawal, no-show, disqualification.** An entrant leaves the tournament

- by withdrawing itself (``POST /tournaments/{id}/entrants/{bot_id}/withdraw`` with its own
  token): ``withdrawn``;
- under the no-show rule (setting ``no_show``, seconds; default ``DEFAULT_NO_SHOW_S``, null
  turns it off): in one of its live games it is the entrant's turn and nothing has been
  played in that game for ``no_show`` seconds, or the game started ``no_show`` seconds ago
  or more and every one of the entrant's moves in it so far (at least one) was played by
  the move clock: ``no_show``;
- by disqualification (setting ``max_timeouts``, N; default null, off): once the move clock
  has played N of its moves over the whole tournament: ``disqualified``.

When an entrant leaves, each of its live games ends at once (``meta.ended = {"reason":
"forfeit", "by": [...]}``) and is *forfeited* by it, and so is every game of it not yet
played (a round robin's later rounds; a Swiss pairs only the entrants still in). Games it
finished before it left keep their results and ratings. A forfeited game is **won by the
opponent** (``won``, ``lost``, ``played`` and the match score count it; the match of a
pairing in which an entrant forfeited any game goes to the other entrant, 1 – 0, or to
nobody when both forfeited) — provided the opponent has made a move of its own somewhere
in the tournament (``shown``) or is still in it (``credited``, issue 23: an entrant whose
opponent left before its own first decision had nothing to decide and wins those
games); an opponent that has itself left without ever moving wins nothing. It **adds no
points, hands, timeouts or matchpoints to anyone** (the other tables of its deal are
compared among themselves), but it **is rated** (issue 23, docs/ratings.md): a rated loss
for the entrant that forfeited, in the tournament's ratings and on the leaderboard, and a
rated win for a credited opponent (an opponent not credited keeps its rating; a game
both forfeited moves no rating). Forfeiting is therefore never a way to protect a
rating.

**Absent from a finished game.** The same forfeit applies, whatever the settings, to a game
that came to its end while every decision of one side (at least one) was played by the move
clock: that side made no move of its own and forfeits the game (both sides: nobody wins it).
So a bot that never connects cannot win a game, rank above one that played, or gain a
leaderboard entry — even when the organizer turned the no-show rule off.

**Keys.** None of its own: who left (``out``), who has moved (``shown``) and the status
live in the tournament's document, a voided or forfeited game's ``ended`` in the game's
meta — each entity's own key, so nothing here needs a cross-slot transaction.

**Why it is safe to repeat.** All of it goes through ``Tournaments.advance`` (one optimistic
transaction per change, see ``service.arena.tournaments.service``): the tournament document says
who has left and whether it is cancelled; a game is ended (a compare-and-set on the game,
the first step) before the document that records it (the second). A game's own meta
(``ended``) is the truth about how it ended, so a process killed between the two steps
leaves a game that the next pass (at once, or the sweeper's within seconds) records as
void or forfeit — and a forfeit game names who left, which puts that entrant out again
if the document lost it.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any, Protocol

import redis

from service.arena.core.problems import Problem
from service.arena.core.status import ACTIVE, FINISHED
from service.arena.games.ending import ABSENT, absent_teams, moved_teams, own_moves
from service.engine import team_of
from service.storage.store import Game, Store

RUNNING, PAUSED, CANCELLED = "running", "paused", "cancelled"
PENDING, LIVE, DONE, VOID = "pending", "live", "done", "void"
WITHDRAWN, NO_SHOW, DISQUALIFIED = "withdrawn", "no_show", "disqualified"
DEFAULT_NO_SHOW_S = 600.0  # ten minutes: far more than any move limit the contract allows
ATTEMPTS = 200


class TournamentHost(Protocol):
    """What these steps use of ``service.arena.tournaments.service.Tournaments`` (which imports
    this module, so only its shape is named here): the store, a tournament's key and the
    open set, and advancing and showing a tournament."""

    store: Store
    r: redis.Redis
    arena: Any

    @property
    def running_key(self) -> str: ...

    def key(self, tid: str) -> str: ...

    def advance(self, tid: str) -> int: ...

    def detail(self, tid: str) -> dict[str, Any]: ...


def steps(doc: dict[str, Any]) -> bool:
    """Whether ``advance`` still has work on this document: it is open (running or paused),
    or cancelled and not yet closed out (``closing``)."""
    return doc["status"] in (RUNNING, PAUSED) or bool(doc.get("closing"))


def schedules(doc: dict[str, Any]) -> bool:
    """Whether new games may start."""
    return doc["status"] == RUNNING


def out_of(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Entrants that left: bot id → {"reason", "at" (unix seconds)}."""
    return doc.setdefault("out", {})


def leave(doc: dict[str, Any], bot: str, reason: str, now: float) -> None:
    """``bot`` leaves (if still in): why, when, and how many rounds were complete then (a
    bye of a later round is not credited to it)."""
    out_of(doc).setdefault(bot, {"reason": reason, "at": int(now),
                                 "rounds_done": len(doc["history"])})


def entrants_out(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The entrants as shown: each with its status (``in`` or why it left) and when."""
    out = doc.get("out") or {}
    return [{**e, "status": out.get(e["bot_id"], {}).get("reason", "in"),
             "left": out.get(e["bot_id"], {}).get("at"),
             "note": out.get(e["bot_id"], {}).get("note")} for e in doc["entrants"]]


# --- a game's own moves (``service.arena.games.ending``, where a game's end is judged) ------


def shown(doc: dict[str, Any]) -> set[str]:
    """Entrants that have made a move of their own in the tournament: seen in a live game
    (``doc["shown"]``) or in a recorded one (its result's ``moved``). Only they are credited
    with a forfeit's win, so an entrant that never moved wins nothing, even when its
    opponents left before it had a turn."""
    out = set(doc.get("shown") or ())
    for rnd in doc["rounds"]:
        for slot in rnd["slots"]:
            res = slot["result"]
            for team, moved in enumerate((res or {}).get("moved") or ()):
                if moved:
                    out.add(slot["teams"][team])
    return out


def credited(doc: dict[str, Any]) -> set[str]:
    """Entrants credited with a forfeit's win: those that have made a move of their own
    (``shown``), and those still in the tournament (issue 23). An entrant whose opponent
    left before its own first decision — disqualified, withdrawn, or a no-show on a turn
    that came first — had nothing to decide yet, and wins those games; only an entrant
    that has left without ever moving is never credited (so of two bots that never play,
    the one the no-show rule puts out second still wins nothing once it is out too)."""
    out = out_of(doc)
    return shown(doc) | {e["bot_id"] for e in doc["entrants"] if e["bot_id"] not in out}


def credit(doc: dict[str, Any], rounds: list[dict[str, Any]]) -> None:
    """A shown tournament's games (``_detail``): a forfeit's winner that is not credited
    (see ``credited``) is shown as no winner."""
    who = credited(doc)
    for rnd in rounds:
        for game in rnd["games"]:
            if game.get("forfeit") and game["winner"] not in who:
                game["winner"] = None


def team_bots(game: Game) -> list[str]:
    seats = game.seats
    return [seats[0] or "", seats[1] or ""]


def forfeit_result(teams: list[int], game: Game | None, base: dict[str, Any] | None
                   ) -> dict[str, Any]:
    """The result of a game forfeited by ``teams`` (one, or both: nobody wins it). With the
    game (it was live or it finished) its scores and timeouts as they stood, for the record;
    they count nowhere."""
    winner = None if len(teams) == 2 else 1 - teams[0]
    if base is None:
        base = {"scores": None, "hands_won": None, "timeouts": None, "hands": 0}
    return {**base, "winner": winner, "forfeit": sorted(teams)}


# --- ending a live game (the first step) -----------------------------------------------------


def end_game(t: TournamentHost, game: Game, ended: dict[str, Any]) -> Game | None:
    """End a live game now through the arena's one door (``Ending.end``: ``ended``'s
    reason, the bots ``by`` that forfeited, ``why``): status ``finished`` whatever the
    position, no deadline, nobody's turn; waiters hear it, webhook bots are told, the
    after-finish hooks run. None if it had finished meanwhile (or is gone)."""
    return t.arena.ending.end(game, ended["reason"], forfeit_by=ended.get("by") or (),
                              why=ended.get("why"))


# --- the pass (called at the start of every ``Tournaments._step``) --------------------------


def before_step(t: TournamentHost, doc: dict[str, Any], now: float | None = None) -> bool:
    """What ``advance`` does first: who has left (no-show, disqualification; a forfeit game
    naming an entrant still in), ending the games of those who left (forfeit) or of a
    cancelled tournament (void), forfeiting their unplayed games, voiding a cancelled
    tournament's unplayed games. True when the document changed."""
    now = time.time() if now is None else now
    settings = doc["settings"]
    out = out_of(doc)
    changed = False
    live: list[tuple[dict[str, Any], Game]] = []
    for rnd in doc["rounds"]:
        for slot in rnd["slots"]:
            if slot["status"] == LIVE:
                game = t.store.get_game(slot["game"])
                if game is not None:
                    live.append((slot, game))
    # a forfeit game is the truth: whoever it names has left (the document may have lost it)
    for _slot, game in live:
        ended = game.meta.get("ended") or {}
        if ended.get("why") == ABSENT:  # played to its end: nobody left (``standings``)
            continue
        for bot in ended.get("by", ()):
            if bot not in out:
                leave(doc, bot, ended.get("why", WITHDRAWN), now)
                changed = True
    if doc["status"] in (RUNNING, PAUSED):
        changed |= _judge_absence(doc, live, settings, now)
        seen = set(doc.get("shown") or ())
        for slot, game in live:
            if game.log and not set(slot["entrants"]) <= seen:
                for team, moved in enumerate(moved_teams(game)):
                    if moved and slot["teams"][team] not in seen:
                        seen.add(slot["teams"][team])
                        changed = True
        doc["shown"] = sorted(seen)
    cancelled = doc["status"] == CANCELLED
    for slot, game in live:
        if game.status == FINISHED:
            continue
        if cancelled:
            end_game(t, game, {"reason": "void"})
            continue
        gone = [b for b in slot["entrants"] if b in out]
        if gone:
            end_game(t, game, {"reason": "forfeit", "by": gone, "why": out[gone[0]]["reason"]})
    for rnd in doc["rounds"]:
        for slot in rnd["slots"]:
            if slot["status"] != PENDING:
                continue
            if cancelled:
                slot["status"] = VOID
                changed = True
                continue
            gone = [b for b in slot["entrants"] if b in out]
            if gone:
                slot["status"] = DONE
                slot["result"] = forfeit_result(
                    [slot["teams"].index(b) for b in gone], None, None)
                changed = True
    return changed


def _judge_absence(doc: dict[str, Any], live: list[tuple[dict[str, Any], Game]],
                   settings: dict[str, Any], now: float) -> bool:
    out = out_of(doc)
    changed = False
    limit = settings.get("max_timeouts")
    if limit:
        charged: dict[str, int] = {}
        for rnd in doc["rounds"]:
            for slot in rnd["slots"]:
                res = slot["result"]
                if slot["status"] == DONE and res and res.get("timeouts"):
                    for team, bot in enumerate(slot["teams"]):
                        charged[bot] = charged.get(bot, 0) + res["timeouts"][team]
        for slot, game in live:
            if slot["status"] == LIVE and slot.get("result") is None:
                for t in game.meta.get("timeouts", ()):
                    bot = slot["teams"][team_of(t["seat"])]
                    charged[bot] = charged.get(bot, 0) + 1
        for bot, n in sorted(charged.items()):
            if n >= limit and bot not in out:
                leave(doc, bot, DISQUALIFIED, now)
                changed = True
    wait = settings.get("no_show")
    if wait:
        for slot, game in live:
            if game.status != ACTIVE:
                continue
            teams = slot["teams"]
            in_turn = teams[team_of(game.state.turn)]
            stalled = game.updated is not None and now - game.updated >= wait
            if stalled and in_turn not in out:
                leave(doc, in_turn, NO_SHOW, now)
                changed = True
            started = float(game.meta.get("created", now))
            if now - started < wait or not game.meta.get("timeouts"):
                continue
            for team in absent_teams(game):
                if teams[team] not in out:
                    leave(doc, teams[team], NO_SHOW, now)
                    changed = True
    return changed


def close_out(doc: dict[str, Any]) -> list[str]:
    """A cancelled tournament's last pass: every shared deal's embargo id (all leave the
    set), and the document marked closed."""
    from service.arena.tournaments.pairing import embargo_id, tables_of

    doc["closing"] = False
    ids = set()
    for rnd in doc["rounds"]:
        for slot in rnd["slots"]:
            if len(tables_of(rnd, slot)) > 1:
                ids.add(embargo_id(doc, slot))
    return sorted(ids)


# --- the organizer's and the entrant's commands ----------------------------------------------


def _change(t: TournamentHost, tid: str, change: Any) -> dict[str, Any]:
    """Apply ``change(doc)`` (which returns False for "nothing to do") in one optimistic
    transaction on the document, then ``advance`` (which ends games, records, schedules)."""
    for _ in range(ATTEMPTS):
        try:
            with t.r.pipeline(transaction=True) as pipe:
                pipe.watch(t.key(tid))
                raw = pipe.get(t.key(tid))
                if raw is None:
                    raise Problem("not-found", "no such tournament")
                doc = json.loads(raw)
                if not change(doc):
                    pipe.unwatch()
                    break
                pipe.multi()
                pipe.set(t.key(tid), json.dumps(doc, separators=(",", ":")))
                pipe.sadd(t.running_key, tid)
                pipe.execute()
                break
        except redis.WatchError:
            time.sleep(random.uniform(0.001, 0.01))
    else:
        raise Problem("service-unavailable", "too much contention; retry",
                      headers={"Retry-After": "1"})
    t.advance(tid)
    return t.detail(tid)


def _over(doc: dict[str, Any], doing: str) -> Problem:
    return Problem("tournament-over", f"the tournament is {doc['status']}: nothing to {doing}")


def cancel(t: TournamentHost, tid: str, reason: str | None = None) -> dict[str, Any]:
    """Cancel (``reason``: why, shown with it, written in the same change)."""
    def change(doc: dict[str, Any]) -> bool:
        if doc["status"] == CANCELLED:
            return False
        if doc["status"] not in (RUNNING, PAUSED):
            raise _over(doc, "cancel")
        doc["status"] = CANCELLED
        doc["finished"] = int(time.time())
        doc["closing"] = True
        if reason is not None:
            doc["reason"] = reason
        return True
    return _change(t, tid, change)


def pause(t: TournamentHost, tid: str) -> dict[str, Any]:
    def change(doc: dict[str, Any]) -> bool:
        if doc["status"] == PAUSED:
            return False
        if doc["status"] != RUNNING:
            raise _over(doc, "pause")
        doc["status"] = PAUSED
        return True
    return _change(t, tid, change)


def resume(t: TournamentHost, tid: str) -> dict[str, Any]:
    def change(doc: dict[str, Any]) -> bool:
        if doc["status"] == RUNNING:
            return False
        if doc["status"] != PAUSED:
            raise _over(doc, "resume")
        doc["status"] = RUNNING
        return True
    return _change(t, tid, change)


def withdraw(t: TournamentHost, tid: str, bot_id: str, caller: str) -> dict[str, Any]:
    """The entrant ``bot_id`` leaves, asked with its own token (``caller``)."""
    def change(doc: dict[str, Any]) -> bool:
        if bot_id not in {e["bot_id"] for e in doc["entrants"]}:
            raise Problem("not-found", f"bot {bot_id} is not an entrant of this tournament")
        if caller != bot_id:
            raise Problem("forbidden-entrant", "only the entrant itself (its own token) may "
                          "withdraw it")
        if bot_id in out_of(doc):
            return False
        if doc["status"] not in (RUNNING, PAUSED):
            raise _over(doc, "withdraw from")
        leave(doc, bot_id, WITHDRAWN, time.time())
        return True
    return _change(t, tid, change)


__all__ = ["CANCELLED", "DEFAULT_NO_SHOW_S", "PAUSED", "VOID", "absent_teams", "before_step",
           "cancel", "close_out", "entrants_out", "moved_teams", "own_moves", "pause",
           "resume", "schedules", "steps", "withdraw"]
