"""Tournaments: scheduling games as earlier ones finish, recording their results.

Who meets whom and which deal each table plays is ``service.arena.tournaments.pairing``; what the
results add up to (standings, ratings) is ``service.arena.tournaments.standings``; reading a
tournament is ``service.arena.tournaments.views``. This module keeps the document and
moves it on, one transaction at a time.

**The model.** A tournament is one JSON document in Redis, ``{p}tour:{id}``: its settings,
its entrants, and its rounds, each a list of game *slots* (who sits on which team, the
deal's seed, and — once scheduled — the game id and, once played, the result), plus the
ratings after every recorded game and a snapshot of them after every round. Other keys:
``{p}tours:all`` (sorted set by creation sequence, for listing), ``{p}tours:seq``,
``{p}tours:running`` (set of open tournaments, which the sweeper re-checks) and
``{p}leaderboard`` (hash: bot id → JSON global rating over all tournament games),
``{p}embargoed`` (set of shared deals not yet finished at every table: see below),
``{p}tours:seeds`` (set of every tournament seed used, permanent: a seed is never reused
unless ``trusted``, ``_claim_seed``) and ``{p}ratings:version`` (the rating rules the
published ratings follow: ``service.arena.migrations.ratings``).

**Never twice, never skipped.** Every change to a tournament is one optimistic
transaction, ``advance``: WATCH the document (and the leaderboard), read it and the games
of its live slots, decide (record finished games, close a round, pair the next, create
the next games), then MULTI/EXEC the new document *together with the new games' writes*.
A game therefore exists exactly when its slot names it: if anyone else changed the
tournament in between (another process, another finishing game) EXEC fails, nothing is
written, and ``advance`` starts again from the fresh document — where that slot is now
taken. A finished game is recorded in the same transaction that marks its slot done, so
its result counts once.

**Triggers.** ``advance`` runs (a) soon after an action or a timeout finishes one of the
tournament's games, in the finishing process's after-finish loop, not in the request
(``Arena.on_finish``, ``service.arena.games.after_finish``), and (b) every few seconds
from every sweeper (``advance_all`` over ``{p}tours:running``), so a process that died
between finishing a game and scheduling the next is repaired, and a restarted service
simply carries on: nothing about a tournament lives outside Redis. At most ``parallel``
games of one tournament are being played at once (a finished game waiting for the other
tables of its deal does not count); games are created in slot order.

**Knockout** (``service.arena.tournaments.knockout``): single elimination, seeded by the
leaderboard's rating ordinal, byes to the top seeds; each round is made when the previous one is
decided, from the winners, through ``round_slots`` like any round (so its deals are shared
and embargoed the same way); a level match gets tiebreak games appended to its round
before the round counts as complete. The bracket lives in this document.

**Stopping and leaving** (``service.arena.tournaments.control``): a tournament is
``running``, ``paused`` (nothing starts; live games play on and are recorded),
``finished`` or ``cancelled`` (live games voided, nothing scheduled, every deal's embargo
lifted). Entrants that withdraw, fall under the no-show rule or are disqualified forfeit
their live and unplayed games; ``advance`` applies all of it first (``before_step``), in
the same transaction as everything else.
"""

from __future__ import annotations

import json
import logging
import math
import random
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import redis

from service.arena.core import deals, ratings
from service.arena.core.problems import Problem
from service.arena.core.status import (
    ACTIVE,
    FINISHED,
    deadline_for,
    embargo_key,
    status_of,
    turn_bot,
)
from service.arena.games.commands import Arena
from service.arena.tournaments import arena_format, control, knockout
from service.arena.tournaments.pairing import (
    DONE,
    KNOCKOUT,
    LIVE,
    PENDING,
    ROUND_ROBIN,
    SWISS,
    duplicate_setting,
    embargo_id,
    round_robin_rounds,
    round_slots,
    swiss_pairs,
    swiss_warnings,
    tables_of,
)
from service.arena.tournaments.size import MAX_TOURNAMENT_GAMES, size_errors
from service.arena.tournaments.standings import (
    game_result,
    rating_plan,
    ratings_after,
    standings,
)
from service.arena.tournaments.views import TournamentViews
from service.engine import Variants, new_game
from service.engine.game import MAX_SEED
from service.storage.store import Game

log = logging.getLogger(__name__)

RUNNING = "running"
ATTEMPTS = 200
MAX_GAMES = MAX_TOURNAMENT_GAMES  # per tournament: keeps the document small


class Tournaments(TournamentViews):
    """Tournament use cases over the arena's store (see the module docstring)."""

    def __init__(self, arena: Arena) -> None:
        self.arena = arena
        self.store = arena.store
        self.r: redis.Redis = arena.store.r
        # the tournaments' keys, the leaderboard's and the embargo set's: one hash tag in
        # a cluster, so their WATCH/MULTI is one slot (service.storage.keys)
        self.p = arena.store.tours_prefix
        arena.on_finish.append(self._game_finished)
        # told when ``advance`` changes a tournament's status (``registration``: a finished
        # tournament's entrants hear of it), after the change is written
        self.on_status: list[Callable[[dict[str, Any], str], None]] = []
        # when a bot is ranked (docs/ratings.md); the app sets them from its config
        self.provisional_games = int(ratings.DEFAULTS["ARENA_PROVISIONAL_GAMES"])
        self.provisional_owners = int(ratings.DEFAULTS["ARENA_PROVISIONAL_OWNERS"])
        self.standing = ratings.Standing()  # the app sets the deployment's

    def key(self, tid: str) -> str:
        return f"{self.p}tour:{tid}"

    @property
    def lb_key(self) -> str:
        return f"{self.p}leaderboard"

    @property
    def running_key(self) -> str:
        return f"{self.p}tours:running"

    # --- creating ---------------------------------------------------------------------------

    def create(self, body: dict[str, Any], extra: dict[str, Any] | None = None
               ) -> dict[str, Any]:
        """A tournament that starts now with the entrants named (``extra``: fields of the
        document beside the plan, e.g. its organizer: ``registration``)."""
        tid = secrets.token_hex(6)
        doc = {**self.plan(body, tid), **(extra or {})}
        seq = self.r.incr(f"{self.p}tours:seq")
        pipe = self.r.pipeline(transaction=True)
        pipe.set(self.key(tid), json.dumps(doc, separators=(",", ":")))
        pipe.zadd(f"{self.p}tours:all", {tid: seq})
        pipe.sadd(self.running_key, tid)
        pipe.execute()
        self.advance(tid)
        return self.detail(tid)

    def plan(self, body: dict[str, Any], tid: str) -> dict[str, Any]:
        """The document of tournament ``tid`` starting now with ``body["entrants"]``: the
        settings checked, the seed claimed, the first round (or every round) paired. Not
        stored: ``create`` stores it new, a registration's start in place of the
        registering document."""
        entrants: list[str] = body["entrants"]
        names = self.store.bot_names(entrants)
        unknown = sorted(b for b, n in names.items() if not n)
        if unknown:
            msg = f"no such bot: {', '.join(unknown)}"
            raise Problem("not-found", msg, errors={"entrants": [msg]})
        suspended = sorted(b for b in set(entrants) if self.arena.owners.is_suspended(b))
        if suspended:  # the operator's suspension keeps a bot out of new tournaments too
            msg = f"suspended: {', '.join(suspended)}"
            raise Problem("suspended", msg, errors={"entrants": [msg]})
        self.store.bots_played(entrants)  # entered: kept for ever (service.storage.store)
        try:
            variants = Variants.from_dict(body.get("variants") or {})
        except Exception as exc:
            raise Problem("validation", str(exc), errors={"variants": [str(exc)]}) from None
        n = len(entrants)
        fmt = body["format"]
        trusted = bool(body.get("trusted", False))
        settings = {
            "format": fmt,
            "players": body.get("players", 2),
            "games_per_pairing": body.get("games_per_pairing", 2),
            "duplicate": duplicate_setting(body.get("duplicate"), n, trusted),
            "trusted": trusted,
            "rounds": (body.get("rounds") or max(1, math.ceil(math.log2(n))))
            if fmt == SWISS else knockout.rounds_for(n) if fmt == KNOCKOUT
            else 1 if fmt == arena_format.ARENA else n - 1 + n % 2,
            "variants": variants.changed(),
            "move_limit": body.get("move_limit"),
            "time_bank": body.get("time_bank") or None,  # seconds a seat (arena.clock)
            "parallel": body.get("parallel", 8),
            "seed": body["seed"] if body.get("seed") is not None
            else secrets.randbelow(MAX_SEED + 1),
            # absent and failing entrants: service.arena.tournaments.control
            "no_show": body.get("no_show", control.DEFAULT_NO_SHOW_S),
            "max_timeouts": body.get("max_timeouts"),
            "analyse": bool(body.get("analyse", False)),  # service.arena.analyses.queue
        }
        too_big = size_errors(body)  # TournamentCreate refuses it first (the contract)
        if too_big:
            raise Problem("validation", next(iter(too_big.values()))[0], errors=too_big)
        arena_format.settle(settings, body)  # an arena: its clock, one deal a game
        self._claim_seed(settings, body.get("seed") is not None, trusted)
        warnings = swiss_warnings(settings, n)
        doc: dict[str, Any] = {
            "id": tid,
            "name": body.get("name") or "tournament",
            "status": RUNNING,
            "created": int(time.time()),
            "finished": None,
            "settings": settings,
            "entrants": [{"bot_id": b, "bot_name": names[b]} for b in entrants],
            "rounds": [],
            "ratings": {b: ratings.initial() for b in entrants},
            "history": [],
            "recorded": 0,
            "warnings": warnings,
        }
        if fmt == ROUND_ROBIN:
            for pairs, byes in round_robin_rounds(entrants):
                self._add_round(doc, pairs, byes)
        elif fmt == KNOCKOUT:  # seeded by the leaderboard as it is now
            board = dict(zip(entrants, self.r.hmget(self.lb_key, entrants), strict=True))
            lines = knockout.start(doc, {b: json.loads(v) if v else None
                                         for b, v in board.items()})
            self._add_round(doc, *knockout.pairs_of(lines))
            doc["rounds"][-1]["lines"] = lines
        elif fmt == arena_format.ARENA:  # paired as entrants come free (advance)
            arena_format.begin(doc)
        else:
            self._add_round(doc, *swiss_pairs(entrants, set(), {}))
        return doc

    @property
    def seeds_key(self) -> str:
        return f"{self.p}tours:seeds"

    def _claim_seed(self, settings: dict[str, Any], chosen: bool, trusted: bool) -> None:
        """A tournament's seed fixes every deal, and it is public once the tournament is
        over, so an earlier tournament's seed would replay deals someone has seen: refused
        (409 ``seed-reused``) unless ``trusted`` (the organizer's own comparisons). The
        set of used seeds is permanent (``{p}tours:seeds``: one member per tournament, no
        expiry). A random seed that happens to be used already is drawn again."""
        for _ in range(ATTEMPTS):
            if self.r.sadd(self.seeds_key, settings["seed"]) or trusted:
                return
            if chosen:
                raise Problem("seed-reused", f"seed {settings['seed']} was used by an earlier "
                              "tournament, whose deals are public once it is over; omit it "
                              "(random) or create the tournament with trusted: true",
                              errors={"seed": ["used by an earlier tournament"]})
            settings["seed"] = secrets.randbelow(MAX_SEED + 1)
        raise Problem("service-unavailable", "no unused seed found; retry",
                      headers={"Retry-After": "1"})

    @staticmethod
    def _add_round(doc: dict[str, Any], pairs: list[tuple[str, str]], byes: list[str]) -> None:
        round_no = len(doc["rounds"]) + 1
        slots = round_slots(doc["settings"], round_no, pairs)
        first = sum(len(r["slots"]) for r in doc["rounds"])
        for k, slot in enumerate(slots, first):
            slot["slot"] = k
        doc["rounds"].append({"round": round_no, "byes": byes, "slots": slots})

    # --- advancing --------------------------------------------------------------------------

    def _game_finished(self, game: Game) -> None:
        if game.meta.get("tournament"):  # the hook hears ladder games too
            self.advance(game.meta["tournament"]["id"])

    def advance_all(self) -> None:
        """Re-check every open tournament (the sweeper's safety net)."""
        for raw in self.r.smembers(self.running_key):
            try:
                self.advance(raw.decode())
            except Exception:
                log.exception("advancing tournament %s failed", raw)

    def advance(self, tid: str) -> int:
        """Record finished games, close rounds, pair the next, start games up to
        ``parallel``: one optimistic transaction (see the module docstring). Returns the
        number of games created."""
        for _ in range(ATTEMPTS):
            try:
                with self.r.pipeline(transaction=True) as pipe:
                    pipe.watch(self.key(tid), self.lb_key)
                    raw = pipe.get(self.key(tid))
                    if raw is None:
                        return 0
                    doc = json.loads(raw)
                    if not control.steps(doc):
                        pipe.unwatch()
                        self.r.srem(self.running_key, tid)
                        return 0
                    return self._step(pipe, doc)
            except redis.WatchError:
                time.sleep(random.uniform(0.001, 0.01))
        log.warning("tournament %s: too much contention; the sweeper will retry", tid)
        return 0

    def _step(self, pipe: Any, doc: dict[str, Any]) -> int:
        # 0. who left, games of leavers (or of a cancelled tournament) ended: see
        # service.arena.tournaments.control
        status_before = doc["status"]
        changed = control.before_step(self, doc)
        # 1. record the live games that have finished, a whole deal at a time: a deal's
        # games are recorded (and its embargo lifted) once every table of it has finished
        over: dict[int, Game] = {}
        playing = 0  # live games not yet over: what `parallel` limits
        for rnd in doc["rounds"]:
            for slot in rnd["slots"]:
                if slot["status"] != LIVE:
                    continue
                game = self.store.get_game(slot["game"])
                if game is None or game.status != FINISHED:
                    playing += 1
                else:
                    over[slot["slot"]] = game
        lb_updates: dict[str, dict[str, Any]] = {}
        lifted: list[str] = []
        for rnd in doc["rounds"]:
            for slot in rnd["slots"]:
                if slot["slot"] not in over or slot["status"] == DONE:
                    continue
                tables = tables_of(rnd, slot)
                if not all(s["status"] in (DONE, control.VOID) or s["slot"] in over
                           for s in tables):
                    continue  # another table still plays (or will play) this deal
                for s in tables:
                    if s["status"] not in (DONE, control.VOID):
                        self._record(pipe, doc, s, game_result(over[s["slot"]]), lb_updates)
                if len(tables) > 1:
                    lifted.append(embargo_id(doc, slot))
                changed = True
        self._rate_in_slot_order(pipe, doc, lb_updates)  # forfeits made by step 0
        if doc.get("closing") and not any(s["status"] == LIVE for r in doc["rounds"]
                                          for s in r["slots"]):
            lifted = control.close_out(doc)  # a cancel's last pass: no deal stays embargoed
            changed = True
        # 2. close complete rounds; pair the next Swiss round; finish (an arena: pair
        # whoever is free, finish when its clock has run out and its games are over)
        if doc["status"] != control.CANCELLED:
            changed |= (arena_format.step(doc, time.time())
                        if doc["settings"]["format"] == arena_format.ARENA
                        else self._close_rounds(doc))
        # 3. start pending games of the current round, up to `parallel` live
        new_games = []
        if control.schedules(doc):
            live_n = playing
            current = next((r for r in doc["rounds"]
                            if any(s["status"] != DONE for s in r["slots"])), {"slots": ()})
            for slot in current["slots"]:
                if live_n >= doc["settings"]["parallel"]:
                    break
                if slot["status"] == PENDING:
                    new_games.append(slot)
                    live_n += 1
        if not changed and not new_games:
            pipe.unwatch()
            return 0
        pipe.multi()
        if lifted:
            pipe.srem(embargo_key(self.p), *lifted)
        born_over = False
        started = []
        for slot in new_games:
            game = self._add_game(pipe, doc, slot)
            slot["game"] = game.id
            slot["status"] = LIVE
            # a first kick can end a game at once (R22): nobody will act to finish it
            born_over |= game.status != ACTIVE
            if game.status == ACTIVE:
                started.append(game)
        pipe.set(self.key(doc["id"]), json.dumps(doc, separators=(",", ":")))
        for bot, rating in lb_updates.items():
            pipe.hset(self.lb_key, bot, json.dumps(rating, separators=(",", ":")))
        if not control.steps(doc):
            pipe.srem(self.running_key, doc["id"])
        pipe.execute()
        for game in started:  # the step's transaction held: these games are under way
            self.arena.announce_status(game, ACTIVE)
        if doc["status"] != status_before:
            for hook in self.on_status:
                try:
                    hook(doc, status_before)
                except Exception:
                    log.exception("tournament %s: status hook failed", doc["id"])
        if born_over:
            return len(new_games) + self.advance(doc["id"])
        return len(new_games)

    def _record(self, pipe: Any, doc: dict[str, Any], slot: dict[str, Any],
                result: dict[str, Any] | None, lb_updates: dict[str, dict[str, Any]]
                ) -> None:
        slot["status"] = DONE if result is not None else control.VOID
        slot["result"] = result
        self._rate_in_slot_order(pipe, doc, lb_updates)

    def _rate_in_slot_order(self, pipe: Any, doc: dict[str, Any],
                            lb_updates: dict[str, dict[str, Any]]) -> None:
        """Apply to the ratings every recorded result whose earlier slots all have been:
        ratings take the games in slot order, whichever table finished first, so they
        are a function of the results alone. Each game keeps its place in that order
        (``recorded``) and both entrants' ratings before and after it (``rating``)."""
        step: dict[str, Any] = {}  # owners and credited entrants, read once per pass
        for rnd in doc["rounds"]:
            for slot in rnd["slots"]:
                if slot.get("recorded") is not None or slot["status"] == control.VOID:
                    continue  # rated already, or never will be
                if slot["status"] != DONE:
                    return  # a later result waits for this one
                doc["recorded"] += 1
                slot["recorded"] = doc["recorded"]
                if not step:
                    step["owners"] = self._owners([e["bot_id"] for e in doc["entrants"]])
                    step["credited"] = control.credited(doc)
                self._rate(pipe, doc, slot, lb_updates, step["owners"], step["credited"])

    def _rate(self, pipe: Any, doc: dict[str, Any], slot: dict[str, Any],
              lb_updates: dict[str, dict[str, Any]], owners: Mapping[str, str],
              credited: AbstractSet[str]) -> None:
        """One recorded game into the tournament's ratings and the leaderboard, under the
        rules of docs/ratings.md: a forfeit is a rated loss for the side that forfeited
        (a win for its opponent only when credited); a game both forfeited, or between
        bots of one owner, is not rated (``unrated`` says why)."""
        at = time.time()
        plan = rating_plan(doc, slot, owners, credited)
        if plan is None:
            return
        lb = {b: self._lb_entry(pipe, b, lb_updates) for b in slot["teams"]}
        winner, loser, winner_moves = plan
        rates = doc["ratings"]
        before = [dict(rates[b]) for b in slot["teams"]]
        new_w, new_l = ratings.rate(rates[winner], rates[loser])
        if winner_moves:
            rates[winner] = new_w
        rates[loser] = new_l
        slot["rating"] = [[r["mu"], r["sigma"], rates[b]["mu"], rates[b]["sigma"]]
                          for b, r in zip(slot["teams"], before, strict=True)]
        slot["rated_at"] = at
        created = self.arena.owners.created_of([owners[winner], owners[loser]])
        standing = (self.standing.of(created.get(owners[winner]), at),
                    self.standing.of(created.get(owners[loser]), at))
        lb_updates[winner], lb_updates[loser], _ = ratings.rate_published(
            lb[winner], lb[loser], (owners[winner], owners[loser]), at, winner_moves,
            standing)

    def _lb_entry(self, pipe: Any, bot: str, lb_updates: dict[str, dict[str, Any]]
                  ) -> dict[str, Any]:
        if bot not in lb_updates:
            raw = pipe.hget(self.lb_key, bot)  # immediate: the pipeline is watching
            lb_updates[bot] = json.loads(raw) if raw else ratings.blank()
        return lb_updates[bot]

    def _owners(self, bots: Sequence[str]) -> dict[str, str]:
        """Each bot's owner (read from the bot hashes, outside the watched transaction:
        another slot in a cluster, and an owner never changes)."""
        batch = self.store.r.pipeline(transaction=False)
        for b in bots:
            batch.hget(self.store.keys.bot(b), "owner")
        return {b: ratings.owner_of({"owner": o}, b)
                for b, o in zip(bots, batch.execute(), strict=True)}

    def _close_rounds(self, doc: dict[str, Any]) -> bool:
        changed = False
        while True:
            snapped = {h["round"] for h in doc["history"]}
            for rnd in doc["rounds"]:
                if any(s["status"] != DONE for s in rnd["slots"]):
                    return changed
                if rnd["round"] not in snapped:
                    if doc["settings"]["format"] == KNOCKOUT and knockout.add_tiebreaks(doc,
                                                                                        rnd):
                        return True  # a level match plays a tiebreak pair first
                    doc["history"].append({
                        "round": rnd["round"],
                        "ratings": {b: ratings.shown(r)
                                    for b, r in ratings_after(doc, rnd["round"]).items()},
                    })
                    changed = True
            # every round so far is complete
            settings = doc["settings"]
            if settings["format"] == SWISS and len(doc["rounds"]) < settings["rounds"]:
                table = standings(doc)
                met: dict[frozenset[str], list[int]] = {}
                for r in doc["rounds"]:
                    for pair in {frozenset(s["entrants"]) for s in r["slots"]}:
                        met.setdefault(pair, []).append(r["round"])
                byes = {row["bot_id"]: row["byes"] for row in table}
                still = [row["bot_id"] for row in table if row["bot_id"] not in doc.get("out", {})]
                if len(still) >= 2:  # entrants that left are not paired again
                    self._add_round(doc, *swiss_pairs(still, met, byes))
                    changed = True
                    continue
            lines = knockout.next_lines(doc) if settings["format"] == KNOCKOUT else None
            if lines is not None:  # the winners, in their places in the bracket
                self._add_round(doc, *knockout.pairs_of(lines))
                doc["rounds"][-1]["lines"] = lines
                changed = True
                continue
            doc["status"] = FINISHED
            doc["finished"] = int(time.time())
            return True

    def _add_game(self, pipe: Any, doc: dict[str, Any], slot: dict[str, Any]) -> Game:
        settings = doc["settings"]
        players = settings["players"]
        a, b = slot["teams"]
        seats: list[str | None] = [a, b] if players == 2 else [a, b, a, b]
        names = {e["bot_id"]: e["bot_name"] for e in doc["entrants"]}
        variants = Variants.from_dict(settings["variants"])
        state, _ = new_game(players, slot["seed"], variants)
        status = status_of(state, seats)
        meta: dict[str, Any] = {
            "players": players,
            "seed": slot["seed"],
            "variants": settings["variants"],
            "seats": seats,
            "names": [names[s] for s in seats if s],
            "created": int(time.time()),
            "creator": None,
            "tournament": {"id": doc["id"], "slot": slot["slot"], "round": slot["round"],
                           **({"analyse": True} if doc["settings"].get("analyse") else {})},
        }
        deals.seal(meta, chosen=False)  # derived from the tournament's seed: committed to
        rnd = doc["rounds"][slot["round"] - 1]
        if len(tables_of(rnd, slot)) > 1:
            # its cards are dealt at another table too: embargoed until all have finished
            meta["embargo"] = embargo_id(doc, slot)
            pipe.sadd(embargo_key(self.p), meta["embargo"])
        if settings.get("move_limit"):
            meta["move_limit"] = settings["move_limit"]
        if settings.get("time_bank"):
            meta["time_bank"] = settings["time_bank"]
        return self.store.add_game(pipe, meta, state, status, turn_bot(state, seats, status),
                                   deadline_for(meta, state, status))

    def withdraw(self, tid: str, bot_id: str, caller: str) -> dict[str, Any]:
        """``tournament_control.withdraw`` of this tournament: the arena's suspension calls
        it here, through the tournaments it is given, importing none of their modules."""
        return control.withdraw(self, tid, bot_id, caller)
