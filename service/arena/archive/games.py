"""Every finished game of a bot, newest first, filtered: as pages, or as one stream of
full records that holds one batch in memory at a time, whatever the count.

Read from the bot's index of finished games (``service.storage.finished``), a batch of
entries and their games per round trip. A game of a duplicate deal still being played at
another table (``Arena.embargoed``) is listed with nothing of its cards (no scores,
winner or record, ``embargoed: true``) until the embargo lifts: the position it holds in
the order never moves, so a reader paging through loses nothing and may ask again later.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from service.arena.core.problems import Problem
from service.arena.core.status import FINISHED, embargo_key
from service.arena.games.commands import Arena
from service.arena.games.views import finished_record
from service.jsonio import dumps

# Index entries read per round trip (a page's or a stream's batch): the stream holds one
# batch of games and records at a time.
BATCH = 200
# At most this many index entries are looked at for one page: a selective filter then
# answers a short (even empty) page with a cursor to go on from, never a long request.
SCAN_MAX = 2000
CURSOR_RE = r"^[0-9]+(\.[0-9]+)?(e[+-]?[0-9]+)?_[0-9a-f]{12}$"
_CURSOR = re.compile(CURSOR_RE)


@dataclass(frozen=True)
class Filters:
    """What ``GET /bots/{id}/games`` may filter on; None: any."""

    since: float | None = None  # finished at or after (unix seconds)
    until: float | None = None  # finished at or before
    rated: bool | None = None  # a tournament's or a ladder's game (ratings moved)
    tournament: str | None = None
    ladder: str | None = None
    opponent: str | None = None  # a bot seated on the other team
    players: int | None = None  # table size

    def admit(self, game: Any, bot_id: str) -> bool:
        meta = game.meta
        tour = (meta.get("tournament") or {}).get("id")
        ladder = (meta.get("ladder") or {}).get("name")
        if self.rated is not None and self.rated != bool(tour or ladder):
            return False
        if self.tournament is not None and tour != self.tournament:
            return False
        if self.ladder is not None and ladder != self.ladder:
            return False
        if self.players is not None and game.players != self.players:
            return False
        if self.opponent is not None:
            seats = game.seats
            mine = {i % 2 for i, b in enumerate(seats) if b == bot_id}
            if not any(b == self.opponent and i % 2 not in mine
                       for i, b in enumerate(seats)):
                return False
        return True


def cursor_of(finished_at: float, game_id: str) -> str:
    """An opaque cursor: the position of a listed game (its finish time, exactly, and id)."""
    return f"{finished_at!r}_{game_id}"


def parse_cursor(cursor: str | None) -> tuple[float, str] | None:
    if cursor is None:
        return None
    if not _CURSOR.fullmatch(cursor):
        raise Problem("validation", "cursor must be a next_cursor of this list",
                      errors={"cursor": ["not a cursor of this list"]})
    at, _, gid = cursor.partition("_")
    return float(at), gid


class BotGames:
    """A bot's finished games over ``arena`` (its store and embargo rule)."""

    def __init__(self, arena: Arena) -> None:
        self.arena = arena
        self.store = arena.store

    def _known(self, bot_id: str) -> None:
        if self.store.get_bot(bot_id) is None:
            raise Problem("not-found", "no such bot")

    def _rows(self, bot_id: str, f: Filters, after: tuple[float, str] | None,
              scan_max: int | None) -> Iterator[tuple[float, str, Any, bool]]:
        """(finished at, game id, game or None when the filters leave it out, embargoed)
        for each index entry after ``after``, newest first, a batch per round trip;
        at most ``scan_max`` entries (None: all)."""
        seen = 0
        embargo = embargo_key(self.store.tours_prefix)
        while scan_max is None or seen < scan_max:
            want = BATCH if scan_max is None else min(BATCH, scan_max - seen)
            rows = self.store.finished_rows(bot_id, f.until, f.since, after, want)
            if not rows:
                return
            seen += len(rows)
            games = self.store.finished_games([gid for gid, _ in rows])
            gone = [gid for (gid, _), g in zip(rows, games) if g is None]
            self.store.forget_finished(bot_id, gone)
            deals = sorted({g.meta["embargo"] for g in games
                            if g is not None and g.meta.get("embargo")})
            open_deals: set[str] = set()
            if deals:
                inside = self.store.r.smismember(embargo, deals)
                open_deals = {d for d, i in zip(deals, inside) if i}
            for (gid, at), game in zip(rows, games):
                keep = game if game is not None and game.status == FINISHED \
                    and f.admit(game, bot_id) else None
                held = bool(keep is not None and keep.meta.get("embargo") in open_deals)
                yield at, gid, keep, held
            after = (rows[-1][1], rows[-1][0])
            if len(rows) < want:
                return

    def item(self, game: Any, finished_at: float, embargoed: bool) -> dict[str, Any]:
        """A listed game: its summary (``Arena.summary``), when it finished and whether
        its deal is embargoed (then without scores and winner)."""
        out = self.arena.summary(game)
        out["finished_at"] = finished_at
        out["embargoed"] = embargoed
        if embargoed:
            out["scores"] = out["winner"] = None
        return out

    @staticmethod
    def record(game: Any) -> dict[str, Any]:
        """The game's complete record, as ``GET /games/{id}/record`` answers it once over."""
        return finished_record(game)

    def page(self, bot_id: str, f: Filters, limit: int, cursor: str | None
             ) -> dict[str, Any]:
        """Up to ``limit`` games after ``cursor``; ``next_cursor`` None once the list is
        through. Looks at no more than ``SCAN_MAX`` index entries, so a page may be
        short (or empty) with a cursor still to follow."""
        self._known(bot_id)
        after = parse_cursor(cursor)
        items: list[dict[str, Any]] = []
        last: tuple[float, str] | None = None
        more = False
        for scanned, (at, gid, game, held) in enumerate(
                self._rows(bot_id, f, after, SCAN_MAX + 1)):
            if len(items) == limit or scanned == SCAN_MAX:
                more = True  # an entry beyond this page exists
                break
            last = (at, gid)
            if game is not None:
                items.append(self.item(game, at, held))
        return {"items": items,
                "next_cursor": cursor_of(*last) if more and last is not None else None}

    def stream(self, bot_id: str, f: Filters, records: bool = True) -> Iterator[bytes]:
        """Every matching game, one JSON line each (with its ``record``: null while
        embargoed), a batch of games read at a time: nothing accumulates. An unknown bot
        is refused here, before the first line is asked for."""
        self._known(bot_id)
        return self._lines(bot_id, f, records)

    def _lines(self, bot_id: str, f: Filters, records: bool) -> Iterator[bytes]:
        for at, _gid, game, held in self._rows(bot_id, f, None, None):
            if game is None:
                continue
            line = self.item(game, at, held)
            if records:
                line["record"] = None if held else self.record(game)
            yield dumps(line).encode() + b"\n"


__all__ = ["CURSOR_RE", "BotGames", "Filters", "cursor_of", "parse_cursor"]
