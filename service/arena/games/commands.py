"""The game commands, between HTTP (``service.http.games.routes``) and Redis
(``service.storage.store``).

No rules live here: every decision about a game is the engine's (``apply`` raises
``IllegalAction``), and every view is the engine's ``seat_view``/``spectator_view``
wrapped with the game's id, version and seats (``service.arena.games.views``). What this
layer adds is who may act for which seat, compare-and-set retries and idempotent replies.
``Arena`` is made of parts, each its own module: creating, joining, viewing and recording
games (here), acting (``acting``: a bot's ``ActRequest`` and the clock's timeout), waiting
for changes (``waiting``), the bots and their suspension
(``service.arena.accounts.bots``); every way a game ends goes through ``ending``.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from service import metrics
from service.arena.accounts.bots import BotAccounts
from service.arena.accounts.invitations import Invitations, seat_invited
from service.arena.accounts.owners import Owners
from service.arena.core import clock, deals
from service.arena.core.problems import Problem
from service.arena.core.status import (
    ACTIVE,
    EMBARGOED,
    FINISHED,
    WAITING,
    deadline_for,
    embargo_key,
    status_of,
    turn_bot,
)
from service.arena.games.acting import CAS_ATTEMPTS, Acting, ActOutcome, ActRequest
from service.arena.games.after_finish import AfterFinish
from service.arena.games.ending import Ending, game_ended
from service.arena.games.fanout import Feed
from service.arena.games.notices import Notices
from service.arena.games.views import finished_record, view_of
from service.arena.games.waiting import (
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
    new_game,
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

PERSON_MOVE_LIMIT_S = 60.0  # seconds a decision, for a game a person sits down in


class Arena(BotAccounts, Acting, Waiting):
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
        # a tournament or a ladder, by this process's after-finish loop, not the request
        # (``service.arena.games.after_finish``). Best effort: the repair passes cover it.
        self.after_finish = AfterFinish()
        self.on_finish: list[Callable[[Game], None]] = self.after_finish.hooks
        # Called with (game, status) when a game becomes active or finished, by the process
        # that committed it (webhook start/end notifications, ``service.arena.webhooks.callbacks``).
        # Best effort, like ``on_finish``.
        self.on_status: list[Callable[[Game, str], None]] = []
        # every way a game ends goes through here (``service.arena.games.ending``)
        self.ending = Ending(self)
        # game id -> the feed this process's event streams of that game share
        # (``service.arena.games.fanout``): one read per change per process, whatever the viewers.
        self._feeds: dict[str, Feed] = {}
        self._feeds_lock = threading.Lock()
        # owners, admission and suspension; invitations (consent to play): the app
        # factory replaces them with ones built from its settings (``configure``)
        self.owners = Owners(store)
        self.invitations = Invitations(self)
        self.notices = Notices(store)  # tournament news for the turn long-poll
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

    def _after_finish(self, game: Game) -> None:
        """Run the after-finish hooks for ``game``, which has just finished (called by
        ``Ending.announce`` only, for every way a game ends)."""
        if not (game.meta.get("tournament") or game.meta.get("ladder")
                or game.meta.get("validation")):
            return
        self.after_finish.submit(game)

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
        # at once; any other bot is invited (service.arena.accounts.invitations)
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
            meta["time_bank"] = body["time_bank"]  # seconds a seat (service.arena.core.clock)
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
                   invitations_after: float | None,
                   notices_after: float | None = None) -> dict[str, Any]:
        """``wait_bot_turns`` with the bot's pending invitations and its recent tournament
        notices in the answer; an invitation newer than ``invitations_after`` (a notice
        newer than ``notices_after``; default for both: the poll's start) ends the wait, so
        a bot hears of a challenge or its tournament's start the moment it happens, and
        one that ignores them is not answered over and over for an old one."""
        began = time.time()
        since = began if invitations_after is None else invitations_after
        news = began if notices_after is None else notices_after

        def new() -> bool:
            return self.invitations.has_new(bot_id, since) or self.notices.has_new(bot_id, news)

        answer = self.wait_bot_turns(bot_id, timeout, playing, new)
        clocks = clock.turn_clocks(self.store, bot_id, answer["games"])
        if clocks:  # only when a game listed has a move limit (schemas.BotTurns)
            answer["clocks"] = clocks
        # the newest few and the count: an answer stays small however many are pending
        inv = self.invitations
        answer["invitations"] = inv.pending(bot_id, newest=inv.turns_shown)
        if answer["invitations"]:  # absent when none (schemas.BotTurns)
            answer["invitations_pending"] = (
                inv.count_pending(bot_id) if len(answer["invitations"]) >= inv.turns_shown
                else len(answer["invitations"]))
        notices = self.notices.recent(bot_id)
        if notices:  # only for a bot that entered tournaments (schemas.BotTurns)
            answer["tournaments"] = notices
        if answer["timed_out"] and timeout > 0 and (answer["invitations"] or notices):
            answer["timed_out"] = not new()
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
        ended = game_ended(game)
        return {
            "id": game.id,
            "version": game.version,
            "status": game.status,
            "players": game.players,
            "seats": self.seats_out(game),
            "variants": game.variants.to_dict(),
            "created": game.meta["created"],
            "scores": list(state.scores),
            "winner": ended["winner"] if ended else state.winner,
            "ended": ended,
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
                item["scores"] = item["winner"] = item["ended"] = None
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

    def record(self, game_id: str, bot_id: str | None, seat: int | None) -> dict[str, Any]:
        """The full record once finished (and, for a duplicate deal, once every table of it
        has); before that, what the viewer may know."""
        game = self.get(game_id)
        actions = game.actions
        names = [action_name(a) for a in actions]
        embargoed = self.embargoed(game)
        if game.status == FINISHED and not embargoed:
            return finished_record(game)
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
        record["ended"] = None
        return record


__all__ = ["ActOutcome", "ActRequest", "Arena", "IllegalAction", "dumps", "view_of"]
