"""What a webhook bot is called with: its turns (claimed, called, the answer applied as a
pulled action) and its start, end and invitation notifications. The delivering half of
``Callbacks`` (``service.arena.webhooks.callbacks``, which inherits it), as ``Waiting`` is of
``Arena``: it uses the callbacks' store, arena, calls (``call``, ``_record``) and answer
reader."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from service.arena.core.problems import Problem
from service.arena.core.status import ACTIVE, FINISHED, WAITING
from service.arena.webhooks.keys import (
    DEADLINE_MARGIN_S,
    LEASE_MARGIN_S,
    MIN_BUDGET_S,
    NO_DEADLINE_RETRY_S,
    NOTIFY_TIMEOUT_S,
    Claim,
    claim_key,
    failed_key,
    hooks_key,
    notify_key,
)
from service.engine import IllegalAction
from service.storage.store import Game

log = logging.getLogger(__name__)

# Reads a bot's answer to a turn (a JSON object) into an action body as ``POST
# /games/{game_id}/actions`` takes it, raising on a bad one. The wire's schema is HTTP's
# (``service.http.webhooks.schemas.CallbackAnswer``): the app hands its reader in.
AnswerReader = Callable[[dict[str, Any]], dict[str, Any]]


class CallbackEvents:
    """The delivering half of ``Callbacks`` (which inherits it): see the module docstring."""

    arena: Any
    store: Any
    read_answer: AnswerReader

    # --- a turn ---------------------------------------------------------------------------------

    def claim_turn(self, bot_id: str, game: Game) -> Claim | None:
        """Claim ``game`` at its version for ``bot_id``: the claim, or None when it is not
        the bot's turn or another process holds (or held) this version's claim."""
        if game.status != ACTIVE or game.seats[game.state.turn] != bot_id:
            return None
        now = time.time()
        left = (game.deadline - now) if game.deadline is not None else None
        budget = self.timeout_s if left is None else min(self.timeout_s,
                                                         left - DEADLINE_MARGIN_S)
        lease_ms = int((max(budget, 0) + LEASE_MARGIN_S) * 1000)
        key = claim_key(self.p, bot_id, game.id, game.version)
        if not self.store.r.set(key, "calling", nx=True, px=lease_ms):
            return None
        return Claim(bot_id, game, key, left, budget)

    def run_claimed(self, claim: Claim, cfg: dict[str, Any]) -> dict[str, Any] | None:
        """Deliver a claimed turn; then the claim becomes a ``done`` marker (no second call
        for this version, see ``service.arena.webhooks.dispatcher``). An unexpected error
        leaves the claim to expire, so any process calls again after the lease."""
        try:
            record = self.deliver_turn(claim.bot_id, cfg, claim.game, claim.budget)
        except Exception:
            log.exception("callback turn for %s in %s failed; retried after the lease",
                          claim.bot_id, claim.game.id)
            return None
        if record["outcome"] == "applied":
            keep_s = 60.0
        elif claim.left is None:
            keep_s = NO_DEADLINE_RETRY_S
        else:
            keep_s = max(claim.left, 0) + LEASE_MARGIN_S
        self.store.r.set(claim.key, "done", px=int(keep_s * 1000))
        return record

    def try_turn(self, bot_id: str, game: Game, cfg: dict[str, Any] | None = None) -> bool:
        """Claim and deliver in one go; False when there was nothing to claim."""
        cfg = cfg or self.config(bot_id)
        if cfg is None or not cfg["verified"]:  # an unverified URL is sent nothing
            return False
        claim = self.claim_turn(bot_id, game)
        if claim is None:
            return False
        self.run_claimed(claim, cfg)
        return True

    def deliver_turn(self, bot_id: str, cfg: dict[str, Any], game: Game, budget: float
                     ) -> dict[str, Any]:
        started = time.time()
        seat = game.state.turn
        record: dict[str, Any] = {
            "event": "turn", "game_id": game.id, "version": game.version, "seat": seat,
            "at": round(started, 3), "outcome": "", "status": None, "action": None,
            "problem": None, "detail": None, "attempts": 0, "latency_ms": None,
        }
        if budget < MIN_BUDGET_S:
            record.update(outcome="no-time",
                          detail="too little time was left before the deadline")
            self._record(bot_id, record)
            return record
        last = self.store.r.hget(failed_key(self.p, bot_id), game.id)
        envelope = {
            "event": "turn", "delivery": "", "bot_id": bot_id, "game_id": game.id,
            "version": game.version, "seat": seat, "deadline": game.deadline,
            "view": self.arena.view(game, bot_id, seat),
            "last_failure": json.loads(last) if last else None,
        }
        result = self.call(cfg, envelope, budget)
        record["attempts"] = result.attempts
        record["status"] = result.status
        record["latency_ms"] = round((time.time() - started) * 1000, 2)
        if result.error is not None:
            record.update(outcome=result.error, detail=result.detail)
        elif not 200 <= (result.status or 0) < 300:
            record.update(outcome="http-error", detail=f"the answer's status was {result.status}")
        else:
            self._apply(bot_id, game, seat, result.body, record)
        record["latency_ms"] = round((time.time() - started) * 1000, 2)
        self._record(bot_id, record)
        return record

    def _apply(self, bot_id: str, game: Game, seat: int, raw: bytes,
               record: dict[str, Any]) -> None:
        """The answer's action through ``Arena.act``, exactly as a pulled action with
        ``version`` and an ``Idempotency-Key`` of this turn."""
        try:
            answer = json.loads(raw)
            if not isinstance(answer, dict):
                raise ValueError("not an object")
            body = self.read_answer(answer)
        except Exception as exc:
            detail = "the body must be a JSON object with an action, e.g. {\"action\": \"AS\"}"
            if isinstance(exc, ValueError) and not isinstance(exc, json.JSONDecodeError):
                detail = f"{detail}: {str(exc)[:150]}"
            record.update(outcome="bad-answer", detail=detail)
            return
        body.setdefault("version", game.version)
        body.setdefault("seat", seat)
        record["action"] = body["action"]
        try:
            self.arena.act(game.id, bot_id, body, None, f"callback-{game.version}")
        except IllegalAction as exc:
            from service.arena.core.problems import from_illegal

            problem = from_illegal(exc)
            record.update(outcome="refused", problem=f"/problems/{problem.kind}",
                          detail=str(problem)[:200])
            return
        except Problem as exc:
            if exc.kind == "service-unavailable":
                raise
            record.update(outcome="refused", problem=f"/problems/{exc.kind}",
                          detail=str(exc)[:200])
            return
        record["outcome"] = "applied"

    # --- notifications ----------------------------------------------------------------------------

    def game_changed(self, game: Game, status: str) -> None:
        """A game has just started (active) or ended (finished): queue a ``start`` or
        ``end`` notification for each webhook bot seated in it (Arena's ``on_status``)."""
        if status not in (ACTIVE, FINISHED):
            return
        event = "start" if status == ACTIVE else "end"
        bots = sorted({b for b in game.seats if b})
        if not bots:
            return
        r = self.store.r
        registered = [b for b, m in zip(bots, r.smismember(hooks_key(self.p), bots)) if m]
        now = time.time()
        for bot in registered:
            r.zadd(notify_key(self.p, bot), {f"{event}:{game.id}": now}, nx=True)
            self.wake(bot)

    def invited(self, game: Game, bot_id: str) -> None:
        """``bot_id`` is invited to ``game``: queue an ``invitation`` event for it, if it is
        a webhook bot (``Invitations.on_invite``)."""
        if self.store.r.sismember(hooks_key(self.p), bot_id):
            self.store.r.zadd(notify_key(self.p, bot_id), {f"invitation:{game.id}": time.time()},
                              nx=True)
            self.wake(bot_id)

    def tournament_notice(self, bots: list[str], notice: dict[str, Any]) -> None:
        """A tournament the bots entered started, finished or was cancelled: queue a
        ``tournament_<event>`` notification for each webhook bot among them (the
        tournaments' ``on_notice``; the notice itself is kept by ``Arena.notices``)."""
        bots = sorted(set(bots))
        if not bots:
            return
        r = self.store.r
        registered = [b for b, m in zip(bots, r.smismember(hooks_key(self.p), bots)) if m]
        member = f"tournament_{notice['event']}:{notice['tournament_id']}"
        for bot in registered:
            r.zadd(notify_key(self.p, bot), {member: time.time()}, nx=True)
            self.wake(bot)

    def _deliver_tournament(self, bot_id: str, cfg: dict[str, Any], member: str) -> None:
        """One ``tournament_*`` notification: the notice as ``GET /bots/me/turns`` lists
        it (gone from there, a day on: dropped)."""
        event, _, tid = member.partition(":")
        notice = next((n for n in self.arena.notices.recent(bot_id)
                       if n["tournament_id"] == tid
                       and f"tournament_{n['event']}" == event), None)
        if notice is not None:
            started = time.time()
            envelope = {"event": event, "delivery": "", "bot_id": bot_id,
                        "tournament": notice}
            result = self.call(cfg, envelope, NOTIFY_TIMEOUT_S)
            self._record(bot_id, notice_record(event, None, None, None, started, result))
        self.store.r.zrem(notify_key(self.p, bot_id), member)

    def notify_due(self, bot_id: str, cfg: dict[str, Any]) -> int:
        """Deliver ``bot_id``'s due notifications (claimed with a lease); how many."""
        key = notify_key(self.p, bot_id)
        now = time.time()
        due = self._claim_notes(keys=[key], args=[now, now + NOTIFY_TIMEOUT_S + LEASE_MARGIN_S])
        done = 0
        for raw in due:
            member = raw.decode()
            event, _, game_id = member.partition(":")
            if event.startswith("tournament_"):
                self._deliver_tournament(bot_id, cfg, member)
                done += 1
                continue
            game = self.store.get_game(game_id)
            invited = (game.meta.get("invited") or []) if game is not None else []
            if event == "invitation":  # consent (service.arena.accounts.invitations): still open?
                if game is None or bot_id not in invited or game.status != WAITING:
                    self.store.r.zrem(key, member)
                    continue
                seat = invited.index(bot_id)
            elif game is None or bot_id not in game.seats:
                self.store.r.zrem(key, member)
                continue
            else:
                seat = game.seats.index(bot_id)
            started = time.time()
            envelope = {"event": event, "delivery": "", "bot_id": bot_id, "game_id": game_id,
                        "version": game.version, "seat": seat, "deadline": game.deadline,
                        "view": self.arena.view(game, bot_id, seat if event != "invitation"
                                                else None), "last_failure": None}
            if event == "invitation":
                envelope["invitation"] = next(
                    (i for i in self.arena.invitations.pending(bot_id)
                     if i["game_id"] == game_id), None)
            result = self.call(cfg, envelope, NOTIFY_TIMEOUT_S)
            self._record(bot_id, notice_record(event, game_id, game.version, seat, started,
                                               result))
            pipe = self.store.r.pipeline(transaction=True)
            pipe.zrem(key, member)
            if event == "end":
                pipe.hdel(failed_key(self.p, bot_id), game_id)
            pipe.execute()
            done += 1
        return done


def notice_record(event: str, game_id: str | None, version: int | None, seat: int | None,
                  started: float, result: Any) -> dict[str, Any]:
    """A notification's delivery record (``GET /bots/me/callback/deliveries``): a
    notification answers nothing, so only whether it arrived is told — an answer outside
    2xx is ``http-error``, a call that got none says why (``result.error``)."""
    record = {
        "event": event, "game_id": game_id, "version": version, "seat": seat,
        "at": round(started, 3), "status": result.status, "action": None,
        "problem": None, "attempts": result.attempts,
        "latency_ms": round((time.time() - started) * 1000, 2),
        "outcome": "delivered", "detail": None,
    }
    if result.error is not None:
        record.update(outcome=result.error, detail=result.detail)
    elif not 200 <= (result.status or 0) < 300:
        record.update(outcome="http-error", detail=f"the answer's status was {result.status}")
    return record
