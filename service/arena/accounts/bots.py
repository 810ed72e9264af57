"""Bots and their owners as the operator and a registering caller see them: registering a
bot (within its owner's admission), reading one, and suspending or lifting a bot or a
whole owner. A part of ``Arena`` (``service.arena.games.commands``, which inherits it):
what it uses of the arena — its store, owners, invitations and the tournaments and
ladders a suspension withdraws a bot from — is the arena's, named here by use only,
because the games domain sits above this one."""

from __future__ import annotations

import json
import logging
from typing import Any

from service.addresses import network_of
from service.arena.accounts.owners import HOUSE_OWNER
from service.arena.core.problems import Problem

log = logging.getLogger(__name__)


class BotAccounts:
    """The bots half of ``Arena``: see the module docstring."""

    # --- bots ------------------------------------------------------------------------------

    def register_bot(self, name: str, person: bool = False, *, owner_bot: str | None = None,
                     address: str, invitation: str | None = None) -> dict[str, Any]:
        """A new bot and its token, belonging to ``owner_bot``'s owner (the bot behind the
        caller's token), or else to a new owner admitted from ``address``'s network
        (``Owners.admit``). ``address`` has no default: a caller that forgot it would
        count every stranger in one shared network bucket."""
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
        owner, suspended, person = self.store.r.hmget(self.store.keys.bot(bot_id), "owner",
                                                      "suspended", "person")
        bot["owner"] = owner.decode() if owner else bot_id
        bot["suspended"] = suspended.decode() if suspended is not None else None
        bot["person"] = person is not None  # a person's account (the pages'), not a program
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
