"""The arena, a fourth format (pure): a fixed duration in which whoever is free is paired
at once with a free entrant near it in the standings, as Lichess's arena tournaments are.

**Pairing.** ``step`` runs inside ``Tournaments.advance`` (one optimistic transaction, as
every change of a tournament): each time a game finishes, an entrant enters late, or the
sweeper passes. The free entrants (in the tournament, not in a live or pending game) are
ranked by the arena standings (score, then games won, then the tournament rating); the
best free one is paired with the nearest free one below it of which neither was the
other's last opponent (no immediate rematch), and so on down. Two entrants whose only
free candidate is each other wait for another game to finish — unless they are the only
entrants still in, or both have waited ``REMATCH_AFTER_S`` (then they meet again rather
than sit idle: an arena's score is games won). Each pairing is one game with a
deal of its own (``duplicate`` off: there are no tables to share a deal), teams taken in
turn: the entrant that had team 0 less often takes it.

**The clock.** ``ends_at`` = the start + ``duration``. From then on nobody is paired;
games under way play to their end (and count); once none is live the tournament is
``finished``. An entrant may enter until ``ends_at`` (``registration.enter``) and leave at
any time (withdrawing: its live game is forfeited, as in every format).

**Scoring** (stated in docs/tournaments.md): a win scores 2, a loss 0 (All Fours has no
drawn game); a **streak** — after two wins in a row, every further win scores 4 until the
entrant's next loss — rewards winning consistently over playing many games, as Lichess's
arena does. A forfeit counts as a loss for who forfeited and as a win (2, or 4 on a
streak) for a credited opponent. Berserk (halving one's own clock for an extra point) is
not offered: bots answer in milliseconds, so it would be a free point. Ranking: score,
then games won, then fewer games played (the same score from fewer games), then the
tournament rating ordinal, then bot id.
"""

from __future__ import annotations

import time
from typing import Any

from service.arena.core import ratings
from service.arena.tournaments import control
from service.arena.tournaments.pairing import DONE, LIVE, PENDING, deal_seed

ARENA = "arena"
DEFAULT_PARALLEL = 256  # every free pair plays at once: an arena never waits for a table
WIN, STREAK_WIN = 2, 4
# Two free entrants that met last may meet again once both have waited this long with
# nobody else free: an arena is scored by games won, so a bot kept waiting loses what the
# rule would protect; the clock loop re-checks running arenas (``ARENA_TICK_S``) so the
# wait ends on time without a game finishing.
REMATCH_AFTER_S = 1.0
ARENA_TICK_S = 0.5
STREAK_AFTER = 2  # wins in a row after which a win scores STREAK_WIN


def settle(settings: dict[str, Any], body: dict[str, Any]) -> None:
    """An arena's settings as played: its duration, one game per pairing, each its own
    deal (no table shares one), every free pair at once unless ``parallel`` says less."""
    if settings["format"] != ARENA:
        return
    settings["duration"] = body["duration"]
    settings["games_per_pairing"] = 1
    settings["duplicate"] = False
    settings["trusted"] = False
    settings["rounds"] = 1
    if "parallel" not in body:
        settings["parallel"] = DEFAULT_PARALLEL


def begin(doc: dict[str, Any], now: float | None = None) -> None:
    """An arena's document at its start: one round whose games are added as entrants come
    free, and its clock."""
    now = time.time() if now is None else now
    doc["rounds"] = [{"round": 1, "byes": [], "slots": []}]
    doc["ends_at"] = int(now + doc["settings"]["duration"])


def _slots(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for r in doc["rounds"] for s in r["slots"]]


def busy(doc: dict[str, Any]) -> set[str]:
    """Entrants in a live or pending game."""
    return {b for s in _slots(doc) if s["status"] in (LIVE, PENDING) for b in s["entrants"]}


def last_opponents(doc: dict[str, Any]) -> dict[str, str]:
    """Each entrant's opponent in its latest game."""
    last: dict[str, str] = {}
    for s in _slots(doc):
        a, b = s["entrants"]
        last[a], last[b] = b, a
    return last


def scores(doc: dict[str, Any], credited: set[str]) -> dict[str, dict[str, Any]]:
    """Per entrant: arena score, games won, played, current streak of wins, from the
    recorded games in slot order (see the module docstring)."""
    out = {e["bot_id"]: {"score": 0, "won": 0, "played": 0, "streak": 0}
           for e in doc["entrants"]}
    for s in _slots(doc):
        res = s["result"]
        if s["status"] != DONE or res is None:
            continue
        forfeit = res.get("forfeit") or ()
        for team, bot in enumerate(s["teams"]):
            row = out[bot]
            row["played"] += 1
            won = res["winner"] == team and (not forfeit or bot in credited)
            if won:
                row["won"] += 1
                row["streak"] += 1
                row["score"] += STREAK_WIN if row["streak"] > STREAK_AFTER else WIN
            else:
                row["streak"] = 0
    return out


def ranked(doc: dict[str, Any], credited: set[str]) -> list[str]:
    """Entrants by the arena ranking (see the module docstring)."""
    table = scores(doc, credited)
    rates = doc["ratings"]
    return sorted(table, key=lambda b: (-table[b]["score"], -table[b]["won"],
                                        table[b]["played"],
                                        -ratings.shown(rates.get(b) or ratings.initial())
                                        ["ordinal"], b))


def pairs_for(order: list[str], free: set[str], last: dict[str, str], alone: bool,
              patient: set[str] = frozenset()) -> list[tuple[str, str]]:
    """Pair the free entrants, best first, each with the nearest free one below it of
    which neither was the other's last opponent; a rematch only when the two are the
    only ones left (``alone``) or both have waited ``REMATCH_AFTER_S`` (``patient``)."""
    pool = [b for b in order if b in free]
    pairs = []
    while len(pool) >= 2:
        first = pool.pop(0)
        partner = next((b for b in pool if last.get(first) != b and last.get(b) != first),
                       None)
        if partner is None and (alone or first in patient):
            partner = next((b for b in pool if alone or b in patient), None)
        if partner is None:
            continue  # waits for the next game to finish
        pool.remove(partner)
        pairs.append((first, partner))
    return pairs


def step(doc: dict[str, Any], now: float, max_games: int | None = None) -> bool:
    """Pair the free entrants while the clock runs; finish once it has run out and no
    game is live. True when the document changed. ``doc["game_cap"]`` (or ``max_games``)
    bounds the games the arena may create (the size limit, a stranger's quota)."""
    if doc["status"] not in (control.RUNNING, control.PAUSED):
        return False
    slots = _slots(doc)
    open_games = any(s["status"] in (LIVE, PENDING) for s in slots)
    if now >= doc["ends_at"]:  # paused or not: the clock decides the end
        if open_games:
            return False
        doc["status"] = "finished"
        doc["finished"] = int(now)
        doc["history"] = [{"round": 1, "ratings": {b: ratings.shown(r)
                                                   for b, r in doc["ratings"].items()}}]
        return True
    if doc["status"] != control.RUNNING:
        return False
    cap = min(x for x in (max_games, doc.get("game_cap"), 1000) if x is not None)
    out = control.out_of(doc)
    still = [e["bot_id"] for e in doc["entrants"] if e["bot_id"] not in out]
    free = set(still) - busy(doc)
    if len(free) < 2 or len(slots) >= cap:
        return False
    waiting = doc.setdefault("arena_free", {})  # entrant -> when it came free
    changed = False
    for b in list(waiting):
        if b not in free:
            del waiting[b]
            changed = True
    for b in free - set(waiting):
        waiting[b] = round(now, 3)
        changed = True
    patient = {b for b in free if now - waiting[b] >= REMATCH_AFTER_S}
    order = ranked(doc, control.credited(doc))
    pairs = pairs_for(order, free, last_opponents(doc), alone=len(still) == 2,
                      patient=patient)
    if not pairs:
        return changed
    rnd = doc["rounds"][0]
    team0: dict[str, int] = {}
    for s in slots:
        team0[s["teams"][0]] = team0.get(s["teams"][0], 0) + 1
    for a, b in pairs[:cap - len(slots)]:
        waiting.pop(a, None)
        waiting.pop(b, None)
        k = len(rnd["slots"])
        teams = [a, b] if team0.get(a, 0) <= team0.get(b, 0) else [b, a]
        team0[teams[0]] = team0.get(teams[0], 0) + 1
        rnd["slots"].append({
            "round": 1, "pairing": k, "entrants": [a, b], "deal": k,
            "seed": deal_seed(doc["settings"]["seed"], 1, k), "teams": teams,
            "game": None, "status": PENDING, "result": None, "recorded": None,
            "slot": k, "paired_at": round(now, 3),
        })
    return True


def standings(doc: dict[str, Any], rows: dict[str, dict[str, Any]],
              credited: set[str]) -> list[dict[str, Any]]:
    """The arena's table: ``standings``' rows (games, points, ratings) with the arena
    score and streak, in the arena ranking."""
    table = scores(doc, credited)
    out = []
    for bot in ranked(doc, credited):
        row = rows[bot]
        row["score"] = float(table[bot]["score"])
        row["streak"] = table[bot]["streak"]
        out.append(row)
    for i, row in enumerate(out, 1):
        row["rank"] = i
    return out


def join(doc: dict[str, Any], bot: str, name: str, owner: str) -> None:
    """A late entrant of a running arena."""
    doc["entrants"].append({"bot_id": bot, "bot_name": name, "owner": owner,
                            "joined": int(time.time())})
    doc["ratings"][bot] = ratings.initial()
