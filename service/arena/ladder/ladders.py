"""The ladder: bots queue for rated games with no organizer; a matchmaker seats them.

**What a bot sees.** A ladder is a table size (2 or 4 players) with a set of rules. The
service always runs ``2p`` and ``4p`` with the default rules; an operator declares more in
``ARENA_LADDERS`` (JSON: ``{"name": {"players": 2, "variants": {...}, "move_limit": 5}}``).
A bot joins (``POST /ladders/{name}/entry``, optionally for a number of games), leaves at
any time (``DELETE``; a game it is in is played out), and reads its entry: ``waiting``,
``matched`` (its game is being created), ``playing`` (``game_id``), ``paused`` (with a
``reason``), ``validating`` or ``not_admitted`` (a bot's first entry plays a validation
game against the house first: ``service.arena.ladder.validation``) or ``off``. As in
tournaments, each side of a game is one bot: in a 4-player
ladder game a bot holds both seats of its team (0 and 2, or 1 and 3). Ladder games are
ordinary games with a move limit (``ARENA_LADDER_MOVE_LIMIT`` unless the ladder sets one).

**The matching rule** (``pair_up``, pure). Waiting bots are taken longest-waiting first.
Each is matched with the waiting bot whose rating ordinal (mu - 3 sigma) is nearest to
its own, among those within its *window*: ``WINDOW`` ordinal points, plus ``WIDEN_PER_S``
for every second the longer-waiting of the two has waited (so any two waiting bots meet
after a while). A bot is never matched with itself nor with a bot of its own owner
(``service.arena.accounts.owners``: a farm of one author's accounts gains nothing here), and a
pair whose last ladder game was against each other is matched again only once both have
waited ``ARENA_LADDER_REMATCH_WAIT`` seconds with no one else in reach (no immediate
rematches while anyone else could play). Which bot takes team 0 is drawn at random.

**Keys.** Every key of a ladder shares one hash tag, ``{p}{ladder:<name>}`` (Redis
Cluster puts them in one slot, so each step below is one script there too):
``:entries`` (hash bot -> JSON entry), ``:on`` (sorted set: the bots not off, by when
they joined — what the matchmaker and the queue read), ``:matches`` (hash match id ->
JSON: sides, seed, when claimed, the game once created), ``:ratings`` (hash bot -> JSON
mu, sigma, games, wins, form), ``:results`` (list, the newest ``RESULTS_KEPT`` rated
games in rating order, to replay) and ``:history:<bot>`` (list, newest first: the bot's
games with its rating before and after).

**Exactly once, across processes.** Every change of a ladder is optimistic: read, decide,
then one Lua script (``CAS``) applies the writes only if every hash field the decision
read (a bot's entry, a match, a rating) still holds what was read — else nothing is
written and the change is decided again from fresh reads. Per field, not per key, so a
bot joining does not void a claim of two others. Three steps:

1. *Claim* (matchmaker): waiting bots become ``matched`` in a new match, atomically, so
   no bot is claimed twice and a bot in a match is never waiting.
2. *Create*: the claimer creates the game (the game's own keys: another slot, hence a
   second step), then *binds* it (a transaction: the match gets the game id, its bots
   become ``playing``). The game's id is derived from the ladder and the match
   (``Store.derived_id``) and the game is created only if absent, so "the game of match
   m" exists at most once, whoever creates it and however late. A process that dies
   between claim and bind leaves an unbound match: after ``CLAIM_LEASE_S`` any
   matchmaker does step 2 for it (creating the game, or finding the one the dead
   process made) and binds it.
3. *Rate*: a finished game is settled by a transaction that deletes its match, applies
   the result to both ratings and re-queues (or stops) both bots. Its match exists
   until then, so the result counts exactly once whichever processes see the game end —
   through ``Arena.on_finish`` (the process's after-finish loop, off the request that
   ended it), or the matchmaker's pass over bound matches every ``REPAIR_S``, which
   repairs a process killed after the game ended. Nothing about a ladder lives outside
   Redis: a restarted service carries on. Ratings take the games in the order they were
   settled (``:results``); a bot is in one game of a ladder at a time, so replaying
   ``:results`` in order gives its ratings.

The game (step 2) is the one write outside the ladder's slot. A match is never
cancelled, only bound and then settled, so a claimed bot is matched again only after its
match's one game has been rated: a stalled claimer that wakes up after another process
did its step 2 finds the game there and the match bound, and makes nothing. So no bot is
ever in two games of a ladder at once; a bot on two different ladders plays one game on
each.

**What is rated** (issue 23, docs/ratings.md, ``ladder_plan``): a side whose every decision
(at least one) the move clock played never made one of its own and forfeits — a rated loss
whatever the final score; both sides so, or two bots of one owner (never matched anyway),
or a chosen seed: not rated (the bots' histories say ``unrated``; ``:results`` holds rated
games only). The *k*-th game against one owner within a day moves a rating by 1/*k*
(``ratings.rate_published``); a bot is provisional, unranked in the standings, until it has
``ARENA_PROVISIONAL_GAMES`` rated games against ``ARENA_PROVISIONAL_OWNERS`` owners. Every
game's seed is random and committed to (``service.arena.core.deals``).

A bot whose timeouts in one ladder game reach ``ARENA_LADDER_PAUSE_TIMEOUTS`` is paused
(checked every ``REPAIR_S`` while the game is live, and when it ends): it is matched no more,
its entry says why, and joining again resumes it. Paused, it is absent by these rules, so
its live game ends at that pass as its forfeit (``service.arena.ladder.settling``, through
the arena's one door for every end, ``service.arena.games.ending``): a rated loss for it,
a win for its opponent, who waits for the absent bot's timeouts that pause it and then
at most ``REPAIR_S``, not for the clock to play out the rest of the game; the
game's view, record and both bots' histories say the same (``ended``: forfeit, paused).

**Modules.** This one: the ladders a service runs, a bot's entry (join, leave, forfeit,
read) and the reading of queues, standings and histories; ``tx``: entry states, limits and
the compare-and-set; ``matching``: the rule and the claim/create/bind steps; ``settling``:
rating, pausing and ending an absent bot's game; ``validation``: a first entry's
validation game.
"""

from __future__ import annotations

import json
import logging
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any

import redis

from service.arena.core import ratings
from service.arena.core.clock import MAX_TIME_BANK_S
from service.arena.core.loop import BackgroundLoop
from service.arena.core.problems import Problem
from service.arena.core.status import FINISHED
from service.arena.games.commands import Arena
from service.arena.games.ending import FORFEIT
from service.arena.ladder.matching import Matching, ordinal, pair_up
from service.arena.ladder.settling import Settling, ladder_plan, timeouts_by_bot
from service.arena.ladder.tx import (
    ATTEMPTS,
    CAS,
    CLAIM_LEASE_S,
    FORM,
    MATCHED,
    OFF,
    PASS_S,
    PAUSED,
    PLAYING,
    REPAIR_S,
    RESULTS_KEPT,
    STATES,
    WAITING,
    WIDEN_PER_S,
    WINDOW,
    Tx,
    _dump,
)
from service.arena.ladder.validation import NOT_ADMITTED, VALIDATING, Validation
from service.engine import InvalidVariants, Variants

log = logging.getLogger(__name__)

NAME_RE = r"[a-z0-9][a-z0-9_-]{0,31}"  # schemas.LADDER_NAME_RE, unanchored

DEFAULTS: dict[str, Any] = {
    "ARENA_LADDERS": "",  # JSON: more ladders, {"name": {"players", "variants", "move_limit"}}
    "ARENA_LADDER_MOVE_LIMIT": 10.0,  # seconds a decision in a ladder game
    "ARENA_LADDER_TIME_BANK": 30.0,  # seconds of time bank a seat (service.arena.core.clock)
    "ARENA_LADDER_PAUSE_TIMEOUTS": 3,  # timeouts in one game that pause a bot
    "ARENA_LADDER_REMATCH_WAIT": 3.0,  # seconds both must wait before a rematch
    "ARENA_LADDER_VALIDATION": 1,  # a first entry plays a validation game (arena.validation)
}


@dataclass
class Ladder:
    name: str
    players: int
    variants: dict[str, Any] = field(default_factory=dict)
    move_limit: float = 10.0
    time_bank: float = 30.0

    def summary(self) -> dict[str, Any]:
        return {"name": self.name, "players": self.players,
                "variants": Variants.from_dict(self.variants).to_dict(),
                "move_limit": self.move_limit, "time_bank": self.time_bank}


def declared(config: dict[str, Any]) -> dict[str, Ladder]:
    """The ladders a service runs: ``2p`` and ``4p`` (default rules) and the operator's."""
    limit = float(config.get("ARENA_LADDER_MOVE_LIMIT", DEFAULTS["ARENA_LADDER_MOVE_LIMIT"]))
    bank = float(config.get("ARENA_LADDER_TIME_BANK", DEFAULTS["ARENA_LADDER_TIME_BANK"]))
    out = {"2p": Ladder("2p", 2, {}, limit, bank), "4p": Ladder("4p", 4, {}, limit, bank)}
    raw = config.get("ARENA_LADDERS") or ""
    extra = json.loads(raw) if isinstance(raw, str) and raw.strip() else (raw or {})
    for name, spec in extra.items():
        if not re.fullmatch(NAME_RE, name):
            raise ValueError(f"ladder {name!r}: a name is 1-32 of a-z, 0-9, _ and -, "
                             f"starting with a letter or digit")
        players = int(spec.get("players", 2))
        if players not in (2, 4):
            raise ValueError(f"ladder {name}: players must be 2 or 4")
        try:
            variants = Variants.from_dict(spec.get("variants") or {}).changed()
        except InvalidVariants as exc:
            raise ValueError(f"ladder {name}: {exc}") from None
        spec_bank = float(spec.get("time_bank", bank))
        if not 0 <= spec_bank <= MAX_TIME_BANK_S:
            raise ValueError(f"ladder {name}: time_bank must be 0 to {MAX_TIME_BANK_S:g} s")
        out[name] = Ladder(name, players, variants, float(spec.get("move_limit") or limit),
                           spec_bank)
    return out


# --- the service ---------------------------------------------------------------------------


class Ladders(Matching, Settling):
    """Ladder use cases over the arena's store (see the module docstring)."""

    def __init__(self, arena: Arena, config: dict[str, Any] | None = None) -> None:
        config = config or {}
        self.arena = arena
        self.store = arena.store
        self.r: redis.Redis = arena.store.r
        self.p = arena.store.p
        self.ladders = declared(config)
        self.pause_timeouts = int(config.get("ARENA_LADDER_PAUSE_TIMEOUTS",
                                             DEFAULTS["ARENA_LADDER_PAUSE_TIMEOUTS"]))
        self.rematch_wait = float(config.get("ARENA_LADDER_REMATCH_WAIT",
                                             DEFAULTS["ARENA_LADDER_REMATCH_WAIT"]))
        self._cas = self.r.register_script(CAS)
        arena.on_finish.append(self._game_finished)
        self.validation = Validation(self, config)  # a first entry's validation game
        self.provisional_games = int(config.get("ARENA_PROVISIONAL_GAMES",
                                                ratings.DEFAULTS["ARENA_PROVISIONAL_GAMES"]))
        self.provisional_owners = int(config.get(
            "ARENA_PROVISIONAL_OWNERS", ratings.DEFAULTS["ARENA_PROVISIONAL_OWNERS"]))
        self.standing = ratings.Standing.from_config(config)

    def standings_of(self, owners: dict[str, str], at: float) -> dict[str, float]:
        """Each owner's weight in a game at ``at`` (``ratings.Standing``), by owner id."""
        created = self.arena.owners.created_of(list(owners.values()))
        return {o: self.standing.of(created.get(o), at) for o in set(owners.values())}

    def owners(self, bots: list[str]) -> dict[str, str]:
        """Each bot's owner (``ratings.owner_of``), from the bot hashes."""
        batch = self.r.pipeline(transaction=False)
        for b in bots:
            batch.hget(self.store.keys.bot(b), "owner")
        return {b: ratings.owner_of({"owner": o}, b)
                for b, o in zip(bots, batch.execute(), strict=True)} if bots else {}

    # --- keys: one hash tag per ladder ------------------------------------------------------

    def _tag(self, name: str) -> str:
        return f"{self.p}{{ladder:{name}}}"

    def k_entries(self, name: str) -> str:
        return f"{self._tag(name)}:entries"

    def k_on(self, name: str) -> str:
        """Sorted set of the bots on the ladder (any state but off), by when they joined:
        what the matchmaker and the queue read, however many bots ever joined."""
        return f"{self._tag(name)}:on"

    def _put(self, tx: Tx, name: str, bot: str, entry: dict[str, Any]) -> None:
        """Write a bot's entry and keep ``k_on`` in step with it."""
        tx.hset(self.k_entries(name), bot, _dump(entry))
        if entry["state"] in (OFF, NOT_ADMITTED):
            tx.zrem(self.k_on(name), bot)
        else:
            tx.zadd(self.k_on(name), bot, float(entry.get("joined") or 0))

    def k_matches(self, name: str) -> str:
        return f"{self._tag(name)}:matches"

    def k_ratings(self, name: str) -> str:
        return f"{self._tag(name)}:ratings"

    def k_results(self, name: str) -> str:
        return f"{self._tag(name)}:results"

    def k_history(self, name: str, bot: str) -> str:
        return f"{self._tag(name)}:history:{bot}"

    def ladder(self, name: str) -> Ladder:
        lad = self.ladders.get(name)
        if lad is None:
            raise Problem("not-found", f"no ladder named {name!r}")
        return lad

    # --- a bot's entry -----------------------------------------------------------------------

    def _transact(self, name: str, decide: Any) -> Any:
        """Run ``decide(tx)`` (reads, then queued writes) and commit it (``Tx``); when
        another change got in first, decide again from fresh reads."""
        for _ in range(ATTEMPTS):
            tx = Tx(self.r, self._cas)
            out = decide(tx)
            if tx.commit():
                return out
            time.sleep(random.uniform(0.0005, 0.005))
        raise Problem("service-unavailable", "too much contention on the ladder; retry",
                      headers={"Retry-After": "1"})

    def join(self, name: str, bot: str, games: int | None) -> dict[str, Any]:
        """Queue ``bot`` (idempotent: joining again updates the game count and resumes a
        paused bot; a bot in a game stays in it)."""
        lad = self.ladder(name)
        now = time.time()
        raw = self.r.hget(self.k_entries(name), bot)
        was = json.loads(raw) if raw else {}
        check = None  # a first entry plays a validation game first (arena.validation)
        if was.get("state") in (None, OFF, NOT_ADMITTED) and not was.get("busy"):
            check = self.validation.start(lad, bot)  # may refuse the join (429): first
        self.store.bots_played([bot])  # entered: kept for ever (service.storage.store)

        def decide(tx: Tx) -> None:
            raw = tx.hget(self.k_entries(name), bot)
            entry = json.loads(raw) if raw else {"bot": bot, "last": None, "game": None,
                                                 "match": None}
            entry["games_left"] = games
            entry["leaving"] = False
            entry["reason"] = None
            if entry.get("busy"):  # still in a game (or about to be): carries on after it
                if entry.get("state") == PAUSED:  # its timeouts there are forgiven
                    entry["forgiven"] = entry.get("game")
                entry["state"] = PLAYING if entry.get("game") else MATCHED
            elif entry.get("state") in (None, OFF, PAUSED, NOT_ADMITTED):
                if entry.get("state") != PAUSED:
                    entry["joined"] = now
                entry["state"] = WAITING
                entry["since"] = now
                if check is not None:
                    entry.update(state=VALIDATING, validation=check)
            tx.multi()
            self._put(tx, name, bot, entry)

        self._transact(name, decide)
        out = self.entry(name, bot)
        if check is not None and out["validation_game"] != check:  # raced: nobody's game
            self.validation.drop(check)
        return out

    def leave(self, name: str, bot: str) -> dict[str, Any]:
        """Stop matching ``bot``; a game it is in is played out (and rated)."""
        self.ladder(name)

        def decide(tx: Tx) -> None:
            raw = tx.hget(self.k_entries(name), bot)
            if not raw:
                return
            entry = json.loads(raw)
            if entry["state"] in (WAITING, PAUSED, VALIDATING, NOT_ADMITTED):
                entry["state"] = OFF
            elif entry["state"] in (MATCHED, PLAYING):
                entry["leaving"] = True
            tx.multi()
            self._put(tx, name, bot, entry)

        self._transact(name, decide)
        return self.entry(name, bot)

    def forfeit(self, name: str, bot: str, why: str) -> str | None:
        """End ``bot``'s live game on ladder ``name`` now, forfeited by it, and rate it: a
        rated loss for ``bot`` and a win for its opponent (``ladder_plan``), whatever the
        board said. What a suspension does (issue 23: a cheat's live games are forfeited,
        not played out by the clock). The game's id, or None when it was in none."""
        gid = self.entry(name, bot).get("game_id")
        game = self.store.get_game(gid) if gid else None
        if game is None or game.status == FINISHED:
            return None
        # through the door: the end is announced and the after-finish hooks settle it
        self.arena.ending.end(game, FORFEIT, forfeit_by=[bot], why=why)
        return gid

    def entry(self, name: str, bot: str) -> dict[str, Any]:
        """A bot's queue state on one ladder, as ``schemas.LadderEntry``.

        Read through to the game: an entry still in a game that has finished is settled
        first (``settle``, exactly once whoever gets there), so the entry never
        contradicts the game's end. The finishing action settles the game too
        (``Arena.on_finish``), but only after its commit, which every other bot may have
        heard already (its ``?wait`` answer, a view): without this read its entry could
        still say ``playing`` with the game's ``games_left`` (issue 24)."""
        self.ladder(name)
        raw, rraw = self._entry_and_rating(name, bot)
        entry = json.loads(raw) if raw else {"state": OFF}
        if entry.get("busy") and entry.get("game") and entry.get("match") and \
                self.r.hget(self.store.game_key(entry["game"]), "status") == FINISHED.encode():
            self.settle(name, entry["match"])
            raw, rraw = self._entry_and_rating(name, bot)
            entry = json.loads(raw) if raw else {"state": OFF}
        rating = json.loads(rraw) if rraw else {**ratings.initial(), "games": 0, "wins": 0}
        state = entry["state"]
        return {
            "ladder": name,
            "bot_id": bot,
            "bot_name": self.store.bot_names([bot]).get(bot, ""),
            "state": state,
            "leaving": bool(entry.get("leaving")) and state in (MATCHED, PLAYING),
            "games_left": entry.get("games_left"),
            "game_id": entry.get("game") if entry.get("busy") else None,
            "waiting_since": entry.get("since") if state == WAITING else None,
            "reason": entry.get("reason"),
            "validation_game": entry.get("validation")
            if state in (VALIDATING, NOT_ADMITTED) else None,
            "rating": {**ratings.shown(rating), "games": rating["games"],
                       "wins": rating["wins"],
                       "provisional": ratings.provisional(rraw and rating,
                                                          self.provisional_games,
                                                          self.provisional_owners)},
        }

    def _entry_and_rating(self, name: str, bot: str) -> tuple[bytes | None, bytes | None]:
        """The bot's entry and rating on ladder ``name``, as stored (one round trip)."""
        batch = self.r.pipeline(transaction=False)
        batch.hget(self.k_entries(name), bot)
        batch.hget(self.k_ratings(name), bot)
        raw, rraw = batch.execute()
        return raw, rraw

    def pass_once(self, now: float | None = None) -> list[str]:
        """``settle_all`` then ``match_all``: the ids of the games created."""
        self.settle_all()
        return self.match_all(now)

    # --- reading -----------------------------------------------------------------------------

    def _queue(self, name: str) -> list[dict[str, Any]]:
        on = [b.decode() for b in self.r.zrange(self.k_on(name), 0, -1)]
        raws = self.r.hmget(self.k_entries(name), on) if on else []
        entries = [json.loads(v) for v in raws if v]
        entries = [e for e in entries if e["state"] != OFF]
        names = self.store.bot_names([e["bot"] for e in entries])
        order = {s: i for i, s in enumerate(STATES)}
        entries.sort(key=lambda e: (order[e["state"]], e.get("since") or 0, e["bot"]))
        return [{"bot_id": e["bot"], "bot_name": names.get(e["bot"], ""), "state": e["state"],
                 "waiting_since": e.get("since") if e["state"] == WAITING else None,
                 "game_id": e.get("game") if e.get("busy") else None} for e in entries]

    def summary(self, name: str) -> dict[str, Any]:
        lad = self.ladder(name)
        queue = self._queue(name)
        return {**lad.summary(),
                "waiting": sum(1 for q in queue if q["state"] == WAITING),
                "playing": sum(1 for q in queue if q["game_id"]),
                "rated": int(self.r.hlen(self.k_ratings(name))),
                "games": int(self.r.llen(self.k_results(name)))}

    def list(self) -> dict[str, Any]:
        return {"items": [self.summary(n) for n in self.ladders]}

    def detail(self, name: str) -> dict[str, Any]:
        return {**self.summary(name), "queue": self._queue(name)}

    def standings(self, name: str, limit: int, cursor: int | None) -> dict[str, Any]:
        """Every rated bot, best ordinal first (ties by bot id); ``cursor``: the rank to
        continue after."""
        self.ladder(name)
        raw = {k.decode(): json.loads(v)
               for k, v in self.r.hgetall(self.k_ratings(name)).items()}
        # a suspended bot is off every standing while its suspension lasts, as off the
        # leaderboard (its rating is kept: lifting the suspension shows it again)
        held = set(self.arena.owners.suspended_now())
        raw = {b: r for b, r in raw.items() if b not in held}
        pg, po = self.provisional_games, self.provisional_owners
        rows = sorted(raw.items(), key=lambda kv: (ratings.provisional(kv[1], pg, po),
                                                   -ordinal(kv[1]), kv[0]))
        ranked = sum(1 for _, r in rows if not ratings.provisional(r, pg, po))
        start = cursor or 0
        page = rows[start:start + limit]
        names = self.store.bot_names([b for b, _ in page])
        items = [{"rank": start + i + 1 if start + i < ranked else None, "bot_id": b,
                  "bot_name": names.get(b, ""),
                  **ratings.shown(r), "games": r["games"], "wins": r["wins"],
                  "losses": r["games"] - r["wins"], "form": r.get("form", ""),
                  "provisional": start + i >= ranked}
                 for i, (b, r) in enumerate(page)]
        more = start + limit < len(rows)
        return {"ladder": name, "items": items, "next_cursor": start + limit if more else None}

    def history(self, name: str, bot: str, limit: int, cursor: int | None) -> dict[str, Any]:
        """A bot's ladder games, newest first, with its rating before and after each;
        ``cursor``: how many newer games to skip."""
        self.ladder(name)
        if self.store.get_bot(bot) is None:
            raise Problem("not-found", "no such bot")
        start = cursor or 0
        key = self.k_history(name, bot)
        batch = self.r.pipeline(transaction=False)
        batch.lrange(key, start, start + limit - 1)
        batch.llen(key)
        rows, total = batch.execute()
        rows = [json.loads(x) for x in rows]
        names = self.store.bot_names([x["opponent"] for x in rows])
        items = [{
            "game_id": x["game_id"], "finished": x["finished"],
            "opponent": {"bot_id": x["opponent"], "bot_name": names.get(x["opponent"], "")},
            "won": x["won"], "team": x["team"], "scores": x["scores"],
            "timeouts": x["timeouts"],
            "before": ratings.shown({"mu": x["before"][0], "sigma": x["before"][1]}),
            "after": ratings.shown({"mu": x["after"][0], "sigma": x["after"][1]}),
            "forfeit": bool(x.get("forfeit")), "unrated": x.get("unrated"),
        } for x in rows]
        more = start + limit < int(total)
        return {"ladder": name, "bot_id": bot, "games": int(total), "items": items,
                "next_cursor": start + limit if more else None}

    def results(self, name: str) -> list[dict[str, Any]]:
        """Every rated game in rating order (what a replay of the ratings needs)."""
        return [json.loads(x) for x in self.r.lrange(self.k_results(name), 0, -1)]


class Matchmaker(BackgroundLoop):
    """Matches every ``PASS_S`` and repairs every ``REPAIR_S`` (finished games are rated
    at once by the finishing request; the repair is for a process that died first, and
    for pausing); one per worker, any number at once."""

    thread_name = "allfours-matchmaker"
    what = "matchmaker"
    log = logging.getLogger(__name__)

    def __init__(self, ladders: Ladders, pass_s: float = PASS_S,
                 repair_s: float = REPAIR_S) -> None:
        super().__init__()
        self.ladders = ladders
        self.pass_s = pass_s
        self.repair_s = repair_s

    def pass_once(self) -> None:
        if self.due(self.repair_s):
            self.ladders.settle_all()
        self.ladders.match_all()

    def idle_s(self) -> float:
        return self.pass_s


def start_matchmaker(app: Any) -> Matchmaker:
    """Start a matchmaker for a Flask app built by ``create_app``."""
    mm = Matchmaker(app.extensions["ladders"])
    app.extensions["matchmaker"] = mm
    return mm.start()


# the names other modules and tests take from here (the ladder's one public module)
__all__ = ["CLAIM_LEASE_S", "DEFAULTS", "FORM", "PASS_S", "REPAIR_S", "RESULTS_KEPT", "STATES",
           "WIDEN_PER_S", "WINDOW", "Ladder", "Ladders", "Matchmaker", "declared",
           "ladder_plan", "ordinal", "pair_up", "start_matchmaker", "timeouts_by_bot"]
