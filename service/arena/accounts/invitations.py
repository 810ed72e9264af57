"""Consent to play: a bot is seated only in games it chose.

**Who may be seated at once.** ``POST /games`` seats the creator's own bots (bots of the
creator's owner, ``service.arena.accounts.owners``) at once. The house bots accept at once too, up
to ``ARENA_HOUSE_GAMES_PER_CHALLENGER`` games per hour per challenging owner (then 429; a
ladder's validation games count too, ``arena.validation``). Every other bot named in
``seats`` gets an **invitation** (a challenge, as on Lichess): its seats are held for it
(``invited`` in the game's summary; nobody else may join them), the game stays ``waiting``
until every invited bot has accepted, and a decline or an expiry cancels the game: it
becomes ``finished`` with no winner and ``cancelled`` = ``declined`` or ``expired``,
through the arena's one door for every end (``service.arena.games.ending``: ``ended``
says cancelled, a seated webhook bot hears ``end``), so it leaves the waiting index
through the ordinary commit and ends as any finished game does. Joining an open seat
(``POST /games/{id}/seats/{seat}``) is consent already, and so is joining a seat held for
you.

**Policy** (bot hash field ``policy``, JSON, ``PUT /bots/me/policy``): ``anyone``
(default: invitations are delivered and the bot decides), ``nobody`` (a game naming the
bot is refused at creation: 403 ``invitation-refused``), or ``list`` with ``from``: bot ids
and owner ids whose invitations are delivered (others refused at creation).

**Expiry.** An invitation lasts ``ARENA_INVITATION_TTL`` seconds (default 120: a bot that
long-polls ``GET /bots/me/turns`` with the default 25 s timeout sees it within one poll,
a webhook bot gets the ``invitation`` event and its retries, and the creator learns the
answer within two minutes; a flood of challenges holds nothing for long). The sweeper
cancels expired ones (``expire_due``, every repair pass); accepting one found expired
cancels it on the spot. At most ``ARENA_INVITATIONS_PER_BOT`` are pending per invited bot
(then 429 to the creator): 150 challenges cannot bury a bot.

**Fair to the invited and to other inviters.** One inviting owner holds at most
``ARENA_INVITATIONS_PER_INVITER`` of a bot's pending invitations, and the owners made from
one network (the inviting owner's record's ``network``: an IPv4 /24, an IPv6 /64) at most
``ARENA_INVITATIONS_PER_INVITER_NETWORK``; past either the creator gets 429 (so a squatter
who would fill a bot's list, and refuse every honest challenge, needs owners in as many
networks as the list has places divided by the network's share). A bot that declined an
owner's invitations ``ARENA_DECLINES_BEFORE_WAIT`` times within
``ARENA_DECLINE_MEMORY`` seconds hears from that owner again only once that memory has
passed (429 with Retry-After to the creator): a bot that declines at once is not sent a
new challenge a second. ``GET /bots/me/turns`` carries only the newest
``ARENA_TURNS_INVITATIONS`` invitations and the number pending (``GET
/bots/me/invitations`` lists them all), so a long-poll answer stays small.

**Keys.** ``{p}invitation:{id}`` (hash: game, bot, seats, creator, created, expires;
expiring ``TTL + GRACE_S`` after creation), ``{p}bot:{id}:invitations`` (sorted set of the
bot's pending invitation ids by expiry; expires with its newest invitation),
``{p}invitations:due`` (sorted set of every pending invitation by expiry: permanent,
bounded by the pending invitations, each removed when accepted, declined or expired),
``{p}house-games:{owner}:{window}`` (the house bots' count per challenger, expiring with
the hour), ``{p}bot:{id}:invitations:from:{owner}`` and
``{p}bot:{id}:invitations:net:{network}`` (sorted sets of the bot's pending invitations
from one inviting owner, from one network's owners; by expiry, expiring as the bot's
index), ``{p}bot:{id}:declined:{owner}`` (the bot's declines of that owner's invitations,
expiring ``ARENA_DECLINE_MEMORY`` after the last).

**Delivery.** A new invitation wakes the invited bot's ``GET /bots/me/turns`` long-poll
(published as its turn channel's message, as a game that becomes its turn) and queues an
``invitation`` webhook event (``service.arena.webhooks.callbacks``) through the ``on_invite``
hooks.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any, Protocol

from service.arena.accounts.owners import HOUSE_OWNER, Owners
from service.arena.core.problems import Problem
from service.arena.core.status import WAITING, deadline_for, status_of
from service.storage.store import Game, Store

log = logging.getLogger(__name__)

GRACE_S = 60  # an invitation record outlives its expiry by this, for the sweeper to see it
HOUSE_WINDOW_S = 3600
POLICIES = ("anyone", "nobody", "list")

DEFAULTS: dict[str, Any] = {
    "ARENA_INVITATION_TTL": 120,  # seconds an invitation waits for its answer (see above)
    # games per hour the house bots accept from one challenging owner; 0: no limit
    "ARENA_HOUSE_GAMES_PER_CHALLENGER": 60,
    "ARENA_INVITATIONS_PER_BOT": 100,  # pending invitations per invited bot; 0: no limit
    # ... of them from one inviting owner: a few games at once is a challenge, more is a
    # squat; and from the owners made in one network (one person's many owners)
    "ARENA_INVITATIONS_PER_INVITER": 3,
    "ARENA_INVITATIONS_PER_INVITER_NETWORK": 10,
    # declines of one owner's invitations after which the bot hears from it again only
    # once ARENA_DECLINE_MEMORY seconds have passed since the last; 0: no limit
    "ARENA_DECLINES_BEFORE_WAIT": 3,
    "ARENA_DECLINE_MEMORY": 3600,
    # the newest invitations a GET /bots/me/turns answer carries (with the count pending)
    "ARENA_TURNS_INVITATIONS": 5,
}

CANCELLED_DECLINED = "declined"
CANCELLED_EXPIRED = "expired"


def parse_policy(raw: bytes | str | None) -> dict[str, Any]:
    if not raw:
        return {"accept": "anyone", "from": []}
    try:
        doc = json.loads(raw)
    except ValueError:
        return {"accept": "anyone", "from": []}
    return {"accept": doc.get("accept", "anyone"), "from": list(doc.get("from") or [])}


class InvitationHost(Protocol):
    """What invitations use of the ``Arena`` (``service.arena.games.commands``) that keeps them: its
    store, its owners, and seating an invited bot. Named by its shape because the arena
    imports this module."""

    store: Store
    owners: Owners
    ending: Any  # ``service.arena.games.ending.Ending``: the door every end goes through

    def take_invited_seats(self, game_id: str, bot_id: str) -> Game | None: ...


class Invitations:
    """Invitations over one ``Arena`` (its store and its commit)."""

    def __init__(self, arena: InvitationHost, config: dict[str, Any] | None = None) -> None:
        cfg = {**DEFAULTS, **(config or {})}
        self.arena = arena
        self.store = arena.store
        self.r = arena.store.r
        self.p = arena.store.p
        self.ttl = float(cfg["ARENA_INVITATION_TTL"])
        self.house_limit = int(cfg["ARENA_HOUSE_GAMES_PER_CHALLENGER"])
        self.per_bot = int(cfg["ARENA_INVITATIONS_PER_BOT"])
        self.per_inviter = int(cfg["ARENA_INVITATIONS_PER_INVITER"])
        self.per_network = int(cfg["ARENA_INVITATIONS_PER_INVITER_NETWORK"])
        self.declines = int(cfg["ARENA_DECLINES_BEFORE_WAIT"])
        self.decline_memory = int(cfg["ARENA_DECLINE_MEMORY"])
        self.turns_shown = int(cfg["ARENA_TURNS_INVITATIONS"])
        # called with (game, invited bot) when an invitation is made (webhook events)
        self.on_invite: list[Callable[[Game, str], None]] = []
        self._tx = not self.store.cluster

    # --- keys ----------------------------------------------------------------------------

    def key(self, inv_id: str) -> str:
        return f"{self.p}invitation:{inv_id}"

    def bot_index(self, bot_id: str) -> str:
        return f"{self.p}bot:{bot_id}:invitations"

    def from_index(self, bot_id: str, owner: str) -> str:
        return f"{self.p}bot:{bot_id}:invitations:from:{owner}"

    def net_index(self, bot_id: str, network: str) -> str:
        return f"{self.p}bot:{bot_id}:invitations:net:{network}"

    def declined_key(self, bot_id: str, owner: str) -> str:
        return f"{self.p}bot:{bot_id}:declined:{owner}"

    @property
    def due_key(self) -> str:
        return f"{self.p}invitations:due"

    def _network_of(self, owner: str) -> str:
        """The network an owner was made from (its record's ``network``); an owner with
        no record (a bot registered before owners existed) counts as a network of its
        own."""
        raw = self.r.hget(self.arena.owners.key(owner), "network")
        return raw.decode() if raw else f"owner-{owner}"

    # --- policy --------------------------------------------------------------------------

    def policy(self, bot_id: str) -> dict[str, Any]:
        return parse_policy(self.r.hget(f"{self.p}bot:{bot_id}", "policy"))

    def set_policy(self, bot_id: str, accept: str, from_: list[str]) -> dict[str, Any]:
        doc = {"accept": accept, "from": sorted(set(from_)) if accept == "list" else []}
        self.r.hset(f"{self.p}bot:{bot_id}", "policy", json.dumps(doc))
        return doc

    # --- creating a game -----------------------------------------------------------------

    def plan(self, creator: str, seats: list[str | None]
             ) -> tuple[list[str | None], list[str | None]]:
        """(seats to fill at once, invited bot per seat) for a game ``creator`` asks for
        with ``seats``; refuses (403, 429) what the named bots' policies or limits do not
        allow. Only bots of another owner are invited (see the module docstring)."""
        named = sorted({b for b in seats if b and b != creator})
        if not named:
            return list(seats), [None] * len(seats)
        pipe = self.r.pipeline(transaction=False)
        for b in [creator, *named]:
            pipe.hmget(f"{self.p}bot:{b}", "owner", "policy", "suspended")
        rows = dict(zip([creator, *named], pipe.execute()))
        mine = (rows[creator][0] or creator.encode()).decode()
        at_once: set[str] = set()
        invite: set[str] = set()
        house = False
        for b in named:
            owner_raw, policy_raw, suspended = rows[b]
            owner = owner_raw.decode() if owner_raw else b
            if suspended is not None:  # a bot of one's own owner too (a retired one)
                raise Problem("invitation-refused", f"bot {b} is suspended: it plays no games",
                              errors={"seats": [f"bot {b} is suspended"]})
            if owner == mine:
                at_once.add(b)
                continue
            if owner == HOUSE_OWNER:
                house = True
                at_once.add(b)
                continue
            policy = parse_policy(policy_raw)
            if policy["accept"] == "nobody" or (
                    policy["accept"] == "list"
                    and not ({creator, mine} & set(policy["from"]))):
                raise Problem("invitation-refused",
                              f"bot {b} accepts no invitations from you",
                              errors={"seats": [f"bot {b} accepts no invitations from you"]})
            invite.add(b)
        if invite:
            self._check_room(sorted(invite), mine)
        if house and self.house_limit:
            self.count_house_game(mine)
        fill = [b if (b is None or b == creator or b in at_once) else None for b in seats]
        invited = [b if b in invite else None for b in seats]
        return fill, invited

    def _check_room(self, bots: list[str], owner: str) -> None:
        """429 unless each of ``bots`` has room for one more invitation from ``owner``: its
        declines of the owner, and its pending invitations in all, from the owner and
        from the owner's network, each below its cap (see the module docstring)."""
        now = time.time()
        network = self._network_of(owner)
        caps = [(self.per_bot, self.bot_index, "in all"),
                (self.per_inviter, lambda b: self.from_index(b, owner), "from your owner"),
                (self.per_network, lambda b: self.net_index(b, network),
                 "from owners of your network")]
        pipe = self.r.pipeline(transaction=False)
        for b in bots:
            pipe.get(self.declined_key(b, owner))
            pipe.pttl(self.declined_key(b, owner))
            for limit, index, _ in caps:
                if limit:
                    pipe.zremrangebyscore(index(b), "-inf", now)
                    pipe.zcard(index(b))
        rows = iter(pipe.execute())
        for b in bots:
            declined, ttl = next(rows), next(rows)
            if self.declines and declined is not None and int(declined) >= self.declines:
                raise Problem("rate-limited", f"bot {b} declined {int(declined)} invitations "
                              "from your owner; it hears from you again once it has declined "
                              f"none for {self.decline_memory} s",
                              headers={"Retry-After": str(max(1, -(-int(ttl) // 1000)))})
            for limit, _, whose in caps:
                if not limit:
                    continue
                next(rows)
                if int(next(rows)) >= limit:
                    raise Problem("rate-limited", f"bot {b} has {limit} invitations {whose} "
                                  "waiting for its answer; try later",
                                  headers={"Retry-After": str(int(self.ttl))})

    def count_house_game(self, owner: str) -> None:
        """One more house game for ``owner`` this hour (a game it creates with house bots
        in it, or a validation game, ``arena.validation``); 429 past the limit."""
        slot = int(time.time()) // HOUSE_WINDOW_S
        key = f"{self.p}house-games:{owner}:{slot}"
        pipe = self.r.pipeline(transaction=self._tx)
        pipe.incr(key)
        pipe.expire(key, HOUSE_WINDOW_S + 1, nx=True)
        pipe.pttl(key)
        n, _, ttl = pipe.execute()
        if int(n) > self.house_limit:
            raise Problem("rate-limited", f"the house bots accept at most {self.house_limit} "
                          "games an hour from one owner",
                          headers={"Retry-After": str(max(1, -(-int(ttl) // 1000)))})

    def prepare(self, meta: dict[str, Any], invited: list[str | None]) -> dict[str, str]:
        """Put the invitations into a new game's ``meta`` (before it is created): the
        invited bot per seat, the invitation id per bot and the expiry."""
        bots = sorted({b for b in invited if b})
        if not bots:
            return {}
        ids = {b: secrets.token_hex(6) for b in bots}
        meta["invited"] = list(invited)
        meta["invitations"] = ids
        meta["invitation_expires"] = round(time.time() + self.ttl, 3)
        return ids

    def issue(self, game: Game) -> None:
        """Write the invitations of a just created ``game`` and tell the invited bots."""
        ids: dict[str, str] = game.meta.get("invitations") or {}
        if not ids:
            return
        invited = game.meta["invited"]
        expires = float(game.meta["invitation_expires"])
        now = time.time()
        creator = game.meta.get("creator") or ""
        creator_owner = self.arena.owners.owner_of(creator) if creator else ""
        network = self._network_of(creator_owner) if creator_owner else ""
        pipe = self.r.pipeline(transaction=self._tx)
        for bot, inv_id in ids.items():
            doc = {"id": inv_id, "game": game.id, "bot": bot,
                   "seats": json.dumps([i for i, b in enumerate(invited) if b == bot]),
                   "creator": creator, "creator_owner": creator_owner,
                   "creator_network": network,
                   "created": f"{now:.3f}", "expires": f"{expires:.3f}"}
            pipe.hset(self.key(inv_id), mapping=doc)
            pipe.expire(self.key(inv_id), int(self.ttl) + GRACE_S)
            for index in self._indexes(bot, creator_owner, network):
                pipe.zadd(index, {inv_id: expires})
                pipe.expire(index, int(self.ttl) + GRACE_S)
            pipe.zadd(self.due_key, {inv_id: expires})
        pipe.execute()
        for bot in ids:
            self._wake(bot, game)
            for hook in self.on_invite:
                try:
                    hook(game, bot)
                except Exception:
                    log.exception("invitation hook failed for game %s", game.id)

    def _indexes(self, bot: str, owner: str, network: str) -> list[str]:
        """The sorted sets an invitation to ``bot`` from ``owner`` (of ``network``) is in."""
        out = [self.bot_index(bot)]
        if owner:
            out.append(self.from_index(bot, owner))
        if network:
            out.append(self.net_index(bot, network))
        return out

    def _wake(self, bot: str, game: Game) -> None:
        """Wake ``bot``'s turns long-poll, wherever it waits: a game-channel message naming
        it (every process's listener hands it to the bot's turn channel), or in a cluster
        with sharded channels the bot's turn channel itself."""
        try:
            if self.store.publish == "SPUBLISH":
                self.r.spublish(self.store.bot_turn_channel(bot), "invited")
            else:
                self.r.publish(self.store.game_channel(game.id), f"{game.version}::{bot}")
        except Exception:
            log.warning("could not wake bot %s for its invitation", bot)

    # --- reading -------------------------------------------------------------------------

    def _read(self, inv_id: str) -> dict[str, Any] | None:
        raw = self.r.hgetall(self.key(inv_id))
        return self._read_raw(raw) if raw else None

    def pending(self, bot_id: str, now: float | None = None, newest: int | None = None
                ) -> list[dict[str, Any]]:
        """``bot_id``'s pending invitations, oldest first, each with the game it is for;
        with ``newest``, only that many of the newest (every invitation lasts the same
        time, so the latest to expire are the newest)."""
        now = time.time() if now is None else now
        if newest is None:
            raw = self.r.zrangebyscore(self.bot_index(bot_id), now, "+inf")
        else:
            raw = self.r.zrevrangebyscore(self.bot_index(bot_id), "+inf", now, start=0,
                                          num=newest)
        ids = [m.decode() for m in raw]
        if not ids:
            return []
        pipe = self.r.pipeline(transaction=False)
        for i in ids:
            pipe.hgetall(self.key(i))
        out = [self._read_raw(raw) for raw in pipe.execute() if raw]
        gids = sorted({i["game"] for i in out})
        pipe = self.r.pipeline(transaction=False)  # every game in one round trip
        for gid in gids:
            pipe.hgetall(self.store.game_key(gid))
        games = {g.id: g for g in (self.store._game(gid, raw)
                                   for gid, raw in zip(gids, pipe.execute())) if g is not None}
        names = self.store.bot_names([i["creator"] for i in out if i["creator"]])
        shown = []
        for inv in sorted(out, key=lambda i: (i["created"], i["id"])):
            game = games.get(inv["game"])
            if game is None or game.status != WAITING:
                continue
            shown.append(self.out(inv, game, names.get(inv["creator"] or "")))
        return shown

    @staticmethod
    def _read_raw(raw: dict[bytes, bytes]) -> dict[str, Any]:
        d = {k.decode(): v.decode() for k, v in raw.items()}
        return {"id": d["id"], "game": d["game"], "bot": d["bot"],
                "seats": json.loads(d["seats"]), "creator": d.get("creator") or None,
                "creator_owner": d.get("creator_owner") or d.get("creator") or None,
                "creator_network": d.get("creator_network") or None,
                "created": float(d["created"]), "expires": float(d["expires"])}

    def count_pending(self, bot_id: str) -> int:
        return int(self.r.zcount(self.bot_index(bot_id), time.time(), "+inf"))

    def has_new(self, bot_id: str, after: float | None) -> bool:
        """Whether ``bot_id`` has a pending invitation made after ``after`` (unix seconds;
        None: none counts as new). The newest is the one that expires last: one read."""
        if after is None:
            return False
        now = time.time()
        ids = [m.decode() for m in self.r.zrevrangebyscore(self.bot_index(bot_id), "+inf",
                                                           now, start=0, num=1)]
        if not ids:
            return False
        created = self.r.hget(self.key(ids[0]), "created")
        return created is not None and float(created) > after

    def out(self, inv: dict[str, Any], game: Game, creator_name: str | None,
            status: str = "pending") -> dict[str, Any]:
        meta = game.meta
        return {
            "id": inv["id"], "game_id": inv["game"], "status": status,
            "seats": inv["seats"], "players": game.players,
            "from_bot": inv["creator"], "from_name": creator_name or None,
            "from_owner": inv.get("creator_owner"),
            "variants": game.variants.to_dict(), "move_limit": meta.get("move_limit"),
            "created": round(inv["created"], 3), "expires": round(inv["expires"], 3),
        }

    def mine(self, inv_id: str, bot_id: str) -> dict[str, Any]:
        inv = self._read(inv_id)
        if inv is None or inv["bot"] != bot_id:
            raise Problem("not-found", "no such invitation for your bot (answered, cancelled "
                          "or expired?)")
        return inv

    # --- answering -----------------------------------------------------------------------

    def accept(self, inv_id: str, bot_id: str, now: float | None = None) -> dict[str, Any]:
        """Take the seats held for ``bot_id``; the game starts when the last seat is
        filled. An expired invitation cancels its game instead (404)."""
        inv = self.mine(inv_id, bot_id)
        now = time.time() if now is None else now
        if inv["expires"] <= now:
            self.cancel(inv["game"], CANCELLED_EXPIRED, None)
            raise Problem("not-found", "the invitation has expired; its game is cancelled")
        game = self.arena.take_invited_seats(inv["game"], bot_id)
        if game is None:
            self._forget(inv)
            raise Problem("not-found", "the game of this invitation is no longer waiting")
        self._forget(inv)
        names = self.store.bot_names([inv["creator"]] if inv["creator"] else [])
        return self.out(inv, game, names.get(inv["creator"] or ""), "accepted")

    def decline(self, inv_id: str, bot_id: str) -> dict[str, Any]:
        """Refuse: the game is cancelled (``cancelled`` = ``declined``)."""
        inv = self.mine(inv_id, bot_id)
        game = self.cancel(inv["game"], CANCELLED_DECLINED, bot_id)
        self._forget(inv)
        owner = inv.get("creator_owner")
        if owner and self.declines and self.decline_memory > 0:
            pipe = self.r.pipeline(transaction=self._tx)
            pipe.incr(self.declined_key(bot_id, owner))
            pipe.expire(self.declined_key(bot_id, owner), self.decline_memory)
            pipe.execute()
        if game is None:
            game = self.store.get_game(inv["game"])
        if game is None:
            raise Problem("not-found", "no such game")
        names = self.store.bot_names([inv["creator"]] if inv["creator"] else [])
        return self.out(inv, game, names.get(inv["creator"] or ""), "declined")

    def forget(self, inv_id: str, bot_id: str) -> None:
        """Drop one invitation (answered, or its seats taken by joining them)."""
        inv = self._read(inv_id) or {"id": inv_id, "bot": bot_id}
        self._forget(inv)

    def _forget(self, inv: dict[str, Any]) -> None:
        pipe = self.r.pipeline(transaction=self._tx)
        pipe.delete(self.key(inv["id"]))
        for index in self._indexes(inv["bot"], inv.get("creator_owner") or "",
                                   inv.get("creator_network") or ""):
            pipe.zrem(index, inv["id"])
        pipe.zrem(self.due_key, inv["id"])
        pipe.execute()

    def forget_game(self, game: Game) -> None:
        """Drop every invitation of ``game`` (it started or was cancelled)."""
        ids: dict[str, str] = game.meta.get("invitations") or {}
        if not ids:
            return
        pipe = self.r.pipeline(transaction=False)
        for inv_id in ids.values():
            pipe.hmget(self.key(inv_id), "creator_owner", "creator_network")
        found = pipe.execute()
        pipe = self.r.pipeline(transaction=self._tx)
        for (bot, inv_id), (owner, network) in zip(ids.items(), found):
            pipe.delete(self.key(inv_id))
            for index in self._indexes(bot, (owner or b"").decode(),
                                       (network or b"").decode()):
                pipe.zrem(index, inv_id)
            pipe.zrem(self.due_key, inv_id)
        pipe.execute()

    def cancel(self, game_id: str, reason: str, by: str | None) -> Game | None:
        """End a waiting game whose invitation was declined or expired, through the
        arena's door for every end (``Ending.end``: reason ``cancelled``, announced):
        ``finished``, no winner, ``cancelled`` = ``reason`` in its meta. None if it was not
        waiting (it started, or was cancelled already)."""
        game = self.store.get_game(game_id)
        if game is None:
            return None
        ended = self.arena.ending.end(
            game, "cancelled", why=reason,
            # started, cancelled already, or every invited bot accepted: not cancelled
            only_if=lambda g: g.status == WAITING and any(g.meta.get("invited") or []),
            meta={"cancelled": {"reason": reason, "by": by, "at": round(time.time(), 3)}})
        if ended is not None:
            self.forget_game(ended)
            log.info("game %s cancelled: invitation %s", game_id, reason)
        return ended

    def expire_due(self, now: float | None = None, limit: int = 100) -> int:
        """Cancel the games of invitations past their expiry; how many games."""
        now = time.time() if now is None else now
        ids = [m.decode() for m in self.r.zrangebyscore(self.due_key, "-inf", now,
                                                         start=0, num=limit)]
        done = 0
        for inv_id in ids:
            inv = self._read(inv_id)
            if inv is None:
                self.r.zrem(self.due_key, inv_id)
                continue
            if self.cancel(inv["game"], CANCELLED_EXPIRED, None) is not None:
                done += 1
            self._forget(inv)
        return done


def seat_invited(game: Game, bot_id: str, names: dict[str, str]
                 ) -> tuple[dict[str, Any], str, float | None] | None:
    """The meta, status and deadline of ``game`` once ``bot_id`` sits in the seats held
    for it; None if none are."""
    invited = list(game.meta.get("invited") or [])
    if game.status != WAITING or bot_id not in invited:
        return None
    seats = list(game.seats)
    names_ = list(game.meta["names"])
    for i, b in enumerate(invited):
        if b == bot_id:
            seats[i], invited[i], names_[i] = bot_id, None, names.get(bot_id)
    meta = {**game.meta, "seats": seats, "names": names_, "invited": invited}
    status = status_of(game.state, seats)
    return meta, status, deadline_for(meta, game.state, status)


__all__ = ["DEFAULTS", "POLICIES", "Invitations", "parse_policy", "seat_invited"]
