"""Tournaments any owner organizes and any bot enters by itself: registration, entry
conditions, the start at ``starts_at``, the organizer's authority, and the quotas that
stop a stranger.

**Organizers.** ``POST /tournaments`` with a bot's token: that bot's owner organizes the
tournament (``organizer``); with the admin token nobody does (the service's own, like the
schedule's) and the admin overrides every check here. The organizer starts, pauses,
resumes, cancels its tournament and excludes an entrant (with a reason shown to all);
another owner's token is 403 ``not-organizer``. An organizer names as entrants only its
own bots (entering is a bot's consent: no one enters another owner's bot); it cannot
choose the ``seed`` or ``trusted`` of a tournament others enter (it would know, or let its
bot see, the cards).

**Registration.** A tournament created with ``registration`` (``open``, or ``private``
with a join code the organizer hands out), a ``starts_at`` or no ``entrants`` is
``registering``: bots enter with their own token (``enter``), leave before the start
(``leave``), and at ``starts_at`` (or the organizer's ``start``) it becomes the tournament
``Tournaments.plan`` makes of its entrants, in place, in one optimistic transaction on its
document — so it starts once however many workers try (``start_due``: the clock loop of
every worker; a claim key keeps the others from doing the work twice). Fewer entrants than
``min_entrants`` then: house bots fill it up when it asks (``house_fill``) and a house is
playing and at least one bot not the house's entered; else it is cancelled, with the
reason, and its entrants are told.

**Entry conditions**, each refused with a problem type of its own: the tournament takes
entries (``entry-closed``; an arena takes late entrants until its clock ends), the join
code (``entry-code``), a validated bot (``entry-not-validated``: it passed a ladder's
validation game; default for open tournaments, and only while the service can validate,
i.e. house bots play), ``min_rated_games`` on the leaderboard (``entry-rated-games``), a
rating band on the leaderboard ordinal (``entry-rating-band``), one bot per owner
(``entry-one-per-owner``, default), ``max_entrants`` (``tournament-full``), and the bot's
quota of open entries (``entry-quota``).

**Quotas** (``DEFAULTS``, for organizers other than the admin): tournaments created per
owner per day and open (registering, running or paused) at once (``tournament-quota``), and
the games one may create (its size, checked at creation against ``max_entrants``; an arena
stops pairing there). A tournament whose entrants are all one owner's is unrated
(``rated`` false), as every game between one owner's bots is.

**Keys** (all under the tournaments' hash tag): ``{p}tours:registering`` (sorted set, id
by ``starts_at``; +inf: started by its organizer), ``{p}tours:owner:{owner}`` (ids an
owner organized), ``{p}tours:made:{owner}:{day}`` (count, expiring), ``{p}tours:bot:{bot}``
(ids a bot entered), ``{p}tour:{id}:starting`` (the start's claim). A registering
document expires ``ARENA_TOURNAMENT_REGISTRATION_TTL`` after creation, or a day after its
``starts_at`` if no worker ever started it; one cancelled at its start for want of
entrants, ``ARENA_TOURNAMENT_UNSTARTED_RETENTION`` after.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import random
import secrets
import time
from collections.abc import Callable
from typing import Any

import redis

from service.arena.accounts.owners import HOUSE_OWNER
from service.arena.core import ratings
from service.arena.core.problems import Problem
from service.arena.tournaments import arena_format, control, knockout
from service.arena.tournaments.pairing import KNOCKOUT, ROUND_ROBIN, SWISS, duplicate_setting
from service.arena.tournaments.size import MAX_ENTRANTS, default_rounds, tournament_games
from service.arena.tournaments.starting import (
    ADMIN,
    ATTEMPTS,
    REGISTERING,
    StartedMeanwhile,
    Starting,
)
from service.engine import Variants

log = logging.getLogger(__name__)

OPEN, PRIVATE = "open", "private"
DAY_S = 86400

DEFAULTS: dict[str, Any] = {
    # tournaments an owner may create a day, and have registering or running at once: a
    # bot author runs a gauntlet or two a day; a stranger cannot flood the lobby
    "ARENA_TOURNAMENTS_PER_OWNER_DAY": 10,
    "ARENA_TOURNAMENTS_OPEN_PER_OWNER": 3,
    # tournaments not yet over a bot may be entered in at once (each plays its games at
    # once, so more is a bot that times out everywhere)
    "ARENA_TOURNAMENT_ENTRIES_PER_BOT": 5,
    # games a tournament organized by an owner (not the admin) may create: a 64-bot Swiss
    # of its default 6 rounds of 2 games (384) fits, a 64-bot round robin (4032) does not
    "ARENA_TOURNAMENT_GAMES_PER_OWNER": 400,
    # seconds a registering tournament with no starts_at waits for its organizer's start
    "ARENA_TOURNAMENT_REGISTRATION_TTL": 7 * DAY_S,
    # seconds a tournament cancelled at its start for want of entrants is kept
    "ARENA_TOURNAMENT_UNSTARTED_RETENTION": DAY_S,
    # "1": open tournaments ask house bots to fill them up to min_entrants by default
    "ARENA_TOURNAMENT_HOUSE_FILL": "1",
}


def code_hash(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


class Registration(Starting):
    """Registration, entry, start and the organizer's authority over ``Tournaments``."""

    def __init__(self, tournaments: Any, config: dict[str, Any] | None = None) -> None:
        cfg = {**DEFAULTS, **(config or {})}
        self.t = tournaments
        self.r: redis.Redis = tournaments.r
        self.p = tournaments.p
        self.store = tournaments.store
        self.per_day = int(cfg["ARENA_TOURNAMENTS_PER_OWNER_DAY"])
        self.open_per_owner = int(cfg["ARENA_TOURNAMENTS_OPEN_PER_OWNER"])
        self.entries_per_bot = int(cfg["ARENA_TOURNAMENT_ENTRIES_PER_BOT"])
        self.games_per_owner = int(cfg["ARENA_TOURNAMENT_GAMES_PER_OWNER"])
        self.registration_ttl = int(cfg["ARENA_TOURNAMENT_REGISTRATION_TTL"])
        self.unstarted_retention = int(cfg["ARENA_TOURNAMENT_UNSTARTED_RETENTION"])
        self.house_fill = str(cfg["ARENA_TOURNAMENT_HOUSE_FILL"]) != "0"
        # what a started, finished or cancelled tournament tells its entrants: the
        # arena's notices (turn long-poll) and the webhooks (wired by the app)
        self.on_notice: list[Callable[[list[str], dict[str, Any]], None]] = []

    # --- keys ---------------------------------------------------------------------------

    def owner_key(self, owner: str) -> str:
        return f"{self.p}tours:owner:{owner}"

    # --- who asks ------------------------------------------------------------------------

    def owner_of(self, caller: str) -> str | None:
        return None if caller == ADMIN else self.t.arena.owners.owner_of(caller)

    def authorize(self, doc: dict[str, Any], caller: str) -> None:
        """The organizer's commands: the admin, or a bot of the organizer's owner."""
        if caller == ADMIN:
            return
        organizer = doc.get("organizer")
        if organizer is None or self.owner_of(caller) != organizer:
            who = "the service's operator" if organizer is None else "another owner"
            raise Problem("not-organizer", f"this tournament is organized by {who}: only "
                          "its organizer's bots (or the admin token) may control it")

    # --- creating -----------------------------------------------------------------------

    def create(self, body: dict[str, Any], caller: str, schedule: str | None = None,
               starts_at: float | None = None) -> dict[str, Any]:
        """``POST /tournaments``: a tournament that starts now (entrants named, no
        registration) or a registering one. ``caller``: the bot whose owner organizes it,
        or ``ADMIN`` (also the schedule's)."""
        owner = self.owner_of(caller)
        entrants = list(body.get("entrants") or [])
        registering = (body.get("registration") is not None or body.get("starts_at")
                       is not None or not entrants or starts_at is not None)
        if owner is not None:
            self._organizer_checks(body, owner, entrants, registering)
        if not registering:
            if len(entrants) < 2:
                raise Problem("validation", "a tournament that starts at once names 2 "
                              "entrants or more", errors={"entrants": ["at least 2"]})
            extra = {"organizer": owner, "creator": None if owner is None else caller,
                     "rated": len(set(self.t._owners(entrants).values())) > 1}
            self._count_created(owner)
            out = self.t.create(body, extra)
            self._track(out["id"], owner, entrants)
            if body["format"] == arena_format.ARENA:
                self.r.sadd(self.arenas_key, out["id"])
            return out
        return self._create_registering(body, caller, owner, entrants, schedule, starts_at)

    def _organizer_checks(self, body: dict[str, Any], owner: str, entrants: list[str],
                          registering: bool) -> None:
        if entrants:
            mine = self.t.arena.owners.owners_of(entrants)
            others = sorted(b for b in entrants if mine.get(b) != owner)
            if others:
                msg = (f"not your owner's bots: {', '.join(others)}; other bots enter "
                       "themselves (POST /tournaments/{id}/entrants with their own token)")
                raise Problem("forbidden-entrant", msg, errors={"entrants": [msg]})
        if registering:
            for field in ("seed", "trusted"):
                if body.get(field) not in (None, False):
                    msg = (f"{field} is for tournaments of your own bots only: in one that "
                           "others enter, it would let you (or your bots) know the cards")
                    raise Problem("validation", msg, errors={field: [msg]})
        cap = self.games_per_owner
        n = body.get("max_entrants") or (len(entrants) if not registering else MAX_ENTRANTS)
        fmt = body["format"]
        if cap and fmt != arena_format.ARENA:
            games = tournament_games(fmt, n, body.get("rounds"),
                                     body.get("games_per_pairing", 2))
            if games > cap:
                field = "max_entrants" if registering else "entrants"
                msg = (f"{games} games with {n} entrants; a tournament organized by an "
                       f"owner may create at most {cap} (ARENA_TOURNAMENT_GAMES_PER_OWNER): "
                       "fewer entrants, rounds or games per pairing")
                raise Problem("validation", msg, errors={field: [msg]})
        self._quota(owner)

    def _quota(self, owner: str) -> None:
        day = int(time.time()) // DAY_S
        made = self.r.get(f"{self.p}tours:made:{owner}:{day}")
        if self.per_day and made is not None and int(made) >= self.per_day:
            raise Problem("tournament-quota", f"your owner has created {self.per_day} "
                          "tournaments today (ARENA_TOURNAMENTS_PER_OWNER_DAY)",
                          headers={"Retry-After": str(DAY_S - int(time.time()) % DAY_S)})
        if self.open_per_owner:
            open_ = self._open_of(self.owner_key(owner))
            if len(open_) >= self.open_per_owner:
                raise Problem("tournament-quota", f"your owner has {len(open_)} tournaments "
                              "registering or running (ARENA_TOURNAMENTS_OPEN_PER_OWNER): "
                              "cancel one or wait until one is over",
                              headers={"Retry-After": "60"})

    def _count_created(self, owner: str | None) -> None:
        if owner is None:
            return
        key = f"{self.p}tours:made:{owner}:{int(time.time()) // DAY_S}"
        pipe = self.r.pipeline(transaction=True)
        pipe.incr(key)
        pipe.expire(key, 2 * DAY_S)
        pipe.execute()

    def _open_of(self, key: str) -> list[str]:
        """The tournaments of an index set (an owner's, a bot's) not over yet; the others
        leave the set."""
        ids = sorted(m.decode() for m in self.r.smembers(key))
        if not ids:
            return []
        raws = self.r.mget([self.t.key(i) for i in ids])
        live, gone = [], []
        for tid, raw in zip(ids, raws, strict=True):
            status = json.loads(raw)["status"] if raw else None
            if status in (REGISTERING, control.RUNNING, control.PAUSED):
                live.append(tid)
            else:
                gone.append(tid)
        if gone:
            self.r.srem(key, *gone)
        return live

    def _track(self, tid: str, owner: str | None, bots: list[str]) -> None:
        pipe = self.r.pipeline(transaction=False)
        if owner is not None:
            pipe.sadd(self.owner_key(owner), tid)
        for b in bots:
            pipe.sadd(self.bot_key(b), tid)
        pipe.execute()

    def _create_registering(self, body: dict[str, Any], caller: str, owner: str | None,
                            entrants: list[str], schedule: str | None,
                            starts_at: float | None) -> dict[str, Any]:
        now = time.time()
        mode = body.get("registration") or OPEN
        minimum = body.get("min_entrants") or 2
        maximum = body.get("max_entrants") or MAX_ENTRANTS
        fmt = body["format"]
        if minimum > maximum:
            raise Problem("validation", "min_entrants is more than max_entrants",
                          errors={"min_entrants": ["at most max_entrants"]})
        if body.get("duplicate") and not body.get("trusted") and minimum < 4:
            msg = "duplicate deals need 4 entrants or more: set min_entrants to 4"
            raise Problem("validation", msg, errors={"min_entrants": [msg]})
        if len(entrants) > maximum:
            raise Problem("validation", "more entrants than max_entrants",
                          errors={"entrants": [f"at most {maximum}"]})
        starts_at = starts_at if starts_at is not None else body.get("starts_at")
        if starts_at is not None and starts_at < now - 60:
            raise Problem("validation", "starts_at is in the past",
                          errors={"starts_at": ["in the future (unix seconds)"]})
        code = None
        if mode == PRIVATE:
            code = body.get("code") or secrets.token_urlsafe(9)
        conditions = {"validated": mode == OPEN, "min_rated_games": 0, "rating_min": None,
                      "rating_max": None, "one_per_owner": True,
                      **(body.get("conditions") or {})}
        try:
            variants = Variants.from_dict(body.get("variants") or {})
        except Exception as exc:
            raise Problem("validation", str(exc), errors={"variants": [str(exc)]}) from None
        fill = body.get("house_fill")
        plan_body = {k: v for k, v in body.items()
                     if k not in ("entrants", "registration", "code", "starts_at",
                                  "min_entrants", "max_entrants", "conditions", "house_fill",
                                  "name")}
        if fmt != arena_format.ARENA:
            plan_body.setdefault("parallel", arena_format.DEFAULT_PARALLEL)
        n = max(minimum, 2)
        settings = {
            "format": fmt, "players": body.get("players", 2),
            "games_per_pairing": 1 if fmt == arena_format.ARENA
            else body.get("games_per_pairing", 2),
            "duplicate": False if fmt == arena_format.ARENA
            else duplicate_setting(body.get("duplicate"), n, bool(body.get("trusted"))),
            "trusted": bool(body.get("trusted", False)),
            "rounds": (body.get("rounds") or default_rounds(n)) if fmt == SWISS
            else knockout.rounds_for(n) if fmt == KNOCKOUT
            else n - 1 + n % 2 if fmt == ROUND_ROBIN else 1,
            "variants": variants.changed(), "move_limit": body.get("move_limit"),
            "time_bank": body.get("time_bank") or None,
            "parallel": plan_body.get("parallel", arena_format.DEFAULT_PARALLEL),
            "no_show": body.get("no_show", control.DEFAULT_NO_SHOW_S),
            "max_timeouts": body.get("max_timeouts"),
            "analyse": bool(body.get("analyse", False)),
            **({"duration": body["duration"]} if fmt == arena_format.ARENA else {}),
        }
        names = self.store.bot_names(entrants) if entrants else {}
        unknown = sorted(b for b, nm in names.items() if not nm)
        if unknown:
            raise Problem("not-found", f"no such bot: {', '.join(unknown)}")
        owners = self.t.arena.owners.owners_of(entrants) if entrants else {}
        tid = secrets.token_hex(6)
        doc: dict[str, Any] = {
            "id": tid, "name": body.get("name") or "tournament", "status": REGISTERING,
            "created": int(now), "finished": None, "settings": settings,
            "entrants": [{"bot_id": b, "bot_name": names[b], "owner": owners[b],
                          "joined": int(now)} for b in entrants],
            "rounds": [], "ratings": {}, "history": [], "recorded": 0, "warnings": [],
            "organizer": owner, "creator": None if owner is None else caller,
            "schedule": schedule, "reason": None, "excluded": [],
            "registration": {
                "mode": mode, "code": code_hash(code) if code else None,
                "starts_at": starts_at, "min_entrants": minimum, "max_entrants": maximum,
                "conditions": conditions,
                "house_fill": self.house_fill and mode == OPEN if fill is None else fill,
            },
            "body": plan_body,
        }
        if owner is not None:
            doc["game_cap"] = self.games_per_owner or None
        ttl = (self.registration_ttl if starts_at is None
               else max(60, int(starts_at - now) + DAY_S))
        seq = self.r.incr(f"{self.p}tours:seq")
        pipe = self.r.pipeline(transaction=True)
        pipe.set(self.t.key(tid), json.dumps(doc, separators=(",", ":")), ex=ttl)
        pipe.zadd(f"{self.p}tours:all", {tid: seq})
        pipe.zadd(self.registering_key, {tid: starts_at if starts_at is not None
                                         else float("inf")})
        pipe.execute()
        self._count_created(owner)
        self._track(tid, owner, entrants)
        out = self.t.detail(tid)
        if code:
            out["code"] = code  # shown only here, to the organizer
        return out

    # --- entering and leaving ------------------------------------------------------------

    def enter(self, tid: str, bot: str, code: str | None) -> dict[str, Any]:
        """``bot`` enters ``tid`` itself (its own token): see the module docstring."""
        if self.t.arena.owners.is_suspended(bot):
            raise Problem("suspended", "this bot is suspended")
        name = self.store.bot_names([bot]).get(bot) or bot
        owner = self.t.arena.owners.owner_of(bot)
        facts = self._facts(bot)
        running_arena = False
        for _ in range(ATTEMPTS):
            try:
                with self.r.pipeline(transaction=True) as pipe:
                    pipe.watch(self.t.key(tid))
                    doc = self._read(pipe, tid)
                    if any(e["bot_id"] == bot for e in doc["entrants"]):
                        pipe.unwatch()
                        if doc["status"] != REGISTERING and bot in control.out_of(doc):
                            raise Problem("entry-closed", "your bot has left this "
                                          "tournament; it cannot enter it again")
                        return self.t.detail(tid)  # entered already: safe to retry
                    running_arena = self._check_entry(doc, bot, owner, code, facts)
                    if running_arena:
                        arena_format.join(doc, bot, name, owner)
                    else:
                        doc["entrants"].append({"bot_id": bot, "bot_name": name,
                                                "owner": owner, "joined": int(time.time())})
                    pipe.multi()
                    pipe.set(self.t.key(tid), json.dumps(doc, separators=(",", ":")),
                             keepttl=True)
                    pipe.sadd(self.bot_key(bot), tid)
                    pipe.execute()
                    break
            except redis.WatchError:
                time.sleep(random.uniform(0.001, 0.01))
        else:
            raise Problem("service-unavailable", "too much contention; retry",
                          headers={"Retry-After": "1"})
        if running_arena:
            self.t.advance(tid)  # paired at once if another entrant is free
        return self.t.detail(tid)

    def _read(self, pipe: Any, tid: str) -> dict[str, Any]:
        raw = pipe.get(self.t.key(tid))
        if raw is None:
            raise Problem("not-found", "no such tournament")
        return json.loads(raw)

    def _facts(self, bot: str) -> dict[str, Any]:
        """What the entry conditions ask of a bot: validated, its leaderboard entry, and
        its open entries (the quota)."""
        pipe = self.r.pipeline(transaction=False)
        pipe.hget(self.store.keys.bot(bot), "validated")
        pipe.exists(f"{self.store.p}house:alive")
        validated, alive = pipe.execute()
        board = self.r.hget(self.t.lb_key, bot)
        entry = json.loads(board) if board else ratings.blank()
        return {"validated": validated is not None, "can_validate": bool(alive),
                "games": int(entry.get("games", 0)),
                "ordinal": ratings.shown(entry)["ordinal"] if board else
                ratings.shown(ratings.initial())["ordinal"],
                "open": self._open_of(self.bot_key(bot))}

    def _check_entry(self, doc: dict[str, Any], bot: str, owner: str, code: str | None,
                     facts: dict[str, Any]) -> bool:
        """Refuse an entry a condition forbids (each its own problem); True when it is a
        late entry into a running arena."""
        reg = doc.get("registration")
        late = (doc["settings"]["format"] == arena_format.ARENA
                and doc["status"] == control.RUNNING and time.time() < doc.get("ends_at", 0))
        if reg is None or (doc["status"] != REGISTERING and not late):
            raise Problem("entry-closed", f"the tournament is {doc['status']}: it takes no "
                          "entries" + ("" if reg else " (its entrants were named by its "
                                       "organizer)"))
        if any(x["bot_id"] == bot for x in doc.get("excluded") or ()):
            raise Problem("entry-closed", "the organizer excluded your bot from this "
                          "tournament")
        if reg["mode"] == PRIVATE and not (code and hmac.compare_digest(
                code_hash(code), reg["code"] or "")):
            raise Problem("entry-code", "this private tournament needs its join code "
                          "(`code`), from its organizer" if not code else
                          "that is not this tournament's join code")
        cond = reg["conditions"]
        if cond.get("validated") and facts["can_validate"] and not facts["validated"] \
                and owner != HOUSE_OWNER:
            raise Problem("entry-not-validated", "this tournament admits validated bots "
                          "only: join any ladder once (POST /ladders/{name}/entry), and "
                          "one game against a house bot validates your bot for good")
        if facts["games"] < (cond.get("min_rated_games") or 0):
            raise Problem("entry-rated-games", f"this tournament needs "
                          f"{cond['min_rated_games']} rated games on the leaderboard; "
                          f"your bot has {facts['games']}")
        lo, hi = cond.get("rating_min"), cond.get("rating_max")
        if (lo is not None and facts["ordinal"] < lo) or (hi is not None
                                                         and facts["ordinal"] > hi):
            raise Problem("entry-rating-band", f"this tournament takes leaderboard "
                          f"ordinals from {lo} to {hi}; your bot's is "
                          f"{facts['ordinal']:.2f}")
        if cond.get("one_per_owner", True) and owner != HOUSE_OWNER and any(
                e.get("owner") == owner and e["bot_id"] not in control.out_of(doc)
                for e in doc["entrants"]):
            raise Problem("entry-one-per-owner", "another bot of your owner has entered "
                          "this tournament (one bot per owner)")
        if len(doc["entrants"]) >= reg["max_entrants"]:
            raise Problem("tournament-full", f"the tournament has its "
                          f"{reg['max_entrants']} entrants")
        if self.entries_per_bot and owner != HOUSE_OWNER and \
                len([t for t in facts["open"] if t != doc["id"]]) >= self.entries_per_bot:
            raise Problem("entry-quota", f"your bot is entered in {len(facts['open'])} "
                          "tournaments not yet over (ARENA_TOURNAMENT_ENTRIES_PER_BOT): "
                          "leave one or wait until one is over",
                          headers={"Retry-After": "60"})
        return late

    def leave(self, tid: str, bot: str, caller: str) -> dict[str, Any]:
        """The entrant ``bot`` leaves (its own token): before the start it is simply no
        longer entered; after, it withdraws (``control.withdraw``: its live and unplayed
        games are forfeited)."""
        doc = self.t.doc(tid)
        if doc["status"] != REGISTERING:
            return control.withdraw(self.t, tid, bot, caller)
        if not any(e["bot_id"] == bot for e in doc["entrants"]):
            raise Problem("not-found", f"bot {bot} is not an entrant of this tournament")
        if caller != bot:
            raise Problem("forbidden-entrant", "only the entrant itself (its own token) may "
                          "withdraw it")

        def change(doc: dict[str, Any]) -> bool:
            if doc["status"] != REGISTERING:
                raise StartedMeanwhile  # its games name the entrant now: it withdraws instead
            if not any(e["bot_id"] == bot for e in doc["entrants"]):
                raise Problem("not-found", f"bot {bot} is not an entrant of this tournament")
            doc["entrants"] = [e for e in doc["entrants"] if e["bot_id"] != bot]
            return True

        try:
            out = self._change_registering(tid, change)
        except StartedMeanwhile:
            return control.withdraw(self.t, tid, bot, caller)
        self.r.srem(self.bot_key(bot), tid)
        return out

    def _change_registering(self, tid: str, change: Callable[[dict[str, Any]], bool],
                            ) -> dict[str, Any]:
        """``change`` a registering document in one optimistic transaction (its TTL
        kept); if it has started meanwhile, ``change`` sees that status."""
        for _ in range(ATTEMPTS):
            try:
                with self.r.pipeline(transaction=True) as pipe:
                    pipe.watch(self.t.key(tid))
                    doc = self._read(pipe, tid)
                    if not change(doc):
                        pipe.unwatch()
                        return self.t.detail(tid)
                    pipe.multi()
                    pipe.set(self.t.key(tid), json.dumps(doc, separators=(",", ":")),
                             keepttl=True)
                    pipe.execute()
                    return self.t.detail(tid)
            except redis.WatchError:
                time.sleep(random.uniform(0.001, 0.01))
        raise Problem("service-unavailable", "too much contention; retry",
                      headers={"Retry-After": "1"})

    # --- the organizer's commands --------------------------------------------------------

    def exclude(self, tid: str, bot: str, reason: str, caller: str) -> dict[str, Any]:
        """The organizer excludes an entrant, ``reason`` shown to all: before the start it
        is taken off the entrants (and may not enter again); after, it leaves as one
        disqualified (``excluded``), forfeiting its live and unplayed games."""
        doc = self.t.doc(tid)
        self.authorize(doc, caller)
        if not any(e["bot_id"] == bot for e in doc["entrants"]):
            raise Problem("not-found", f"bot {bot} is not an entrant of this tournament")
        note = {"bot_id": bot, "reason": reason, "at": int(time.time())}
        if doc["status"] == REGISTERING:
            def change(doc: dict[str, Any]) -> bool:
                if doc["status"] != REGISTERING:
                    raise Problem("service-unavailable", "the tournament has just started; "
                                  "retry", headers={"Retry-After": "1"})
                name = next((e["bot_name"] for e in doc["entrants"]
                             if e["bot_id"] == bot), bot)
                doc["entrants"] = [e for e in doc["entrants"] if e["bot_id"] != bot]
                doc.setdefault("excluded", []).append({**note, "bot_name": name})
                return True
            out = self._change_registering(tid, change)
            self.r.srem(self.bot_key(bot), tid)
            return out

        def leave(doc: dict[str, Any]) -> bool:
            if bot in control.out_of(doc):
                return False
            if doc["status"] not in (control.RUNNING, control.PAUSED):
                raise Problem("tournament-over", f"the tournament is {doc['status']}")
            control.leave(doc, bot, "excluded", time.time())
            control.out_of(doc)[bot]["note"] = reason
            return True
        return control._change(self.t, tid, leave)

    def cancel(self, tid: str, caller: str, reason: str | None = None) -> dict[str, Any]:
        doc = self.t.doc(tid)
        self.authorize(doc, caller)
        why = reason or ("cancelled by its organizer" if caller != ADMIN
                         else "cancelled by the operator")
        if doc["status"] == REGISTERING:
            if not self._close(tid, why, keep_s=self.unstarted_retention):
                return self.cancel(tid, caller, reason)  # it started meanwhile
            return self.t.detail(tid)
        was = doc["status"]
        out = control.cancel(self.t, tid, why)
        if was in (control.RUNNING, control.PAUSED):
            self.tell([e["bot_id"] for e in doc["entrants"]], doc, "cancelled", why)
        return out

    def start(self, tid: str, caller: str) -> dict[str, Any]:
        """The organizer starts its registering tournament now (before ``starts_at``)."""
        doc = self.t.doc(tid)
        self.authorize(doc, caller)
        if doc["status"] != REGISTERING:
            if doc["status"] in (control.RUNNING, control.PAUSED):
                return self.t.detail(tid)  # started already: safe to retry
            raise Problem("tournament-over", f"the tournament is {doc['status']}")
        self.start_one(tid, by_organizer=True)
        return self.t.detail(tid)

    def pause(self, tid: str, caller: str) -> dict[str, Any]:
        self._not_registering(tid, caller, "pause")
        return control.pause(self.t, tid)

    def resume(self, tid: str, caller: str) -> dict[str, Any]:
        self._not_registering(tid, caller, "resume")
        return control.resume(self.t, tid)

    def _not_registering(self, tid: str, caller: str, doing: str) -> None:
        doc = self.t.doc(tid)
        self.authorize(doc, caller)
        if doc["status"] == REGISTERING:
            raise Problem("not-started", f"the tournament has not started: nothing to "
                          f"{doing} (start it, or cancel it)")

    # --- telling the entrants -------------------------------------------------------------

    def tell(self, bots: list[str], doc: dict[str, Any], event: str,
             reason: str | None = None) -> None:
        notice = {"event": event, "tournament_id": doc["id"], "name": doc["name"],
                  "reason": reason}
        for hook in self.on_notice:
            try:
                hook(bots, notice)
            except Exception:
                log.exception("tournament notice hook failed for %s", doc["id"])

    def status_changed(self, doc: dict[str, Any], before: str) -> None:
        """``Tournaments.advance`` moved ``doc`` from ``before`` to its status: a finished
        tournament tells its entrants."""
        if doc["status"] == "finished" and before != "finished":
            self.tell([e["bot_id"] for e in doc["entrants"]], doc, "finished")
