"""The ladder: bots queue for rated games with no organizer; a matchmaker seats them.

**What a bot sees.** A ladder is a table size (2 or 4 players) with a set of rules. The
service always runs ``2p`` and ``4p`` with the default rules; an operator declares more in
``ARENA_LADDERS`` (JSON: ``{"name": {"players": 2, "variants": {...}, "move_limit": 5}}``).
A bot joins (``POST /ladders/{name}/entry``, optionally for a number of games), leaves at
any time (``DELETE``; a game it is in is played out), and reads its entry: ``waiting``,
``matched`` (its game is being created), ``playing`` (``game_id``), ``paused`` (with a
``reason``), ``validating`` or ``not_admitted`` (a bot's first entry plays a validation
game against the house first: ``service.arena.validation``) or ``off``. As in
tournaments, each side of a game is one bot: in a 4-player
ladder game a bot holds both seats of its team (0 and 2, or 1 and 3). Ladder games are
ordinary games with a move limit (``ARENA_LADDER_MOVE_LIMIT`` unless the ladder sets one).

**The matching rule** (``pair_up``, pure). Waiting bots are taken longest-waiting first.
Each is matched with the waiting bot whose rating ordinal (mu - 3 sigma) is nearest to
its own, among those within its *window*: ``WINDOW`` ordinal points, plus ``WIDEN_PER_S``
for every second the longer-waiting of the two has waited (so any two waiting bots meet
after a while). A bot is never matched with itself nor with a bot of its own owner
(``service.arena.owners``: a farm of one author's accounts gains nothing here), and a
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
   through ``Arena.on_finish`` right after the last action, or the matchmaker's pass over
   bound matches every ``REPAIR_S``, which repairs a process killed after the game
   ended. Nothing about a ladder lives outside Redis: a restarted service carries on.
   Ratings take the games in the order they were settled (``:results``); a bot is in
   one game of a ladder at a time, so replaying ``:results`` in order gives its ratings.

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
game's seed is random and committed to (``service.arena.deals``).

A bot whose timeouts in one ladder game reach ``ARENA_LADDER_PAUSE_TIMEOUTS`` is paused
(checked every ``REPAIR_S`` while the game is live, and when it ends): it is matched no more,
its entry says why, and joining again resumes it.
"""

from __future__ import annotations

import json
import logging
import random
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import redis

from service.arena import deals, ratings
from service.arena import tournament_control as control
from service.arena.clock import MAX_TIME_BANK_S
from service.arena.games import Arena
from service.arena.loop import BackgroundLoop
from service.arena.problems import Problem
from service.arena.status import ACTIVE, FINISHED, deadline_for, status_of, turn_bot
from service.arena.validation import NOT_ADMITTED, VALIDATING, Validation
from service.engine import InvalidVariants, Variants, new_game
from service.engine.game import MAX_SEED
from service.storage.store import Game

log = logging.getLogger(__name__)

WAITING, MATCHED, PLAYING, PAUSED, OFF = "waiting", "matched", "playing", "paused", "off"
STATES = [WAITING, MATCHED, PLAYING, PAUSED, VALIDATING, NOT_ADMITTED, OFF]
WINDOW = 5.0  # ordinal points two bots may differ by at once
WIDEN_PER_S = 1.0  # ... plus this much per second waited
CLAIM_LEASE_S = 10.0  # an unbound match older than this gets its game from any matchmaker
PASS_S = 0.25  # how often a matchmaker looks at the queue
REPAIR_S = 2.0  # how often it looks at every live match (unrated ends, timeouts, stale claims)
FORM = 10  # results kept in "form"
RESULTS_KEPT = 100_000  # the ladder's list of results (for replays) keeps the newest
ATTEMPTS = 100
NAME_RE = r"[a-z0-9][a-z0-9_-]{0,31}"  # schemas.LADDER_NAME_RE, unanchored

DEFAULTS: dict[str, Any] = {
    "ARENA_LADDERS": "",  # JSON: more ladders, {"name": {"players", "variants", "move_limit"}}
    "ARENA_LADDER_MOVE_LIMIT": 10.0,  # seconds a decision in a ladder game
    "ARENA_LADDER_TIME_BANK": 30.0,  # seconds of time bank a seat (service.arena.clock)
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


# --- matching (pure) -----------------------------------------------------------------------


def ordinal(r: dict[str, Any]) -> float:
    return float(r["mu"]) - 3 * float(r["sigma"])


def pair_up(waiting: list[dict[str, Any]], now: float, rematch_wait: float,
            window: float = WINDOW, widen: float = WIDEN_PER_S) -> list[tuple[str, str]]:
    """Pairs of bots to seat now (see the module docstring). Each item of ``waiting``:
    ``bot``, ``ordinal``, ``since`` (when it began waiting), ``last`` (its last opponent)."""
    order = sorted(waiting, key=lambda w: (w["since"], w["bot"]))
    taken: set[str] = set()
    pairs = []
    for a in order:
        if a["bot"] in taken:
            continue
        best = None
        for b in order:
            if b["bot"] == a["bot"] or b["bot"] in taken:
                continue
            if (a.get("owner") or a["bot"]) == (b.get("owner") or b["bot"]):
                continue  # never two bots of one owner (service.arena.owners)
            waited = now - min(a["since"], b["since"])
            gap = abs(a["ordinal"] - b["ordinal"])
            if gap > window + widen * max(0.0, waited):
                continue
            rematch = a.get("last") == b["bot"] or b.get("last") == a["bot"]
            if rematch and now - max(a["since"], b["since"]) < rematch_wait:
                continue
            key = (rematch, gap, b["since"], b["bot"])
            if best is None or key < best[0]:
                best = (key, b)
        if best is not None:
            taken.update((a["bot"], best[1]["bot"]))
            pairs.append((a["bot"], best[1]["bot"]))
    return pairs


def timeouts_by_bot(game: Game) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in game.meta.get("timeouts", ()):
        bot = game.seats[t["seat"]]
        if bot:
            out[bot] = out.get(bot, 0) + 1
    return out


def ladder_plan(game: Game, sides: list[str], owners: dict[str, str]) -> dict[str, Any]:
    """How a finished ladder game is rated (docs/ratings.md): a side whose every decision
    (at least one) the move clock played never made one of its own and forfeits — a rated
    loss, whatever the board said; both sides so: unrated; bots of one owner: unrated.
    ``winner``: the team credited with the win (the game's winner unless it forfeited);
    ``forfeit``: the bots that forfeited; ``unrated``: why not rated, or None."""
    by = set((game.meta.get("ended") or {}).get("by") or ())  # ended at once (``forfeit``)
    absent = sorted(set(control.absent_teams(game)) | {t for t in (0, 1) if sides[t] in by})
    winner = game.state.winner if game.state.winner is not None else 0
    unrated = None
    if game.meta.get("seed_chosen"):
        unrated = "seed_chosen"  # never on a ladder today; a rule for any rated path
    elif owners[sides[0]] == owners[sides[1]]:
        unrated = "same_owner"
    elif len(absent) == 2:
        unrated = "both_forfeited"
    elif absent:
        winner = 1 - absent[0]
    return {"winner": winner, "forfeit": [sides[t] for t in absent],
            "rated": unrated is None, "unrated": unrated}


def _dump(x: Any) -> str:
    return json.dumps(x, separators=(",", ":"))


# --- compare-and-set over one ladder's keys ---------------------------------------------------

# KEYS: the keys a change touches (one ladder's: one hash tag). ARGV[1]: JSON
# {"expect": [[k, field, value or false]], "ops": [[op, k, a, b]]} with k an index into KEYS.
# Applies every op only if every expected hash field still holds what was read (false: was
# absent); returns 1, else 0 and changes nothing.
CAS = """
local d = cjson.decode(ARGV[1])
for _, e in ipairs(d.expect) do
  local v = redis.call('HGET', KEYS[e[1]], e[2])
  if e[3] == false then
    if v then return 0 end
  elseif v ~= e[3] then
    return 0
  end
end
for _, o in ipairs(d.ops) do
  if o[1] == 'hset' then redis.call('HSET', KEYS[o[2]], o[3], o[4])
  elseif o[1] == 'hdel' then redis.call('HDEL', KEYS[o[2]], o[3])
  elseif o[1] == 'rpush' then redis.call('RPUSH', KEYS[o[2]], o[3])
  elseif o[1] == 'lpush' then redis.call('LPUSH', KEYS[o[2]], o[3])
  elseif o[1] == 'ltrim' then redis.call('LTRIM', KEYS[o[2]], o[3], o[4])
  elseif o[1] == 'zadd' then redis.call('ZADD', KEYS[o[2]], o[4], o[3])
  elseif o[1] == 'zrem' then redis.call('ZREM', KEYS[o[2]], o[3]) end
end
return 1
"""


class Tx:
    """One optimistic change of a ladder: reads record what they saw (per hash field), and
    ``commit`` applies the queued writes only if those fields are unchanged (``CAS``). Per
    field, not per key: a bot joining does not void a claim of two other bots, and two
    games of different bots settle side by side. ``multi`` is a no-op kept so a decision
    reads as "read, then write"."""

    def __init__(self, r: redis.Redis, script: Any) -> None:
        self.r = r
        self.script = script
        self.keys: list[str] = []
        self.expects: list[list[Any]] = []
        self.ops: list[list[Any]] = []

    def _k(self, key: str) -> int:
        if key not in self.keys:
            self.keys.append(key)
        return self.keys.index(key) + 1

    def expect(self, key: str, field_: str, value: bytes | None) -> None:
        self.expects.append([self._k(key), field_, value.decode() if value else False])

    def hget(self, key: str, field_: str) -> bytes | None:
        v = self.r.hget(key, field_)
        self.expect(key, field_, v)
        return v

    def hmget(self, key: str, fields_: list[str]) -> list[bytes | None]:
        vs = self.r.hmget(key, fields_)
        for f, v in zip(fields_, vs, strict=True):
            self.expect(key, f, v)
        return vs

    def multi(self) -> None:
        pass

    def hset(self, key: str, field_: str, value: str) -> None:
        self.ops.append(["hset", self._k(key), field_, value])

    def hdel(self, key: str, field_: str) -> None:
        self.ops.append(["hdel", self._k(key), field_])

    def rpush(self, key: str, value: str) -> None:
        self.ops.append(["rpush", self._k(key), value])

    def lpush(self, key: str, value: str) -> None:
        self.ops.append(["lpush", self._k(key), value])

    def zadd(self, key: str, member: str, score: float) -> None:
        self.ops.append(["zadd", self._k(key), member, score])

    def zrem(self, key: str, member: str) -> None:
        self.ops.append(["zrem", self._k(key), member])

    def ltrim(self, key: str, start: int, stop: int) -> None:
        self.ops.append(["ltrim", self._k(key), start, stop])

    def commit(self) -> bool:
        if not self.ops:
            return True
        arg = json.dumps({"expect": self.expects, "ops": self.ops}, separators=(",", ":"))
        return int(self.script(keys=self.keys, args=[arg])) == 1


# --- the service ---------------------------------------------------------------------------


class Ladders:
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
        # ``end_game`` needs only ``.store`` of its first argument (a tournament's or this)
        ended = control.end_game(self, game, {"reason": "forfeit", "by": [bot], "why": why})
        if ended is not None:
            self._game_finished(ended)
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

    # --- matching ----------------------------------------------------------------------------

    def match_once(self, name: str, now: float | None = None) -> list[str]:
        """Claim pairs of waiting bots, create their games, bind them: the ids of the
        games created by this call."""
        lad = self.ladder(name)
        now = time.time() if now is None else now
        claimed: list[tuple[str, dict[str, Any]]] = []

        def decide(tx: Tx) -> None:
            claimed.clear()
            on = [b.decode() for b in self.r.zrange(self.k_on(name), 0, -1)]
            raw_entries = {b: v for b, v in zip(on, self.r.hmget(self.k_entries(name), on)
                                                if on else [], strict=True) if v}
            entries = {k: json.loads(v) for k, v in raw_entries.items()}
            waiting = [e for e in entries.values() if e["state"] == WAITING]
            if len(waiting) < 2:
                return
            rates = self.r.hmget(self.k_ratings(name), [e["bot"] for e in waiting])
            owners = self.arena.owners.owners_of([e["bot"] for e in waiting])
            pool = [{"bot": e["bot"], "since": e["since"], "last": e.get("last"),
                     "ordinal": ordinal(json.loads(r)) if r else 0.0,
                     "owner": owners.get(e["bot"])}
                    for e, r in zip(waiting, rates, strict=True)]
            pairs = pair_up(pool, now, self.rematch_wait)
            if not pairs:
                return
            tx.multi()
            for a, b in pairs:
                mid = secrets.token_hex(6)
                sides = [a, b] if secrets.randbelow(2) else [b, a]
                match = {"id": mid, "sides": sides, "seed": secrets.randbelow(MAX_SEED + 1),
                         "at": now, "game": None}
                for bot in sides:
                    tx.expect(self.k_entries(name), bot, raw_entries[bot])  # still waiting
                    entries[bot].update(state=MATCHED, match=mid, busy=True, game=None)
                    entries[bot]["waited"] = now - entries[bot]["since"]
                    self._put(tx, name, bot, entries[bot])
                tx.hset(self.k_matches(name), mid, _dump(match))
                claimed.append((mid, match))

        self._transact(name, decide)
        made = []
        for mid, match in claimed:
            gid = self._create(lad, mid, match)
            if gid is not None:
                made.append(gid)
        return made

    def _create(self, lad: Ladder, mid: str, match: dict[str, Any]) -> str | None:
        """Step 2: create the claimed match's game, or find it made already, and bind it
        (see the module docstring): the game's id if this call bound it."""
        raw = self.r.hget(self.k_matches(lad.name), mid)
        if raw is None or json.loads(raw).get("game"):
            return None  # bound (and perhaps rated) already: another process was quicker
        return self._seat(lad, mid, match)

    def _seat(self, lad: Ladder, mid: str, match: dict[str, Any]) -> str | None:
        """Create match ``mid``'s game if absent and bind it: safe however late (a
        process that stalled here after seeing the match unbound finds the game made
        and the match bound by another, and makes nothing)."""
        a, b = match["sides"]
        seats: list[str | None] = [a, b] if lad.players == 2 else [a, b, a, b]
        names = self.store.bot_names([a, b])
        state, _ = new_game(lad.players, match["seed"], Variants.from_dict(lad.variants))
        status = status_of(state, seats)
        meta: dict[str, Any] = {
            "players": lad.players, "seed": match["seed"], "variants": lad.variants,
            "seats": seats, "names": [names.get(s or "", "") for s in seats],
            "created": int(time.time()), "creator": None, "move_limit": lad.move_limit,
            "time_bank": lad.time_bank,
            "ladder": {"name": lad.name, "match": mid, "claimed": match["at"]},
        }
        deals.seal(meta, chosen=False)  # a random seed, committed to (docs/ratings.md)
        game = self.store.create_game(meta, state, status, turn_bot(state, seats, status),
                                      deadline_for(meta, state, status),
                                      game_id=self.store.derived_id("ladder", lad.name, mid))
        if not self._bind(lad.name, mid, match["sides"], game.id):
            return None  # another process bound it (the same game: its id is the match's)
        if game.status != ACTIVE:  # a first kick can end a game at once (R22)
            self.settle(lad.name, mid)
        else:  # bound: the game is under way (webhook bots get their start notification)
            self.arena.announce_status(game, game.status)
        return game.id

    def _bind(self, name: str, mid: str, sides: list[str], gid: str) -> bool:
        """The match gets its game and its bots become ``playing``: False if the match is
        bound already (or gone: settled)."""
        def bind(tx: Tx) -> bool:
            entries = tx.hmget(self.k_entries(name), sides)
            raw = tx.hget(self.k_matches(name), mid)
            if raw is None or json.loads(raw).get("game"):
                return False
            m = json.loads(raw)
            m["game"] = gid
            tx.multi()
            tx.hset(self.k_matches(name), mid, _dump(m))
            for bot, eraw in zip(sides, entries, strict=True):
                e = json.loads(eraw) if eraw else None
                if e is not None and e.get("match") == mid:
                    e["game"] = gid
                    if e["state"] == MATCHED:
                        e["state"] = PLAYING
                    self._put(tx, name, bot, e)
            return True

        return bool(self._transact(name, bind))

    # --- settling finished games -------------------------------------------------------------

    def _game_finished(self, game: Game) -> None:
        info = game.meta.get("ladder")
        if info and info.get("name") in self.ladders:
            self.settle(info["name"], info["match"])

    def settle(self, name: str, mid: str) -> bool:
        """Rate match ``mid``'s game if it has finished (exactly once: the match is deleted
        in the same transaction); pause a bot whose timeouts reached the limit. True if
        this call rated it."""
        raw = self.r.hget(self.k_matches(name), mid)
        if raw is None:
            return False
        match = json.loads(raw)
        gid = match.get("game")
        if gid is None:
            if time.time() - match["at"] > CLAIM_LEASE_S:  # its claimer died (or stalls)
                self._create(self.ladder(name), mid, match)
            return False
        # read afresh: the hook's game object is the one the finishing action started from
        game = self.store.get_game(gid)
        if game is None:
            return False
        late = {b: n for b, n in timeouts_by_bot(game).items() if n >= self.pause_timeouts}
        if game.status != FINISHED:
            if late:
                self._pause(name, mid, late, gid)
            return False
        if game.state.winner is None and not (game.meta.get("ended") or {}).get("by"):
            return False  # over with no winner and nobody to blame: nothing to rate
        sides = match["sides"]
        owners = self.owners(sides)
        plan = ladder_plan(game, sides, owners)
        scores = list(game.state.scores)
        outs = timeouts_by_bot(game)
        now = time.time()
        rated = [False]

        def decide(tx: Tx) -> None:
            rated[0] = False
            raw = tx.hget(self.k_matches(name), mid)
            if raw is None or json.loads(raw).get("game") != gid:
                return
            entries = tx.hmget(self.k_entries(name), sides)
            rates = tx.hmget(self.k_ratings(name), sides)
            rs = [json.loads(r) if r else {**ratings.blank(), "form": ""} for r in rates]
            w = plan["winner"]
            new = [dict(r) for r in rs]
            if plan["rated"]:
                lo = 1 - w
                new[w], new[lo], _ = ratings.rate_published(
                    rs[w], rs[lo], (owners[sides[w]], owners[sides[lo]]), now)
            tx.multi()
            tx.hdel(self.k_matches(name), mid)
            if plan["rated"]:  # :results holds the rated games only, in rating order
                result = {"game_id": gid, "at": now, "sides": sides, "winner": sides[w],
                          "scores": scores, "forfeit": plan["forfeit"]}
                tx.rpush(self.k_results(name), _dump(result))
                tx.ltrim(self.k_results(name), -RESULTS_KEPT, -1)
            for i, bot in enumerate(sides):
                won = i == w
                r = new[i]
                if plan["rated"]:
                    r["form"] = (rs[i].get("form", "") + ("W" if won else "L"))[-FORM:]
                    tx.hset(self.k_ratings(name), bot, _dump(r))
                tx.lpush(self.k_history(name, bot), _dump({
                    "game_id": gid, "finished": now, "opponent": sides[1 - i],
                    "won": won, "team": i, "scores": [scores[i], scores[1 - i]],
                    "timeouts": outs.get(bot, 0),
                    "before": [rs[i]["mu"], rs[i]["sigma"]], "after": [r["mu"], r["sigma"]],
                    "forfeit": sides[i] in plan["forfeit"], "unrated": plan["unrated"],
                }))
                e = json.loads(entries[i]) if entries[i] else None
                if e is None or e.get("match") != mid:
                    continue
                e.update(match=None, busy=False, last=sides[1 - i])
                if e.get("games_left") is not None:
                    e["games_left"] = max(0, e["games_left"] - 1)
                if outs.get(bot, 0) >= self.pause_timeouts and e.get("forgiven") != gid:
                    e["state"] = PAUSED
                    e["reason"] = e.get("reason") or self._pause_reason(outs[bot], gid)
                elif e["state"] in (PAUSED, OFF):
                    pass
                elif e.get("leaving") or e.get("games_left") == 0:
                    e.update(state=OFF, leaving=False)
                else:
                    e.update(state=WAITING, since=now)
                self._put(tx, name, bot, e)
            rated[0] = True

        self._transact(name, decide)
        return rated[0]

    def _pause_reason(self, n: int, gid: str) -> str:
        return (f"timed out {n} times in ladder game {gid} (the limit is "
                f"{self.pause_timeouts} in one game); join again to resume")

    def _pause(self, name: str, mid: str, late: dict[str, int], gid: str) -> None:
        def decide(tx: Tx) -> None:
            bots = list(late)
            entries = tx.hmget(self.k_entries(name), bots)
            todo = []
            for bot, raw in zip(bots, entries, strict=True):
                e = json.loads(raw) if raw else None
                if e and e.get("match") == mid and e["state"] != PAUSED \
                        and e.get("forgiven") != gid:
                    e["state"] = PAUSED
                    e["reason"] = self._pause_reason(late[bot], gid)
                    todo.append((bot, e))
            if todo:
                tx.multi()
                for bot, e in todo:
                    self._put(tx, name, bot, e)

        self._transact(name, decide)

    def settle_all(self) -> None:
        """Look at every live match of every ladder: rate the finished games nobody rated
        (their process died), pause bots over the timeout limit, create the games of claims
        whose claimer died."""
        for name in self.ladders:
            self.validation.check_all(name)  # validation games (arena.validation)
            for mid in self.r.hkeys(self.k_matches(name)):
                try:
                    self.settle(name, mid.decode())
                except Exception:
                    log.exception("settling ladder %s match %s failed", name, mid)

    def match_all(self, now: float | None = None) -> list[str]:
        """Match the waiting bots of every ladder: the ids of the games created."""
        made: list[str] = []
        for name in self.ladders:
            made += self.match_once(name, now)
        return made

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
