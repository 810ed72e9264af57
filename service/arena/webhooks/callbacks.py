"""Bots that are called (webhooks): the service POSTs a bot's turn to the bot's own web
server and applies the action in the answer, as Battlesnake calls each snake.

A bot registers a **callback URL** (``PUT /bots/me/callback``) and gets a signing secret,
shown once. From then on, whenever it is that bot's turn in a game, some service process
POSTs a signed ``turn`` request holding the seat's view (the same JSON as ``GET
/games/{id}``, with ``legal_actions`` and ``deadline``) and applies the ``action`` in the
answer through ``Arena.act`` — the very path of a pulled action: same validation, with the
delivered ``version`` (so an answer to an old position is refused, never applied to a new
one) and the ``Idempotency-Key`` ``callback-{version}`` (so two deliveries of one turn
apply at most one action). A bad answer (an error status, no answer in time, a body that
is not an action, an illegal card) applies nothing: the seat falls to the move deadline,
where the sweeper plays the documented default action (``service.arena.games.deadlines``). What
happened is kept as a **delivery record** the bot can read (``GET
/bots/me/callback/deliveries``), and the last failed delivery in a game rides along with
the bot's next ``turn`` request there (``last_failure``). ``start`` and ``end``
notifications tell it when a game it sits in begins and ends (answer ignored).

This module registers and verifies the URLs and keeps the delivery records; one call is
made by ``service.arena.webhooks.calls``, the turns and notifications are delivered by
``service.arena.webhooks.events``, the ``Dispatcher`` that delivers them lives in
``service.arena.webhooks.dispatcher``, and the keys and timings they share in
``service.arena.webhooks.keys``.

**Verified first.** A URL is sent nothing but a verification request until it has shown
that it wants the calls (as Slack's url_verification and Twitch's
webhook_callback_verification): about a second after the registration (time for the bot
to keep its new secret), some process's dispatcher POSTs a signed ``verify`` request
with a random ``challenge``; the URL passes by answering 200 with the challenge echoed
(``{"challenge": "..."}``, or the bare challenge). Until then (``verified: false``,
``verification.status: pending``) its seats' turns are not called (they fall to the move
deadline's default action, as any failed call's do) and its notifications wait. A URL
that fails is tried again after 4, 15 and 60 s (``VERIFY_SCHEDULE_S``), then ``failed``
(its pending notifications are dropped) until the bot asks again (``POST
/bots/me/callback/verify``). Registering a URL again (a new secret) verifies it afresh.
So a stranger's server named as a callback receives at most ``len(VERIFY_SCHEDULE_S)``
verification requests per registration, and nothing else. Each attempt is a delivery
record (``event: verify``). An outcome is written only while its verification is still
the bot's current one (``SET_IF_VID``), so an answer for a replaced URL changes nothing.

**Deliveries per host are capped, and shared fairly among owners**: at most
``ARENA_CALLBACK_HOST_RATE`` calls per second to one host and port (the URL's host name
in lower case and its port, the scheme's when none is written), across every bot and
every process; and of that, each owner whose bots were called there in the last two
seconds gets an equal share (the rate divided by their number, at least one call). So
a stranger whose callback names the same host (another port is another budget) cannot
take the calls another owner's bot needs: once both are active, each has half. Counted
in one script (``HOST_SHARE``) over three keys under one hash tag per host and port
(``{p}rl:{cb:<host>:<port>}:<second>``, ``...:<owner>:<second>``, expiring after the
second, and ``...:active``, the owners by the last second they called). A call past
either is not made: a turn falls to the normal failure path (recorded as
``host-rate-limited``; the move deadline's default action), a notification is dropped, a
verification attempt fails and is tried again on its schedule.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import time
from typing import Any
from urllib.parse import urlsplit

from service.arena.core.problems import Problem
from service.arena.webhooks.calls import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    USER_AGENT,
    CallResult,
    Guard,
    check_url,
    echoes,
    make_pool,
    parse_networks,
    post,
    sign,
)
from service.arena.webhooks.events import AnswerReader, CallbackEvents
from service.arena.webhooks.keys import (
    CLAIM_NOTES,
    DELIVERIES_KEPT,
    LEASE_MARGIN_S,
    MIN_BUDGET_S,
    RETRY_BACKOFF_S,
    SET_IF_VID,
    VERIFY_SCHEDULE_S,
    VERIFY_TIMEOUT_S,
    cfg_key,
    deliveries_key,
    failed_key,
    hooks_key,
    verify_key,
)
from service.jsonio import dumps

log = logging.getLogger(__name__)

# Why 300 calls per second per host by default: the cap bounds what this service can be
# made to send one host that has consented (verification keeps it from calling any other)
# and must not throttle a bot playing flat out: it is about twice what one flat-out bot at
# eight tables needs (`python3 bench/webhooks.py --host-rate 0 --tables 8 --games 16`
# measures it; the figures are in docs/reference.md's webhook section).
HOST_RATE = 300

DEFAULTS: dict[str, Any] = {
    # comma-separated CIDRs callbacks may reach besides public addresses ("" none)
    "ARENA_CALLBACK_NETWORKS": "",
    "ARENA_CALLBACK_TIMEOUT": 10.0,  # seconds: a call's budget when the deadline allows
    "ARENA_CALLBACK_RETRIES": 2,  # extra attempts where no answer came
    "ARENA_CALLBACK_MAX_BYTES": 16384,  # the largest answer read
    # calls per second to one host (the URL's host name), across every bot and process;
    # 0: no cap (see HOST_RATE for why this number)
    "ARENA_CALLBACK_HOST_RATE": HOST_RATE,
    "ARENA_CALLBACKS": "1",  # "0": this process delivers nothing (others may)
}


# KEYS: the host's count this second, the owner's count there this second, the owners
# active there (sorted set: owner -> the last second it called). ARGV: the host's rate,
# the owner, this second, seconds an owner stays active. Returns {1 if the call may be
# made, the owners active, the owner's share}. The owner counts as active even when
# refused, so an owner crowded out this second has its share the next.
HOST_SHARE = """
local now = tonumber(ARGV[3])
redis.call('ZADD', KEYS[3], now, ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - tonumber(ARGV[4]))
redis.call('EXPIRE', KEYS[3], tonumber(ARGV[4]) + 1)
local active = redis.call('ZCARD', KEYS[3])
local rate = tonumber(ARGV[1])
local share = math.max(1, math.floor(rate / active))
local total = tonumber(redis.call('GET', KEYS[1]) or '0')
local mine = tonumber(redis.call('GET', KEYS[2]) or '0')
if total >= rate or mine >= share then return {0, active, share} end
redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], 2)
redis.call('INCR', KEYS[2])
redis.call('EXPIRE', KEYS[2], 2)
return {1, active, share}
"""
ACTIVE_S = 2  # seconds an owner that called a host counts in its share
OWNERS_CACHED = 10_000  # bots whose owner a process remembers (an owner never changes)

# Outcomes of a delivery (``DeliveryRecord.outcome``), documented in openapi.yaml.
OUTCOMES = {
    "applied": "the answer's action was applied",
    "delivered": "a notification was answered (2xx)",
    "refused-address": "the URL resolves to an address outside the allowed networks: "
    "no connection was made",
    "connect-failed": "no connection could be made (after the retries)",
    "no-answer": "the connection broke before an answer (after the retries)",
    "timeout": "no answer within the time budget",
    "http-error": "the answer's status was not 2xx (3xx included: redirects are not "
    "followed)",
    "bad-answer": "the body was not JSON `{\"action\": ...}` (or too large, or compressed)",
    "refused": "the action was refused as a pulled one would be (`problem` says why: "
    "illegal-action, not-your-turn, version-conflict...)",
    "no-time": "too little time was left before the deadline to call",
    "host-rate-limited": "the URL's host and port had had its `ARENA_CALLBACK_HOST_RATE` "
    "calls this second (across every bot), or your owner its share of them (shared equally "
    "among the owners called there): no call was made; a turn falls to the deadline's "
    "default",
    "verified": "the verification request's challenge was echoed: the URL gets calls",
    "not-verified": "the answer to the verification request was a 200 that did not echo "
    "the challenge",
}

VERIFICATION = {
    "pending": "a verification request is due or under way; nothing else is sent",
    "verified": "the URL echoed the challenge: turns, start and end are sent to it",
    "failed": "every attempt failed: nothing is sent until you ask again "
    "(`POST /bots/me/callback/verify`)",
}


# --- keys ------------------------------------------------------------------------------------


# --- signing -----------------------------------------------------------------------------------


# --- the address guard (SSRF) ----------------------------------------------------------------


# --- registration and records --------------------------------------------------------------------


class Callbacks(CallbackEvents):
    """Registration, delivery records, and the calls themselves; one per process."""

    def __init__(self, arena: Any, config: dict[str, Any] | None = None, *,
                 read_answer: AnswerReader) -> None:
        cfg = {**DEFAULTS, **(config or {})}
        self.arena = arena
        self.read_answer = read_answer
        self.store = arena.store
        self.guard = Guard(parse_networks(str(cfg["ARENA_CALLBACK_NETWORKS"])))
        self.timeout_s = float(cfg["ARENA_CALLBACK_TIMEOUT"])
        self.retries = int(cfg["ARENA_CALLBACK_RETRIES"])
        self.max_bytes = int(cfg["ARENA_CALLBACK_MAX_BYTES"])
        self.enabled = str(cfg["ARENA_CALLBACKS"]) != "0"
        self.host_rate = int(cfg["ARENA_CALLBACK_HOST_RATE"])
        self.pool = make_pool(self.guard)
        self._claim_notes = self.store.r.register_script(CLAIM_NOTES)
        self._set_if_vid = self.store.r.register_script(SET_IF_VID)
        self._host_share = self.store.r.register_script(HOST_SHARE)
        self._owners: dict[str, str] = {}
        # Called with each finished delivery record (the bench and tests listen here).
        self.on_record: list[Any] = []

    @property
    def p(self) -> str:
        return str(self.store.p)

    # --- registration ----------------------------------------------------------------------

    def register(self, bot_id: str, url: str) -> dict[str, Any]:
        """Set (or replace) the bot's callback URL with a new secret, shown only here. The
        URL is unverified until it echoes a verification request's challenge (sent about
        ``VERIFY_SCHEDULE_S[0]`` seconds from now, by any process's dispatcher); until
        then it is sent nothing else. A new URL (or the same one again: a new secret) is
        verified afresh."""
        why = check_url(url, self.guard)
        if why is not None:
            raise Problem("validation", f"url: {why}", errors={"url": [why]})
        secret = "whsec_" + secrets.token_urlsafe(32)
        created = int(time.time())
        vid = secrets.token_hex(8)
        r = self.store.r
        old = r.hget(cfg_key(self.p, bot_id), "vid")
        r.hset(cfg_key(self.p, bot_id), mapping={
            "url": url, "secret": secret, "created": created, "verified": 0,
            "verification": "pending", "vid": vid, "tries": 0, "checked": "", "vdetail": ""})
        r.sadd(hooks_key(self.p), bot_id)
        self._schedule(bot_id, old, vid, VERIFY_SCHEDULE_S[0])
        self.wake(bot_id)
        return {**self.registration(bot_id), "secret": secret}

    def _schedule(self, bot_id: str, old_vid: bytes | str | None, vid: str,
                  delay_s: float) -> None:
        """Queue the verification ``vid`` of ``bot_id`` in ``delay_s`` seconds, in place of
        the one queued before (``old_vid``)."""
        pipe = self.store.r.pipeline(transaction=False)
        if old_vid:
            old = old_vid.decode() if isinstance(old_vid, bytes) else old_vid
            pipe.zrem(verify_key(self.p), f"{bot_id}|{old}")
        pipe.zadd(verify_key(self.p), {f"{bot_id}|{vid}": time.time() + delay_s})
        pipe.execute()

    def config(self, bot_id: str) -> dict[str, Any] | None:
        raw = self.store.r.hgetall(cfg_key(self.p, bot_id))
        if not raw or b"url" not in raw:
            return None
        # a config written before verification existed counts as verified: it was
        # registered under the old rules and has been called since
        verified = raw.get(b"verified", b"1") == b"1"
        return {"url": raw[b"url"].decode(), "secret": raw[b"secret"].decode(),
                "created": int(raw[b"created"]), "verified": verified,
                "verification": (raw.get(b"verification") or b"verified").decode(),
                "vid": (raw.get(b"vid") or b"").decode(),
                "tries": int(raw.get(b"tries") or 0),
                "checked": float(raw[b"checked"]) if raw.get(b"checked") else None,
                "vdetail": (raw.get(b"vdetail") or b"").decode() or None}

    def registration(self, bot_id: str) -> dict[str, Any]:
        cfg = self.config(bot_id)
        if cfg is None:
            raise Problem("not-found", "this bot has no callback URL")
        return {"url": cfg["url"], "created": cfg["created"], "verified": cfg["verified"],
                "verification": {"status": cfg["verification"], "attempts": cfg["tries"],
                                 "at": cfg["checked"], "detail": cfg["vdetail"]}}

    def summary(self, bot_id: str) -> dict[str, Any] | None:
        """``registration`` for ``GET /bots/me`` (None: no callback URL)."""
        try:
            return self.registration(bot_id)
        except Problem:
            return None

    def request_verification(self, bot_id: str) -> dict[str, Any]:
        """Verify the URL again, at once (the bot has its secret by now): for a URL that
        failed or is still pending. A verified URL stays as it is (nothing is sent)."""
        cfg = self.config(bot_id)
        if cfg is None:
            raise Problem("not-found", "this bot has no callback URL")
        if not cfg["verified"]:
            vid = secrets.token_hex(8)
            self.store.r.hset(cfg_key(self.p, bot_id), mapping={
                "verification": "pending", "vid": vid, "tries": 0, "vdetail": ""})
            self._schedule(bot_id, cfg["vid"], vid, 0.0)
            self.wake(bot_id)
        return self.registration(bot_id)

    def verify_once(self, bot_id: str, vid: str) -> dict[str, Any] | None:
        """One verification attempt of ``bot_id``'s URL (the verification ``vid``): a
        signed ``verify`` request with a random ``challenge``; passed when the answer is
        200 and echoes it (``{"challenge": "<it>"}``, or the bare challenge as the body).
        Passed: the URL is verified and the bot's turns are looked at. Failed: again
        after the next delay of ``VERIFY_SCHEDULE_S``, or ``failed`` after the last. The
        outcome is written only if the verification is still current (``SET_IF_VID``).
        The delivery record, or None when there was nothing to verify."""
        member = f"{bot_id}|{vid}"
        cfg = self.config(bot_id)
        r = self.store.r
        if cfg is None or cfg["vid"] != vid or cfg["verified"]:
            r.zrem(verify_key(self.p), member)
            return None
        started = time.time()
        challenge = secrets.token_urlsafe(24)
        envelope = {"event": "verify", "delivery": "", "bot_id": bot_id,
                    "challenge": challenge}
        result = self.call(cfg, envelope, VERIFY_TIMEOUT_S)
        record: dict[str, Any] = {
            "event": "verify", "game_id": None, "version": None, "seat": None,
            "at": round(started, 3), "status": result.status, "action": None,
            "problem": None, "attempts": result.attempts,
            "latency_ms": round((time.time() - started) * 1000, 2),
            "outcome": "verified", "detail": None,
        }
        if result.error is not None:
            record.update(outcome=result.error, detail=result.detail)
        elif result.status != 200:
            record.update(outcome="http-error",
                          detail=f"the answer's status was {result.status}, not 200")
        elif not echoes(result.body, challenge):
            record.update(outcome="not-verified",
                          detail='the answer did not echo the challenge: answer 200 with '
                          '{"challenge": "<the request\'s challenge>"}')
        tries = cfg["tries"] + 1
        passed = record["outcome"] == "verified"
        last = tries >= len(VERIFY_SCHEDULE_S)
        state = "verified" if passed else ("failed" if last else "pending")
        written = self._set_if_vid(keys=[cfg_key(self.p, bot_id)], args=[
            vid, "verified", int(passed), "verification", state, "tries", tries,
            "checked", round(started, 3), "vdetail", record["detail"] or ""])
        if not written:  # replaced meanwhile: this outcome is for an old URL
            return None
        if passed or last:
            r.zrem(verify_key(self.p), member)
        else:
            r.zadd(verify_key(self.p), {member: time.time() + VERIFY_SCHEDULE_S[tries]})
        self._record(bot_id, record)
        if passed:
            self.wake(bot_id)
        return record

    def claim_verifications(self) -> list[tuple[str, str]]:
        """The due verifications this process is to send, (bot, vid) each, leased like
        the notifications: a process that dies mid-call leaves them due again after the
        lease."""
        now = time.time()
        due = self._claim_notes(keys=[verify_key(self.p)],
                                args=[now, now + VERIFY_TIMEOUT_S + LEASE_MARGIN_S])
        out = []
        for raw in due:
            bot, _, vid = raw.decode().partition("|")
            out.append((bot, vid))
        return out

    def remove(self, bot_id: str) -> None:
        r = self.store.r
        r.srem(hooks_key(self.p), bot_id)
        vid = r.hget(cfg_key(self.p, bot_id), "vid")
        if not r.delete(cfg_key(self.p, bot_id)):
            raise Problem("not-found", "this bot has no callback URL")
        if vid:
            r.zrem(verify_key(self.p), f"{bot_id}|{vid.decode()}")

    def deliveries(self, bot_id: str, limit: int, game_id: str | None = None
                   ) -> list[dict[str, Any]]:
        raw = self.store.r.lrange(deliveries_key(self.p, bot_id), 0, DELIVERIES_KEPT - 1)
        out = [json.loads(x) for x in raw]
        if game_id is not None:
            out = [d for d in out if d["game_id"] == game_id]
        return out[:limit]

    def failed_in(self, bot_id: str | None, game_id: str) -> bool:
        """Whether ``bot_id`` has a failed turn delivery recorded in ``game_id`` (what
        ``with_failure`` would show): a conditional GET of the view is then answered in
        full, since the failure may be newer than the version the client holds."""
        return bot_id is not None and bool(
            self.store.r.hexists(failed_key(self.p, bot_id), game_id))

    def with_failure(self, view: dict[str, Any], bot_id: str | None) -> dict[str, Any]:
        """``view`` (``bot_id``'s own seat's) with ``callback_failure``: the last turn
        delivery to the bot's callback URL in this game that applied nothing (its
        ``version`` says which turn), null when there is none or a later one applied
        (always null for a bot without a callback URL). So a bot sees in its view, as
        well as in its deliveries, that the service could not use its answer, and may
        still act by pull before the deadline. One HGET, read afresh each time: no cache
        that could lag a registration (a view of ``GET /games/{id}`` is not on a bot's
        per-move path, which acts and waits)."""
        if bot_id is None or view.get("seat") is None:
            return view
        raw = self.store.r.hget(failed_key(self.p, bot_id), view["id"])
        view["callback_failure"] = json.loads(raw) if raw else None
        return view

    def _record(self, bot_id: str, record: dict[str, Any]) -> None:
        pipe = self.store.r.pipeline(transaction=True)  # one hash tag: one slot
        pipe.lpush(deliveries_key(self.p, bot_id), dumps(record))
        pipe.ltrim(deliveries_key(self.p, bot_id), 0, DELIVERIES_KEPT - 1)
        if record["event"] == "turn":
            if record["outcome"] == "applied":
                pipe.hdel(failed_key(self.p, bot_id), record["game_id"])
            else:
                pipe.hset(failed_key(self.p, bot_id), record["game_id"], dumps(record))
                pipe.expire(failed_key(self.p, bot_id), 86400)
        pipe.execute()
        for hook in self.on_record:
            with contextlib.suppress(Exception):
                hook(bot_id, record)

    def wake(self, bot_id: str) -> None:
        """Look at ``bot_id``'s turns soon (the local dispatcher, if any)."""
        dispatcher = getattr(self, "dispatcher", None)
        if dispatcher is not None:
            dispatcher.wake(bot_id)

    # --- one call ------------------------------------------------------------------------------

    def _request(self, cfg: dict[str, Any], envelope: dict[str, Any]
                 ) -> tuple[bytes, dict[str, str]]:
        body = dumps(envelope).encode()
        ts = str(int(time.time()))
        return body, {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "Accept-Encoding": "identity",
            TIMESTAMP_HEADER: ts,
            SIGNATURE_HEADER: sign(cfg["secret"], ts, body),
            DELIVERY_HEADER: envelope["delivery"],
            EVENT_HEADER: envelope["event"],
        }

    def call(self, cfg: dict[str, Any], envelope: dict[str, Any], budget_s: float
             ) -> CallResult:
        """Sign and POST one request; a retry where no answer came is a new delivery id
        and timestamp (signed again), the same turn."""
        end = time.monotonic() + budget_s
        result = CallResult(error="no-time", attempts=0)
        for attempt in range(1, self.retries + 2):
            left = end - time.monotonic()
            if left < MIN_BUDGET_S:
                break
            refused = self._host_refuses(cfg["url"], envelope.get("bot_id") or "")
            if refused is not None:
                result = CallResult(error="host-rate-limited", detail=refused,
                                    attempts=attempt - 1)
                break
            envelope = {**envelope, "delivery": secrets.token_hex(8)}
            body, headers = self._request(cfg, envelope)
            result = post(self.pool, cfg["url"], body, headers, left, self.max_bytes)
            result.attempts = attempt
            if result.error not in ("connect-failed", "no-answer"):
                break
            wait = RETRY_BACKOFF_S[min(attempt - 1, len(RETRY_BACKOFF_S) - 1)]
            if end - time.monotonic() < wait + MIN_BUDGET_S:
                break
            time.sleep(wait)
        return result

    def _owner(self, bot_id: str) -> str:
        owner = self._owners.get(bot_id)
        if owner is None:
            if len(self._owners) >= OWNERS_CACHED:
                self._owners.clear()
            owner = self._owners[bot_id] = self.arena.owners.owner_of(bot_id)
        return owner

    def _host_refuses(self, url: str, bot_id: str, now: int | None = None) -> str | None:
        """Count one call to ``url``'s host and port for ``bot_id``'s owner in this second
        (``now``, unix seconds: the clock's unless given; every bot, every process:
        ``HOST_SHARE``); why it may not be made, or None."""
        if not self.host_rate:
            return None
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            port = 0
        owner = self._owner(bot_id) if bot_id else ""
        tag = f"{self.p}rl:{{cb:{host}:{port}}}"
        now = int(time.time()) if now is None else now
        allowed, active, share = self._host_share(
            keys=[f"{tag}:{now}", f"{tag}:{owner}:{now}", f"{tag}:active"],
            args=[self.host_rate, owner, now, ACTIVE_S])
        if int(allowed):
            return None
        return (f"more than {self.host_rate} calls to {host}:{port} in one second "
                f"(ARENA_CALLBACK_HOST_RATE), or more than your owner's share of them "
                f"({int(share)}: the rate shared by {int(active)} owners called there)")


__all__ = ["OUTCOMES", "Callbacks"]

