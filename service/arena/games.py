"""The game commands, between HTTP (``service.http.routes``) and Redis
(``service.storage.store``).

No rules live here: every decision about a game is the engine's (``apply`` raises
``IllegalAction``), and every view is the engine's ``seat_view``/``spectator_view``
wrapped with the game's id, version and seats. What this layer adds is who may act for
which seat, compare-and-set retries and idempotent replies; waiting for changes is
``service.arena.waiting`` (a part of ``Arena``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from service import metrics
from service.addresses import network_of
from service.arena import clock, deals
from service.arena.fanout import Feed
from service.arena.invitations import Invitations, seat_invited
from service.arena.owners import HOUSE_OWNER, Owners
from service.arena.problems import Problem
from service.arena.status import (
    ACTIVE,
    EMBARGOED,
    FINISHED,
    WAITING,
    deadline_for,
    embargo_key,
    status_of,
    turn_bot,
)
from service.arena.waiting import (
    KEEPALIVE_S,
    SEND_BUFFER_BYTES,
    WRITE_TIMEOUT_S,
    Waiting,
)
from service.engine import (
    IllegalAction,
    InvalidVariants,
    State,
    Variants,
    action_name,
    apply,
    build_record,
    new_game,
    parse_action,
    redact_event,
    seat_view,
    spectator_view,
)
from service.engine.record import record_from_events
from service.jsonio import dumps
from service.storage.commits import commit_time
from service.storage.store import Game, Store
from service.storage.wakeups import (
    SKIP,
    GameMessage,
    ShardedWakeups,
    Wakeups,
    game_message,
    glob_escape,
)

log = logging.getLogger(__name__)

CAS_ATTEMPTS = 50
PERSON_MOVE_LIMIT_S = 60.0  # seconds a decision, for a game a person sits down in


def view_of(game: Game, engine_view: dict[str, Any], version: int, status: str,
            deadline: float | None, updated: float | None, now: float | None = None
            ) -> dict[str, Any]:
    """``engine_view`` wrapped with the game's identity, seats and deadline, built field
    by field in ``schemas.View``'s order and types: exactly what ``View().dump`` makes of
    it (tests/service/test_view_fields.py checks byte identity across random games, for
    every seat and the spectator), without marshmallow's per-field cost on the hot path.
    The engine's nested parts (kicks, tricks, score items) already have the nested
    schemas' keys, order and types, so they pass through."""
    v = engine_view
    active = status == ACTIVE
    limit = game.meta.get("move_limit")
    names = game.meta["names"]
    out: dict[str, Any] = {
        "id": game.id,
        "version": int(version),
        "status": status,
        "seats": [{"seat": i, "bot_id": b, "bot_name": names[i]}
                  for i, b in enumerate(game.seats)],
        "players": v["players"],
        "seat": v["seat"],
        "team": v["team"],
        "your_turn": bool(v["legal_actions"]) and active,
        "teams": v["teams"],
        "variants": v["variants"],
        "ply": v["ply"],
        "phase": v["phase"],
        "turn": v["turn"],
        "decision": v["decision"],
        "legal_actions": v["legal_actions"] if active else [],
        "hand_number": v["hand_number"],
        "dealer": v["dealer"],
        "beggar": v["beggar"],
        "beg": v["beg"],
        "hand": v["hand"],
        "hand_sizes": v["hand_sizes"],
        "kicks": v["kicks"],
        "trump": v["trump"],
        "trick": v["trick"],
        "tricks": v["tricks"],
        "scores": v["scores"],
        "target": v["target"],
        "hand_items": v["hand_items"],
        "last_hand_items": v["last_hand_items"],
        "winner": v["winner"],
        "seed_chosen": bool(game.meta.get("seed_chosen")),
        "seed_commitment": game.meta.get("seed_commitment"),
    }
    if "hands" in v:
        out["hands"] = v["hands"]
    if "seed" in v:
        out["seed"] = v["seed"]
        out["seed_salt"] = game.meta.get("seed_salt")  # revealed with the seed (deals)
    out["move_limit"] = float(limit) if limit is not None else None
    # the view's seat's bank (a spectator: the seat in turn's), service.arena.clock
    out["bank_left"] = clock.bank_of(game.meta, v["seat"] if v["seat"] is not None
                                     else v["turn"] if active else None)
    if deadline is None:
        out["deadline"] = out["time_left"] = None
    else:
        out["deadline"] = float(deadline)
        left = deadline - (time.time() if now is None else now)
        out["time_left"] = float(round(max(0.0, left), 3))
    out["updated_at"] = float(updated) if updated is not None else None
    return out


class Arena(Waiting):
    """Use cases over one ``Store``. Holds no game data between requests."""

    def __init__(self, store: Store, keepalive_s: float = KEEPALIVE_S) -> None:
        self.store = store
        self.keepalive_s = keepalive_s
        self.write_timeout_s = WRITE_TIMEOUT_S  # ARENA_SSE_WRITE_TIMEOUT
        self.send_buffer = SEND_BUFFER_BYTES  # ARENA_SSE_SEND_BUFFER; 0: the kernel's
        # A game a person's account sits down in gets this move limit if it has none, so
        # a closed browser tab cannot hold the game (and its bots) forever.
        self.person_move_limit = PERSON_MOVE_LIMIT_S
        # One pub/sub listener per process for every long-poll, stream and waiting action.
        prefix = glob_escape(store.p)
        hub = ShardedWakeups if store.publish == "SPUBLISH" else Wakeups
        self.wakeups = hub(store.r, [f"{prefix}game:*:changed"])
        self.wakeups.on_message = self._heard
        head, _, tail = store.game_channel("\0").partition("\0")
        self._game_channel = (head, tail)
        # game id -> the newest version this process handed to its own waiters when it
        # committed it (``_tell_local_waiters``), until the listener hears Redis echo it.
        self._told: dict[str, int] = {}
        # Called with a game that an action (or a timeout) just finished, if it belongs to
        # a tournament or a ladder. Best effort: a failure is logged and the sweeper's periodic
        # re-check of open tournaments repairs it.
        self.on_finish: list[Callable[[Game], None]] = []
        # Called with (game, status) when a game becomes active or finished, by the process
        # that committed it (webhook start/end notifications, ``service.arena.callbacks``).
        # Best effort, like ``on_finish``.
        self.on_status: list[Callable[[Game, str], None]] = []
        # game id -> the feed this process's event streams of that game share
        # (``service.arena.fanout``): one read per change per process, whatever the viewers.
        self._feeds: dict[str, Feed] = {}
        self._feeds_lock = threading.Lock()
        # owners, admission and suspension; invitations (consent to play): the app
        # factory replaces them with ones built from its settings (``configure``)
        self.owners = Owners(store)
        self.invitations = Invitations(self)
        # the tournaments and ladders a suspension withdraws a bot from (the app sets them)
        self.tournaments: Any = None
        self.ladders: Any = None

    def configure(self, config: dict[str, Any]) -> None:
        """Owners and invitations with the deployment's settings (``ARENA_OWNER_*``,
        ``ARENA_INVITATION_TTL``...)."""
        self.owners = Owners(self.store, config)
        hooks = self.invitations.on_invite
        self.invitations = Invitations(self, config)
        self.invitations.on_invite = hooks

    def _heard(self, channel: str, data: Any, generation: int) -> Any:
        """Every message the listener hears: game changes move the game cache on; the
        parsed message (header only: the state is decoded when someone needs it) is what
        the game's waiters get, and a game that became a bot's turn wakes that bot's
        waiters for a turn in any game."""
        head, tail = self._game_channel
        if channel.startswith(head) and channel.endswith(tail):
            game_id = channel[len(head):-len(tail)]
            msg = game_message(data)
            self.store.games.heard(game_id, msg, generation)
            if msg is not None and msg.updated is not None:
                metrics.observe_wakeup(msg.updated)
            told = self._told.get(game_id)
            if told is not None and msg is not None:
                if msg.version >= told:
                    self._told.pop(game_id, None)
                if msg.version == told:
                    return SKIP  # this process's waiters heard it when it was committed
            if msg is not None and msg.turn_bot is not None:
                self.wakeups.deliver(self.store.bot_turn_channel(msg.turn_bot), msg.version)
            return msg
        return None

    def _tell_local_waiters(self, game_id: str, version: int, new_turn_bot: str | None
                            ) -> None:
        """Wake this process's waiters on a change it has just committed, without waiting
        for Redis to echo the message back: a waiting seat served by the same worker
        answers right after the commit, and so does the bot whose turn the game became
        (``new_turn_bot``), if it waits for a turn in any game. The committed game is in
        the cache (it is kept there whenever a listener runs, and without one nobody
        waits)."""
        channel = self.store.game_channel(game_id)
        if not self.wakeups.has_waiters(channel):
            return  # the echo from Redis wakes the bot, if it waits here
        if new_turn_bot is not None:
            self.wakeups.deliver(self.store.bot_turn_channel(new_turn_bot), version)
        game = self.store.games.at(game_id, version)
        if game is None:
            return
        if len(self._told) > 10_000:  # echoes lost to a reconnect: forget, at worst a
            self._told.clear()         # waiter hears a change twice (it ignores the repeat)
        self._told[game_id] = version
        turn = game.state.turn if game.status == ACTIVE else None
        self.wakeups.deliver(channel, GameMessage(version, turn, game.status, game.deadline,
                                                  game.state_json, game.updated))

    def shut_down(self) -> None:
        """The process is stopping: open long-polls and streams answer now (see
        ``Wakeups.shut_down``); a commit in flight is not touched and finishes."""
        self.wakeups.shut_down()

    def announce_status(self, game: Game, status: str) -> None:
        """Tell the ``on_status`` hooks (the webhook bots' start and end notifications)
        that ``game`` has just become ``status``. Public because games are also started
        outside this class: by a tournament's step and by the ladder's matchmaker.
        A game that starts keeps its bots for ever (``Store.bots_played``): until then a
        registered bot expires (``Retention.bot_unused_s``)."""
        if status == ACTIVE:
            try:
                self.store.bots_played(game.seats)
            except Exception:  # the next game it starts keeps it (and it has days)
                log.exception("could not keep the bots of game %s", game.id)
        for hook in self.on_status:
            try:
                hook(game, status)
            except Exception:
                log.exception("status hook failed for game %s", game.id)

    def _finished(self, game: Game, status: str) -> None:
        if status == FINISHED:
            self.announce_status(game, status)
        if status != FINISHED or not (game.meta.get("tournament") or game.meta.get("ladder")
                                      or game.meta.get("validation")):
            return
        for hook in self.on_finish:
            try:
                hook(game)
            except Exception:
                log.exception("after-finish hook failed for game %s", game.id)

    # --- duplicate deals under embargo ----------------------------------------------------

    def embargoed(self, game: Game, status: str | None = None) -> bool:
        """Whether ``game``'s cards are dealt at another table whose game is not over (a
        live game of a shared deal is, without asking Redis: its own table is live)."""
        deal = game.meta.get("embargo")
        if not deal:
            return False
        if (status or game.status) != FINISHED:
            return True
        return bool(self.store.r.sismember(embargo_key(self.store.tours_prefix), deal))

    def _spectating(self, game: Game, viewer: int | None) -> None:
        """Refuse a viewer without a seat here (a spectator) an embargoed game."""
        if viewer is None and self.embargoed(game):
            raise Problem("embargoed", EMBARGOED)

    # --- bots ------------------------------------------------------------------------------

    def register_bot(self, name: str, person: bool = False, *, owner_bot: str | None = None,
                     address: str = "-", invitation: str | None = None) -> dict[str, Any]:
        """A new bot and its token, belonging to ``owner_bot``'s owner (the bot behind the
        caller's token), or else to a new owner admitted from ``address``'s network
        (``Owners.admit``)."""
        owner = None
        if owner_bot is not None:
            owner = self.owners.owner_of(owner_bot)
            reason = self.owners.suspension(owner_bot) or self.owners.owner_suspension(owner)
            if reason is not None:
                raise Problem("suspended", f"suspended: {reason}")
        if owner is None:
            owner = self.owners.admit(network_of(address), invitation)
        bot, token = self.store.create_bot(name, person)
        self.owners.add_bot(owner, bot["id"])
        return {**bot, "owner": owner, "token": token}

    def bot(self, bot_id: str) -> dict[str, Any]:
        bot = self.store.get_bot(bot_id)
        if bot is None:
            raise Problem("not-found", "no such bot")
        owner, suspended = self.store.r.hmget(self.store.keys.bot(bot_id), "owner",
                                              "suspended")
        bot["owner"] = owner.decode() if owner else bot_id
        bot["suspended"] = suspended.decode() if suspended is not None else None
        return bot

    # --- suspension ------------------------------------------------------------------------

    def suspend_bot(self, bot_id: str, reason: str) -> dict[str, Any]:
        """The operator suspends ``bot_id`` for ``reason`` (logged): it can no longer act,
        register bots or accept invitations, leaves the leaderboard, and is withdrawn
        from its open tournaments and its ladders (its live games there forfeited)."""
        self.bot(bot_id)
        self.owners.suspend_bots([bot_id], reason, {"bot": bot_id})
        self._withdraw_everywhere([bot_id])
        return self.bot(bot_id)

    def lift_bot(self, bot_id: str) -> dict[str, Any]:
        """Access back; the forfeited games stay forfeited."""
        self.bot(bot_id)
        self.owners.lift_bots([bot_id], {"bot": bot_id})
        return self.bot(bot_id)

    def _owner_record(self, owner_id: str) -> dict[str, Any]:
        """The owner's record with every bot of it: a bot registered before owners existed
        is its own owner (its id is the owner id) and has no record of its own."""
        record = self.owners.record(owner_id)
        legacy = owner_id != HOUSE_OWNER and self.store.get_bot(owner_id) is not None
        if (record is None and not legacy) or owner_id == HOUSE_OWNER:
            raise Problem("not-found", "no such owner")
        if record is None:
            record = {"id": owner_id, "created": 0, "bots": [], "suspended": None}
        if legacy and owner_id not in record["bots"]:
            record["bots"] = sorted([*record["bots"], owner_id])
        return record

    def suspend_owner(self, owner_id: str, reason: str) -> dict[str, Any]:
        record = self._owner_record(owner_id)
        self.owners.mark_owner(owner_id, reason)
        self.owners.suspend_bots(record["bots"], reason, {"owner": owner_id})
        self._withdraw_everywhere(record["bots"])
        return {**self._owner_record(owner_id), "suspended": reason}

    def lift_owner(self, owner_id: str) -> dict[str, Any]:
        record = self._owner_record(owner_id)
        self.owners.mark_owner(owner_id, None)
        self.owners.lift_bots(record["bots"], {"owner": owner_id})
        return {**self._owner_record(owner_id), "suspended": None}

    def _withdraw_everywhere(self, bot_ids: list[str]) -> None:
        """Withdraw ``bot_ids`` from every open tournament they are entrants of (the
        tournament's own withdrawal: live games forfeited) and every ladder (its leave),
        and cancel the games they are invited to. Best effort per tournament/ladder: a
        failure is logged, the suspension stands."""
        wanted = set(bot_ids)
        t = self.tournaments
        if t is not None:
            for raw in sorted(self.store.r.smembers(t.running_key)):
                tid = raw.decode()
                try:
                    raw_doc = self.store.r.get(t.key(tid))
                    doc = json.loads(raw_doc) if raw_doc else {}
                    entrants = {e["bot_id"] for e in doc.get("entrants", [])}
                    for b in sorted(wanted & entrants):
                        t.withdraw(tid, b, b)
                except Problem:
                    continue
                except Exception:
                    log.exception("withdrawing suspended bots from tournament %s failed", tid)
        lads = self.ladders
        if lads is not None:
            for name in sorted(getattr(lads, "ladders", {})):
                for b in sorted(wanted):
                    try:
                        lads.leave(name, b)
                        lads.forfeit(name, b, "suspended")  # its live game, at once
                    except Problem:
                        continue
                    except Exception:
                        log.exception("suspended bot %s could not leave ladder %s", b, name)
        for b in sorted(wanted):
            for inv in self.invitations.pending(b):
                self.invitations.cancel(inv["game_id"], "declined", b)

    # --- games -----------------------------------------------------------------------------

    def create_game(self, creator: str, body: dict[str, Any]) -> dict[str, Any]:
        players = body["players"]
        seed = body.get("seed")
        if seed is None:
            seed = secrets.randbelow(2**63)
        try:
            variants = Variants.from_dict(body.get("variants") or {})
        except InvalidVariants as exc:
            raise Problem("validation", str(exc), errors={"variants": [str(exc)]}) from None
        seats = body.get("seats")
        if seats is None:
            seats = [creator] + [None] * (players - 1)
        names = self.store.bot_names([s for s in seats if s])
        unknown = sorted(b for b, n in names.items() if not n)
        if unknown:
            msg = f"no such bot: {', '.join(unknown)}"
            raise Problem("not-found", msg, errors={"seats": [msg]})
        named = list(seats)
        # consent: the creator's own bots (and the house's, within their limit) sit down
        # at once; any other bot is invited (service.arena.invitations)
        seats, invited = self.invitations.plan(creator, named)
        state, _ = new_game(players, seed, variants)
        status = status_of(state, seats)
        meta = {
            "players": players,
            "seed": seed,
            "variants": variants.changed(),
            "seats": seats,
            "names": [names.get(b) if b else None for b in seats],
            "created": int(time.time()),
            "creator": creator,
        }
        self.invitations.prepare(meta, invited)
        deals.seal(meta, chosen=body.get("seed") is not None)  # issue 23: fair deals
        persons = self.store.persons(named)
        if persons:  # kept for less once finished (``Store.game_ttl``)
            meta["person"] = 1
        if body.get("time_bank"):
            meta["time_bank"] = body["time_bank"]  # seconds a seat (service.arena.clock)
        if body.get("move_limit"):
            meta["move_limit"] = body["move_limit"]
        elif persons:
            meta["move_limit"] = self.person_move_limit
        game = self.store.create_game(meta, state, status, turn_bot(state, seats, status),
                                      deadline_for(meta, state, status))
        self.invitations.issue(game)
        if status == ACTIVE:
            self.announce_status(game, status)
        return self.summary(game)

    def wait_turns(self, bot_id: str, timeout: float, playing: frozenset[str],
                   invitations_after: float | None) -> dict[str, Any]:
        """``wait_bot_turns`` with the bot's pending invitations in the answer; an
        invitation newer than ``invitations_after`` (default: the poll's start) ends the
        wait, so a bot hears of a challenge the moment it is made, and one that ignores
        invitations is not answered over and over for an old one."""
        since = time.time() if invitations_after is None else invitations_after
        answer = self.wait_bot_turns(bot_id, timeout, playing,
                                     lambda: self.invitations.has_new(bot_id, since))
        clocks = clock.turn_clocks(self.store, bot_id, answer["games"])
        if clocks:  # only when a game listed has a move limit (schemas.BotTurns)
            answer["clocks"] = clocks
        answer["invitations"] = self.invitations.pending(bot_id)
        if answer["invitations"] and answer["timed_out"] and timeout > 0:
            answer["timed_out"] = not self.invitations.has_new(bot_id, since)
        return answer

    def take_invited_seats(self, game_id: str, bot_id: str) -> Game | None:
        """``bot_id`` accepts: it sits in the seats held for it (compare-and-set, as a
        join); the game starts if no seat is left open. None if the game holds no seat
        for it any more (it was cancelled, or the seats were taken)."""
        for _ in range(CAS_ATTEMPTS):
            game = self.store.get_game(game_id)
            if game is None:
                return None
            planned = seat_invited(game, bot_id, self.store.bot_names([bot_id]))
            if planned is None:
                return None
            meta, status, deadline = planned
            code, value = self.store.commit(
                game, meta=meta, status=status,
                new_turn_bot=turn_bot(game.state, meta["seats"], status),
                deadline=deadline, updated=commit_time())
            if code == 1:
                game.meta, game.status, game.version = meta, status, int(value)
                if status == ACTIVE:
                    self.announce_status(game, status)
                return game
            if code == -1:
                return None
        raise Problem("service-unavailable", "too much contention; retry",
                      headers={"Retry-After": "1"})

    def get(self, game_id: str) -> Game:
        game = self.store.get_game(game_id)
        if game is None:
            raise Problem("not-found", "no such game")
        return game

    @staticmethod
    def seats_out(game: Game) -> list[dict[str, Any]]:
        """Seats with bot names; names are copied into the game when a bot sits down
        (they never change), so a view costs no extra Redis round trip."""
        names = game.meta["names"]
        return [
            {"seat": i, "bot_id": b, "bot_name": names[i]} for i, b in enumerate(game.seats)
        ]

    def summary(self, game: Game) -> dict[str, Any]:
        state = game.state
        return {
            "id": game.id,
            "version": game.version,
            "status": game.status,
            "players": game.players,
            "seats": self.seats_out(game),
            "variants": game.variants.to_dict(),
            "created": game.meta["created"],
            "scores": list(state.scores),
            "winner": state.winner,
            "move_limit": game.meta.get("move_limit"),
            "time_bank": game.meta.get("time_bank") or None,
            "tournament": (game.meta.get("tournament") or {}).get("id"),
            "ladder": (game.meta.get("ladder") or {}).get("name"),
            "updated_at": game.updated,
            "invited": game.meta.get("invited") or [None] * game.players,
            "invitation_expires": game.meta.get("invitation_expires")
            if game.status == WAITING else None,
            "cancelled": (game.meta.get("cancelled") or {}).get("reason"),
            "seed_chosen": bool(game.meta.get("seed_chosen")),
            "seed_commitment": game.meta.get("seed_commitment"),
        }

    def list_games(self, status: str | None, limit: int, cursor: int | None) -> dict[str, Any]:
        games, next_cursor = self.store.list_games(status, limit, cursor)
        items = [self.summary(g) for g in games]
        # an embargoed game's scores tell of its cards (a Jack taken, a High held)
        deals = [g.meta["embargo"] for g in games
                 if g.meta.get("embargo") and g.status == FINISHED]
        open_deals = set()
        if deals:
            found = self.store.r.smismember(embargo_key(self.store.tours_prefix), deals)
            open_deals = {d for d, inside in zip(deals, found) if inside}
        for g, item in zip(games, items):
            deal = g.meta.get("embargo")
            if deal and (g.status != FINISHED or deal in open_deals):
                item["scores"] = item["winner"] = None
        return {"items": items, "next_cursor": next_cursor}

    # --- who is looking ----------------------------------------------------------------------

    @staticmethod
    def viewer_seat(
        game: Game, bot_id: str | None, seat: int | None, state: State | None = None
    ) -> int | None:
        """The seat whose view ``bot_id`` gets: the asked ``seat`` (which it must hold),
        else its only seat, else (holding two) the one in turn; None for a spectator."""
        if seat is not None:
            if bot_id is None:
                raise Problem("unauthorized", "a bearer token is needed to view a seat")
            if seat >= game.players or game.seats[seat] != bot_id:
                raise Problem("forbidden-seat", f"your bot does not hold seat {seat}")
            return seat
        if bot_id is None:
            return None
        held = [i for i, b in enumerate(game.seats) if b == bot_id]
        if not held:
            return None
        if len(held) > 1:
            state = state or game.state
            if not state.is_over and state.turn in held:
                return state.turn
        return held[0]

    def render(self, game: Game, state: State, seat: int | None, version: int,
               status: str, deadline: float | None, updated: float | None) -> dict[str, Any]:
        """The engine's view for ``seat`` wrapped with the game's identity and seats, the
        move deadline: ``deadline`` (unix seconds) and ``time_left`` (seconds, from the
        service's clock at answer time), and when ``version`` was committed
        (``updated``). Shaped as ``schemas.View`` dumps it."""
        engine_view = seat_view(state, seat) if seat is not None else spectator_view(state)
        if game.meta.get("embargo"):  # a duplicate deal: see ``embargoed``
            if seat is None and self.embargoed(game, status):
                raise Problem("embargoed", EMBARGOED)
            if "seed" in engine_view and self.embargoed(game, status):
                engine_view = {k: v for k, v in engine_view.items()
                               if k not in ("hands", "seed")}
        return view_of(game, engine_view, version, status, deadline, updated)

    def view(self, game: Game, bot_id: str | None, seat: int | None) -> dict[str, Any]:
        state = game.state
        viewer = self.viewer_seat(game, bot_id, seat, state)
        return self.render(game, state, viewer, game.version, game.status, game.deadline,
                           game.updated)

    # --- joining -------------------------------------------------------------------------

    def join(self, game_id: str, seat: int, bot_id: str) -> dict[str, Any]:
        for _ in range(CAS_ATTEMPTS):
            game = self.get(game_id)
            if seat >= game.players:
                raise Problem("not-found", f"no seat {seat} in a {game.players}-player game")
            holder = game.seats[seat]
            if holder == bot_id:
                return self.view(game, bot_id, seat)
            if holder is not None or game.status != WAITING:
                raise Problem("seat-taken", f"seat {seat} is taken")
            held_for = (game.meta.get("invited") or [None] * game.players)[seat]
            if held_for is not None and held_for != bot_id:
                raise Problem("seat-taken", f"seat {seat} is held for an invited bot")
            if held_for == bot_id:  # joining a seat held for you is accepting
                if time.time() >= float(game.meta.get("invitation_expires") or "inf"):
                    self.invitations.cancel(game_id, "expired", None)
                    raise Problem("not-found", "the invitation has expired; its game is "
                                  "cancelled")
                taken = self.take_invited_seats(game_id, bot_id)
                if taken is None:
                    continue
                inv = (taken.meta.get("invitations") or {}).get(bot_id)
                if inv:
                    self.invitations.forget(inv, bot_id)
                return self.view(taken, bot_id, seat)
            seats = list(game.seats)
            seats[seat] = bot_id
            state = game.state
            status = status_of(state, seats)
            names = list(game.meta["names"])
            names[seat] = self.store.bot_names([bot_id]).get(bot_id)
            meta = {**game.meta, "seats": seats, "names": names}
            if self.store.is_person(bot_id):
                meta["person"] = 1  # kept for less once finished (``Store.game_ttl``)
                if not meta.get("move_limit"):
                    meta["move_limit"] = self.person_move_limit
            deadline = deadline_for(meta, state, status)
            updated = commit_time()
            code, value = self.store.commit(
                game, meta=meta, status=status, new_turn_bot=turn_bot(state, seats, status),
                deadline=deadline, updated=updated,
            )
            if code == 1:
                game.meta, game.status, game.version = meta, status, int(value)
                if status == ACTIVE:
                    self.announce_status(game, status)
                return self.render(game, state, seat, game.version, status, deadline, updated)
            if code == -1:
                raise Problem("not-found", "no such game")
        raise Problem("service-unavailable", "too much contention; retry",
                      headers={"Retry-After": "1"})

    # --- acting ----------------------------------------------------------------------------

    def act(
        self,
        game_id: str,
        bot_id: str,
        body: dict[str, Any],
        if_match: int | None,
        idem: str | None,
        wait: float = 0.0,
        timing: dict[str, float] | None = None,
    ) -> dict[str, Any]:
        """Apply one action for ``bot_id``; returns the new view.

        ``timing`` (if given) gets ``committed``: ``time.perf_counter()`` when the action
        was applied, before any waiting; or ``replayed`` when nothing was applied because
        this is a retry of an applied action (``_replayed``). ``wait`` > 0: then answer
        when it is this bot's turn again (at any seat it holds), the game is over, or
        ``wait`` seconds have passed (``_after_action``).
        The waiter is registered before the commit, so no later change slips by unheard.
        A suspended bot (``Owners.is_suspended``: an in-process set, refreshed once a
        second) is refused here too, so neither its token nor its webhook acts for it.
        """
        if self.owners.is_suspended(bot_id):
            reason = self.owners.suspension(bot_id) or "suspended by the operator"
            raise Problem("suspended", f"this bot is suspended: {reason}")
        if wait <= 0:
            return self._act(game_id, bot_id, body, if_match, idem, timing=timing)
        metrics.LIVE.polls += 1
        try:
            with self.wakeups.waiter(self.store.game_channel(game_id)) as waiter:
                return self._act(game_id, bot_id, body, if_match, idem,
                                 waiter, time.monotonic() + wait, timing)
        finally:
            metrics.LIVE.polls -= 1

    def _act(
        self,
        game_id: str,
        bot_id: str,
        body: dict[str, Any],
        if_match: int | None,
        idem: str | None,
        waiter: Any = None,
        wait_until: float = 0.0,
        timing: dict[str, float] | None = None,
    ) -> dict[str, Any]:
        """Apply one action for ``bot_id``; returns the new view.

        Read, apply the engine, then compare-and-set. When another write got in first the
        game is re-read and the action re-validated against the new position, so it
        either applies to the position it now meets or is refused — never both, never lost.
        """
        action = parse_action(body["action"])
        body_hash = hashlib.sha256(dumps(
            {**body, "if_match": if_match}
        ).encode()).hexdigest()[:32]
        idem_key = idem or ""  # scoped to (bot, game): the record is the game's, by bot
        generation = self.wakeups.live_generation(self.store.game_channel(game_id))
        cached = self.store.games.get(game_id, generation)
        for _ in range(CAS_ATTEMPTS):
            if cached is not None:
                answer = self._try_act(game_id, bot_id, body, if_match, idem_key, action,
                                       body_hash, cached, generation, waiter, wait_until,
                                       timing, guess=True)
                if answer is not None:
                    return answer
                cached = None  # stale, or refused on a guess: judge again on a fresh read
                continue
            if idem_key:
                found, stored = self.store.get_game_and_idem(game_id, bot_id, idem_key)
                if found is None:
                    raise Problem("not-found", "no such game")
                game = found
            else:
                game, stored = self.get(game_id), None
            if stored:
                return self._replayed(game, stored, body_hash, bot_id, waiter, wait_until,
                                      timing)
            if idem_key and game.status == FINISHED and self._retry_memory_gone(game):
                last = self._last_move_answer(game, bot_id, body, if_match, action)
                if last is not None:
                    if timing is not None:
                        timing["replayed"] = 1.0
                    return last
            self.store.games.put(game, generation)
            answer = self._try_act(game_id, bot_id, body, if_match, idem_key, action,
                                   body_hash, game, generation, waiter, wait_until, timing)
            if answer is not None:
                return answer
        raise Problem("service-unavailable", "too much contention; retry",
                      headers={"Retry-After": "1"})

    def _try_act(
        self, game_id: str, bot_id: str, body: dict[str, Any], if_match: int | None,
        idem_key: str, action: int, body_hash: str, game: Game, generation: int | None,
        waiter: Any, wait_until: float, timing: dict[str, float] | None, guess: bool = False,
    ) -> dict[str, Any] | None:
        """Judge the action on ``game`` and compare-and-set it: the answer, or None when
        the game had moved on (read it again and retry). A cached ``game`` is a ``guess``:
        a refusal judged on it is None too (judge again on a fresh read), never an answer."""
        try:
            judged = self._judge(game, bot_id, body, if_match, action)
        except (Problem, IllegalAction):
            if guess:
                return None
            raise
        state, new_state, seat, status, deadline, meta = judged
        if meta is not None:  # the seat drew on its time bank: a copy, the cache keeps game
            game = dataclasses.replace(game, meta=meta)
        old_bot = turn_bot(state, game.seats, game.status)
        new_bot = turn_bot(new_state, game.seats, status)
        updated = commit_time()
        code, value = self.store.commit(
            game,
            state=new_state,
            meta=meta,
            action=action,
            status=status,
            idem_key=idem_key,
            idem_value=f"{body_hash}|{new_state.ply}|{seat}|{deadline or ''}|{updated:.6f}"
            + (f"|{bank}" if (bank := clock.bank_of(game.meta, seat)) is not None else ""),
            idem_bot=bot_id,
            old_turn_bot=old_bot,
            new_turn_bot=new_bot,
            deadline=deadline,
            turn_seat=new_state.turn if status == ACTIVE else None,
            cache_generation=generation,
            updated=updated,
        )
        if code == 1:
            metrics.action_applied()
            self._tell_local_waiters(game_id, int(value),
                                     new_bot if new_bot != old_bot else None)
            self._finished(game, status)
            if timing is not None:
                timing["committed"] = time.perf_counter()
            if waiter is not None:
                return self._after_action(waiter, wait_until, game, new_state, seat,
                                          int(value), status, deadline, updated, bot_id)
            return self.render(game, new_state, seat, int(value), status, deadline, updated)
        if code == 2:  # a retry with this key won the race: answer as it was answered
            return self._replayed(self.get(game_id), value, body_hash, bot_id, waiter,
                                  wait_until, timing)
        if code == -1:
            raise Problem("not-found", "no such game")
        return None

    def _judge(self, game: Game, bot_id: str, body: dict[str, Any], if_match: int | None,
               action: int
               ) -> tuple[State, State, int, str, float | None, dict[str, Any] | None]:
        """The action judged on ``game`` (raises when refused): (state, new state, seat,
        status, deadline, the new meta if the seat drew on its time bank, else None)."""
        if game.status == WAITING:
            raise Problem("game-not-started", "the game is waiting for players")
        if game.status == FINISHED and not game.state.is_over:
            # ended by its tournament (a cancel, or an entrant that left): see
            # service.arena.tournament_control
            raise IllegalAction("R22", "the game is over: its tournament ended it, or it "
                                "was cancelled (an invitation declined or expired)")
        state = game.state
        seat = self._acting_seat(game, bot_id, body.get("seat"), state)
        if if_match is not None and if_match != game.version:
            raise Problem("precondition-failed",
                          f"If-Match is {if_match}; the game is at version {game.version}",
                          current_version=game.version)
        want = body.get("version")
        if want is not None and want != game.version:
            raise Problem("version-conflict",
                          f"you decided on version {want}; the game is at {game.version}",
                          current_version=game.version)
        new_state, _ = apply(state, action, seat=seat)
        status = status_of(new_state, game.seats)
        now = time.time()
        meta = clock.draw(game.meta, game.deadline, seat, now)
        return (state, new_state, seat, status,
                deadline_for(meta or game.meta, new_state, status, now), meta)

    def _acting_seat(self, game: Game, bot_id: str, seat: int | None, state: State) -> int:
        held = [i for i, b in enumerate(game.seats) if b == bot_id]
        if seat is not None:
            if seat not in held:
                raise Problem("forbidden-seat", f"your bot does not hold seat {seat}")
            return seat
        if not held:
            raise Problem("forbidden-seat", "your bot holds no seat in this game")
        if not state.is_over and state.turn in held:
            return state.turn
        return held[0]

    def _replayed(self, game: Game, stored: str, body_hash: str, bot_id: str, waiter: Any,
                  wait_until: float, timing: dict[str, float] | None) -> dict[str, Any]:
        """The answer to a retry of the bot's last keyed action in ``game`` (read after
        the retry's waiter was registered): nothing is applied again. Without ``wait``
        (``waiter`` None) it is the first answer's body (``_replay_answer``). With
        ``wait`` the retry waits as the first request did, from the game as it is now:
        the view when it is the bot's turn at any seat it holds, the game is over, or the
        time is up (the answer right after the action if the game has not moved since),
        so a bot's retry loop needs no case of its own. ``timing["replayed"]`` tells the
        route to say so (``Idempotent-Replayed: true``)."""
        answer = self._replay_answer(game, stored, body_hash)
        if timing is not None:
            timing["replayed"] = 1.0
        if waiter is None:
            return answer
        seat = answer["seat"]
        held = self._held(game, bot_id, None)
        now_seat = self._answer_seat(game, bot_id, seat)
        if game.status != ACTIVE or game.state.turn in held:
            if game.version == answer["version"] and now_seat == seat:
                return answer
            return self.view(game, bot_id, now_seat)
        newer, _ = self._await_turn(waiter, wait_until, game, game.version, bot_id)
        if newer is not None:
            return self.view(newer, bot_id, self._answer_seat(newer, bot_id, seat))
        return answer if game.version == answer["version"] else self.view(game, bot_id, seat)

    def _replay_answer(self, game: Game, stored: str, body_hash: str
                       ) -> dict[str, Any]:
        """The answer first given for an Idempotency-Key, rebuilt from the action log
        (with the deadline and time bank it had; only ``time_left`` is counted again)."""
        # hash|ply|seat|deadline|updated[|bank]|version (see _try_act)
        parts = stored.split("|")
        want_hash, ply, seat, version = parts[0], parts[1], parts[2], parts[-1]
        deadline = float(parts[3]) if len(parts) >= 5 and parts[3] else None
        updated = float(parts[4]) if len(parts) >= 6 and parts[4] else None
        if len(parts) >= 7:  # the seat's time bank as answered then (service.arena.clock)
            game = dataclasses.replace(
                game, meta=clock.with_bank(game.meta, int(seat), float(parts[5])))
        if want_hash != body_hash:
            raise Problem("idempotency-key-reused",
                          "this Idempotency-Key was first used with a different request")
        state, _ = new_game(game.players, game.meta["seed"], game.variants)
        for a in game.actions[: int(ply)]:
            state, _ = apply(state, a)
        status = status_of(state, game.seats)
        return self.render(game, state, int(seat), int(version), status, deadline, updated)

    def _retry_memory_gone(self, game: Game) -> bool:
        """Whether the finished game's retry memory has expired: its grace runs from the
        commit that finished it (``updated``)."""
        return game.updated is None or time.time() >= game.updated + self.store.idem_grace_s

    def _last_move_answer(self, game: Game, bot_id: str, body: dict[str, Any],
                          if_match: int | None, action: int) -> dict[str, Any] | None:
        """A keyed request on a finished game whose retry memory is gone (its grace is
        over): if it is the game's last move, made by this bot and decided on the version
        before it, the answer it got then (the final view for its seat: nothing can
        follow a finished game's last move, so that answer is rebuilt exactly); else
        None (judged as any request is, so refused: the game is over). The key itself is
        not compared: once the memory is gone nothing could. During the grace only the
        remembered key is a replay (``_retry_memory_gone``): the same move under another
        key is another request, refused like any action on a finished game, so two
        processes of one bot never both hear that their move applied."""
        log = game.actions
        if not log or log[-1] != action:
            return None
        ply = len(log)
        if any(t.get("ply") == ply for t in game.meta.get("timeouts", ())):
            return None  # the last move was a timeout's, not a bot's
        if any(v is not None and v != game.version - 1 for v in (body.get("version"), if_match)):
            return None
        state, _ = new_game(game.players, game.meta["seed"], game.variants)
        for a in log[:-1]:
            state, _ = apply(state, a)
        seat = state.turn
        if game.seats[seat] != bot_id or body.get("seat") not in (None, seat):
            return None
        return self.render(game, game.state, seat, game.version, game.status, game.deadline,
                           game.updated)

    # --- timeouts --------------------------------------------------------------------------

    def timeout(self, game_id: str, version: int, action_for: Callable[[State], int],
                now: float | None = None) -> bool:
        """Play ``action_for(state)`` for the seat in turn if ``version`` is still current
        and its deadline has passed; True if it was applied.

        Goes through the same compare-and-set as a bot's action, with the version the
        deadline was set for: a move made in time bumped the version first, so the
        timeout finds a newer version and is void. The timeout is kept in the game's
        meta (``timeouts``: seat, ply, action) so the record and standings show it.
        """
        game = self.store.get_game(game_id)
        if game is None or game.version != version or game.status != ACTIVE:
            return False
        now = time.time() if now is None else now
        if game.deadline is None or game.deadline > now:
            return False
        state = game.state
        seat = state.turn
        action = action_for(state)
        new_state, _ = apply(state, action, seat=seat)
        status = status_of(new_state, game.seats)
        timeouts = [*game.meta.get("timeouts", []),
                    {"seat": seat, "ply": new_state.ply, "action": action_name(action)}]
        meta = {**clock.exhausted(game.meta, seat), "timeouts": timeouts}
        code, _ = self.store.commit(
            game,
            state=new_state,
            meta=meta,
            action=action,
            status=status,
            old_turn_bot=turn_bot(state, game.seats, game.status),
            new_turn_bot=turn_bot(new_state, game.seats, status),
            deadline=deadline_for(meta, new_state, status, now),
            turn_seat=new_state.turn if status == ACTIVE else None,
        )
        if code != 1:
            return False
        metrics.ACTION_BY_CLOCK.inc()
        metrics.TIMEOUTS.inc()
        game.meta = meta
        self._finished(game, status)
        return True

    def record(self, game_id: str, bot_id: str | None, seat: int | None) -> dict[str, Any]:
        """The full record once finished (and, for a duplicate deal, once every table of it
        has); before that, what the viewer may know."""
        game = self.get(game_id)
        actions = game.actions
        names = [action_name(a) for a in actions]
        embargoed = self.embargoed(game)
        if game.status == FINISHED and not embargoed:
            record = build_record(game.players, game.meta["seed"], game.variants, actions)
            record["seed_salt"] = game.meta.get("seed_salt")  # to check the commitment
            record["complete"] = True
            record["timeouts"] = game.meta.get("timeouts", [])
            return record
        viewer = self.viewer_seat(game, bot_id, seat)
        if embargoed and viewer is None:
            raise Problem("embargoed", EMBARGOED)
        events = [
            redact_event(e, viewer)
            for _, evs, _ in self._steps(game, actions, None, 1)
            for e in evs
        ]
        record = record_from_events(events)
        record["actions"] = names
        record["complete"] = False
        record["timeouts"] = game.meta.get("timeouts", [])
        return record


__all__ = ["Arena", "IllegalAction", "dumps"]
