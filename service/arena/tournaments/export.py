"""A tournament's export (``GET /tournaments/{id}/export``) as CSV: one table per answer.

The rows are made from the JSON export as dumped by its schema (``TournamentExport``), so
the CSV shows exactly what the JSON shows — embargoed seeds and results included, as
empty cells (a voided game has status ``void`` and no result; a forfeited one names who
forfeited in ``forfeit``, bot ids separated by spaces). A per-team list (``teams``,
``scores``, ...) becomes two columns, ``_0`` for team 0 and ``_1`` for team 1; a game's
ratings become ``mu_before_0`` ... ``ordinal_after_1``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

STANDINGS = ("rank", "bot_id", "bot_name", "score", "matchpoints", "comparisons", "played",
             "won", "lost", "hands_won", "points_for", "points_against", "timeouts", "byes",
             "mu", "sigma", "ordinal", "status", "forfeits")
_PER_TEAM = ("teams", "scores", "hands_won", "timeouts")
_RATING = tuple(f"{k}_{when}" for when in ("before", "after") for k in ("mu", "sigma", "ordinal"))
GAMES = ("round", "slot", "pairing", "deal", "game_id", "status", "seed", "winner", "forfeit",
         *(f"{k}_{team}" for k in _PER_TEAM for team in (0, 1)), "recorded",
         *(f"{k}_{team}" for team in (0, 1) for k in _RATING), "record")
RATINGS = ("round", "bot_id", "mu", "sigma", "ordinal")
BRACKET = ("round", "name", "match", "entrant_0", "entrant_1", "seed_0", "seed_1", "status",
           "wins_0", "wins_1", "points_0", "points_1", "tiebreak_games", "winner",
           "decided_by", "games")
KNOCKOUT_STANDINGS = (*STANDINGS[:1], "place", "eliminated", *STANDINGS[1:])


def _standings(export: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for row in export["standings"]:
        yield {**row, **row["rating"]}


def _games(export: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for game in export["games"]:
        row = dict(game)
        # who forfeited it (tournament_control): bot ids, space-separated
        row["forfeit"] = " ".join(game["forfeit"]) if game.get("forfeit") else None
        for k in _PER_TEAM:
            for team in (0, 1):
                row[f"{k}_{team}"] = game[k][team] if game[k] is not None else None
        for team, r in enumerate(game["rating"] or []):
            for when in ("before", "after"):
                for k in ("mu", "sigma", "ordinal"):
                    row[f"{k}_{when}_{team}"] = r[when][k]
        yield row


def _ratings(export: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for point in export["history"]:
        for r in point["ratings"]:
            yield {"round": point["round"], **r}


def _bracket(export: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A knockout's matches, round by round (none for other formats); ``games``: the game
    ids of the match, space-separated."""
    for rnd in (export.get("bracket") or {}).get("rounds", []):
        for m in rnd["matches"]:
            row = {"round": rnd["round"], "name": rnd["name"], **m,
                   "games": " ".join(g["game_id"] for g in m["games"] if g["game_id"])}
            for k in ("entrants", "seeds", "wins", "points"):
                for side in (0, 1):
                    key = k[:-1] if k != "entrants" else "entrant"
                    row[f"{key}_{side}"] = m[k][side] if m[k] is not None else None
            yield row


TABLES = {"standings": (STANDINGS, _standings), "games": (GAMES, _games),
          "ratings": (RATINGS, _ratings), "bracket": (BRACKET, _bracket)}


def csv_table(export: dict[str, Any], table: str) -> str:
    """``table`` of the dumped export as CSV text (RFC 4180: a header row, CRLF line ends);
    null is an empty cell."""
    columns, rows = TABLES[table]
    if table == "standings" and export.get("bracket"):
        columns = KNOCKOUT_STANDINGS  # with the knockout's place and elimination round
    out = io.StringIO()
    writer = csv.DictWriter(out, columns, extrasaction="ignore")
    writer.writeheader()
    for row in rows(export):
        writer.writerow({k: "" if row.get(k) is None else row[k] for k in columns})
    return out.getvalue()
