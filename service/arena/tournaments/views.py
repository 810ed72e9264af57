"""Reading a tournament: its document, summary, detail, standings and export, and the
leaderboard. The reading half of ``Tournaments`` (``service.arena.tournaments.service``, which
inherits it), as ``Waiting`` is of ``Arena``: it uses the tournaments' client and keys
(``r``, ``key``, ``lb_key``), their store and their provisional thresholds. Each answer is
built from one read of the document, so what it shows is what the document says, and what
the embargo hides stays hidden (``_slot_out``)."""

from __future__ import annotations

import json
from typing import Any

import redis

from service.arena.core import ratings
from service.arena.core.problems import Problem
from service.arena.core.status import FINISHED
from service.arena.tournaments import control, knockout
from service.arena.tournaments.pairing import (
    DONE,
    LIVE,
    planned_games,
)
from service.arena.tournaments.standings import (
    published_rows,
    standings,
)
from service.storage.store import Store

SCAN_MAX = 500  # tournaments one filtered page reads at most


class TournamentViews:
    """The reading half of ``Tournaments`` (which inherits it): see the module docstring."""

    r: redis.Redis
    store: Store
    provisional_games: int
    provisional_owners: int

    def doc(self, tid: str) -> dict[str, Any]:
        raw = self.r.get(self.key(tid))
        if raw is None:
            raise Problem("not-found", "no such tournament")
        return json.loads(raw)

    @staticmethod
    def _summary(doc: dict[str, Any]) -> dict[str, Any]:
        settings = doc["settings"]
        slots = [s for r in doc["rounds"] for s in r["slots"]]
        shown = {k: v for k, v in settings.items() if k != "seed"}
        if doc["status"] in (FINISHED, control.CANCELLED) and not doc.get("closing") \
                and "seed" in settings:
            shown["seed"] = settings["seed"]  # it fixes every deal: secret until the end
        reg = doc.get("registration")
        out_ = doc.get("out") or {}
        return {
            "organizer": doc.get("organizer"),
            "schedule": doc.get("schedule"),
            # the join code is never shown (its hash is kept)
            "registration": {k: v for k, v in reg.items() if k != "code"} if reg else None,
            "entrant_count": sum(1 for e in doc["entrants"] if e["bot_id"] not in out_),
            "rated": doc.get("rated", len({e.get("owner", e["bot_id"])
                                           for e in doc["entrants"]}) > 1),
            "reason": doc.get("reason"),
            "started": doc.get("started"),
            "ends_at": doc.get("ends_at"),
            "excluded": doc.get("excluded") or [],
            "id": doc["id"],
            "name": doc["name"],
            "status": doc["status"],
            "created": doc["created"],
            "finished": doc["finished"],
            "settings": shown,
            "entrants": control.entrants_out(doc),
            "warnings": doc.get("warnings", []),
            "progress": {
                # an arena plans no games: those paired so far
                "games_planned": max(planned_games(settings, len(doc["entrants"]))
                                     + knockout.tiebreak_games(doc), len(slots)),
                "games_done": sum(1 for s in slots if s["status"] == DONE),
                "games_live": sum(1 for s in slots if s["status"] == LIVE),
                "rounds_planned": settings["rounds"],
                "rounds_done": len(doc["history"]),
            },
        }

    def detail(self, tid: str) -> dict[str, Any]:
        return self._detail(self.doc(tid))

    def _detail(self, doc: dict[str, Any]) -> dict[str, Any]:
        out = self._summary(doc)
        out["bracket"] = knockout.bracket(doc) if "knockout" in doc else None
        out["rounds"] = [
            {
                "round": rnd["round"],
                "byes": rnd["byes"],
                "games": [self._slot_out(s) for s in rnd["slots"]],
            }
            for rnd in doc["rounds"]
        ]
        control.credit(doc, out["rounds"])
        return out

    @staticmethod
    def _slot_out(slot: dict[str, Any]) -> dict[str, Any]:
        res = slot["result"]
        return {
            "slot": slot["slot"],
            "pairing": slot["pairing"],
            "deal": slot["deal"],
            "teams": slot["teams"],
            "recorded": slot.get("recorded"),
            "game_id": slot["game"],
            "status": slot["status"],
            # a game's seed fixes its cards: shown only once the game is over (a forfeit
            # never played, or a void game never started, was dealt no cards here)
            "seed": slot["seed"] if res is not None and slot["game"] else None,
            "winner": slot["teams"][res["winner"]] if res and res["winner"] is not None
            else None,
            "forfeit": [slot["teams"][t] for t in res["forfeit"]]
            if res and "forfeit" in res else None,
            "scores": res["scores"] if res else None,
            "hands_won": res["hands_won"] if res else None,
            "timeouts": res["timeouts"] if res else None,
            "rating": [
                {"bot_id": bot, "before": ratings.shown({"mu": m0, "sigma": s0}),
                 "after": ratings.shown({"mu": m1, "sigma": s1})}
                for bot, (m0, s0, m1, s1) in zip(slot["teams"], slot["rating"], strict=True)
            ] if slot.get("rating") else None,
        }

    def list(self, limit: int, cursor: int | None, status: str | None = None,
             fmt: str | None = None, players: int | None = None,
             starts_after: float | None = None, starts_before: float | None = None,
             ) -> dict[str, Any]:
        """Tournaments newest first, or — ``status`` registering — soonest start first
        (``cursor``: how many of those to skip), filtered. A page reads at most
        ``SCAN_MAX`` tournaments, so a rare filter may answer fewer than ``limit`` items
        with a ``next_cursor`` to go on from."""
        def wanted(doc: dict[str, Any]) -> bool:
            start = (doc.get("registration") or {}).get("starts_at") or doc.get("started") \
                or doc["created"]
            return ((status is None or doc["status"] == status
                     or (status == "running" and doc["status"] == control.PAUSED))
                    and (fmt is None or doc["settings"]["format"] == fmt)
                    and (players is None or doc["settings"]["players"] == players)
                    and (starts_after is None or start >= starts_after)
                    and (starts_before is None or start <= starts_before))

        if status == "registering":
            skip = cursor or 0
            ids = [m.decode() for m in self.r.zrange(f"{self.p}tours:registering", skip,
                                                     skip + SCAN_MAX - 1)]
            raws = self.r.mget([self.key(t) for t in ids]) if ids else []
            items, seen = [], 0
            for raw in raws:
                seen += 1
                doc = json.loads(raw) if raw else None
                if doc is not None and wanted(doc):
                    items.append(self._summary(doc))
                    if len(items) == limit:
                        break
            more = seen < len(ids) or len(ids) == SCAN_MAX
            return {"items": items, "next_cursor": skip + seen if more else None}
        hi = f"({cursor}" if cursor is not None else "+inf"
        items, scanned = [], 0
        while len(items) < limit and scanned < SCAN_MAX:
            rows = self.r.zrevrangebyscore(f"{self.p}tours:all", hi, "-inf", start=0,
                                           num=limit + 1, withscores=True)
            if not rows:
                return {"items": items, "next_cursor": None}
            raws = self.r.mget([self.key(t.decode()) for t, _ in rows])
            gone = []
            for (tid, score), raw in zip(rows, raws, strict=True):
                scanned += 1
                hi = f"({int(score)}"
                if raw is None:
                    gone.append(tid)  # expired (an unstarted registration): unlisted
                    continue
                doc = json.loads(raw)
                if wanted(doc):
                    items.append(self._summary(doc))
                    if len(items) == limit:
                        break
            if gone:
                self.r.zrem(f"{self.p}tours:all", *gone)
        more = bool(self.r.zrevrangebyscore(f"{self.p}tours:all", hi, "-inf", start=0,
                                            num=1))
        return {"items": items, "next_cursor": int(hi[1:]) if more else None}

    def standings(self, tid: str) -> dict[str, Any]:
        return self._standings(self.doc(tid))

    @staticmethod
    def _standings(doc: dict[str, Any]) -> dict[str, Any]:
        return {
            "tournament_id": doc["id"],
            "status": doc["status"],
            "rounds_done": len(doc["history"]),
            "items": standings(doc),
            "history": [
                {"round": h["round"],
                 "ratings": [{"bot_id": b, **r} for b, r in h["ratings"].items()]}
                for h in doc["history"]
            ],
        }

    def export(self, tid: str) -> dict[str, Any]:
        """The whole tournament in one answer, for archives and spreadsheets: the summary,
        the standings, every game (flat, with its round and its record's path) and the
        rating history. Built from one read of the document by the same code as the
        detail and the standings, so it shows exactly what they show — and hides what
        they hide (a game's seed and result while any table of its deal is live)."""
        doc = self.doc(tid)
        out = self._detail(doc)
        table = self._standings(doc)
        rounds = out.pop("rounds")
        out["standings"] = table["items"]
        out["games"] = [
            {"round": rnd["round"], **game,
             "record": f"/games/{game['game_id']}/record" if game["game_id"] else None}
            for rnd in rounds for game in rnd["games"]
        ]
        out["byes"] = [{"round": rnd["round"], "bot_id": bot}
                       for rnd in rounds for bot in rnd["byes"]]
        out["history"] = table["history"]
        return out

    def leaderboard(self) -> dict[str, Any]:
        """Every bot with a leaderboard entry, ranked ones first by ordinal (then bot id);
        a provisional bot (too few rated games, or against too few distinct owners) is
        listed after them with ``rank`` null; a suspended bot is left off (docs/ratings.md)."""
        raw = {k.decode(): json.loads(v) for k, v in self.r.hgetall(self.lb_key).items()}
        return {"items": published_rows(self.store, raw, self.provisional_games,
                                        self.provisional_owners)}
