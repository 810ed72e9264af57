"""Ratings: OpenSkill's Plackett–Luce model, one rating per bot.

Team-aware in the simplest honest way: every tournament game is a match between two
*entrants*. In a 4-player game one entrant holds both seats of its team, so that team is
one player with one rating — rating the two seats separately would count the same bot
twice. A game always has a winner (All Fours has no drawn games), so each update is a
two-team ranking, winner first.

A rating is shown as ``mu`` (the estimate), ``sigma`` (its uncertainty) and the
conservative ``ordinal`` = mu − 3σ, which ranks a bot that has played little below one
that is proven. New bots start at mu = 25, sigma = 25/3 (ordinal 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from openskill.models import PlackettLuce

MODEL = PlackettLuce()

Rating = dict[str, float]  # {"mu": ..., "sigma": ...}


def initial() -> Rating:
    return {"mu": MODEL.mu, "sigma": MODEL.sigma}


def rate(winner: Rating, loser: Rating) -> tuple[Rating, Rating]:
    """Both ratings after ``winner`` beat ``loser`` in one game."""
    w = MODEL.rating(mu=winner["mu"], sigma=winner["sigma"])
    lo = MODEL.rating(mu=loser["mu"], sigma=loser["sigma"])
    [[w2], [l2]] = MODEL.rate([[w], [lo]], ranks=[0, 1])
    return {"mu": w2.mu, "sigma": w2.sigma}, {"mu": l2.mu, "sigma": l2.sigma}


def shown(r: Rating) -> dict[str, Any]:
    """A rating as the API shows it, rounded for reading."""
    return {
        "mu": round(r["mu"], 4),
        "sigma": round(r["sigma"], 4),
        "ordinal": round(r["mu"] - 3 * r["sigma"], 4),
    }


# --- published ratings: the leaderboard's and each ladder's (issue 23) ---------------------
#
# A published entry is the JSON value of one bot in ``{p}leaderboard`` or a ladder's
# ``:ratings`` hash: ``mu``, ``sigma``, ``games``, ``wins`` (plus the ladder's ``form``) and
# what the rules below need: ``owners`` (the distinct owners it has played rated games
# against, at most ``OWNERS_KEPT``), ``established`` (those of them that were established
# when the game was played: ``Standing``) and ``recent`` (opponent owner → unix seconds of
# its rated games against that owner in the last ``SAME_OPPONENT_WINDOW_S``). See
# docs/ratings.md.

DEFAULTS: dict[str, Any] = {
    # rated games, and distinct established opponent owners among them, before a bot is
    # ranked
    "ARENA_PROVISIONAL_GAMES": 10,
    "ARENA_PROVISIONAL_OWNERS": 3,
    # seconds an owner must exist to be established (its games weigh in full and count
    # towards others' ranking); 0: every owner is established at once (the rule before)
    "ARENA_ESTABLISHED_AGE": 7 * 86_400,
    # the weight of a rated game against a bot whose owner is not established yet
    "ARENA_NEW_OWNER_WEIGHT": 0.0,
}
SAME_OPPONENT_WINDOW_S = 86_400.0  # the k-th game against one owner within it weighs 1/k
OWNERS_KEPT = 64  # distinct opponent owners remembered per entry (only "enough?" matters)


@dataclass(frozen=True)
class Standing:
    """How much an owner's games teach the published ratings (docs/ratings.md, "Ratings a
    farm cannot buy"). An owner is *established* once it has existed ``age_s`` seconds
    (the house always is): a game against one of its bots weighs in full and the owner
    counts towards the opponent's ranking. A game against a bot of a newer owner weighs
    ``new_weight`` (0 by default: it moves no published rating) and does not count
    towards leaving the provisional list. New owners are free, so a farm is made of them;
    an owner's age is the one thing a farm cannot make faster."""

    age_s: float = float(DEFAULTS["ARENA_ESTABLISHED_AGE"])
    new_weight: float = float(DEFAULTS["ARENA_NEW_OWNER_WEIGHT"])

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Standing:
        age = float(config.get("ARENA_ESTABLISHED_AGE", DEFAULTS["ARENA_ESTABLISHED_AGE"]))
        weight = float(config.get("ARENA_NEW_OWNER_WEIGHT",
                                  DEFAULTS["ARENA_NEW_OWNER_WEIGHT"]))
        return cls(max(0.0, age), min(1.0, max(0.0, weight)))

    def of(self, created: float | None, at: float) -> float:
        """The weight of an owner made at ``created`` (unix seconds; None: unknown, as
        new) in a game at ``at``: 1 if it was established then, else ``new_weight``.
        Computed from the game's own time, so a replay of old results weighs each as it
        was weighed when played."""
        if self.age_s <= 0 or (created is not None and at - created >= self.age_s):
            return 1.0
        return self.new_weight


def owner_of(bot: Mapping[Any, Any] | None, bot_id: str) -> str:
    """A bot's owner: its hash's ``owner`` field, or the bot itself when it has none (the
    field is written at registration by the owners' code; read here, never written)."""
    raw = (bot or {}).get(b"owner") or (bot or {}).get("owner")
    if isinstance(raw, bytes):
        raw = raw.decode()
    return raw or bot_id


def blank() -> dict[str, Any]:
    return {**initial(), "games": 0, "wins": 0, "owners": [], "established": [], "recent": {}}


def weight(entry: Mapping[str, Any], opponent_owner: str, at: float) -> float:
    """1/k for the k-th rated game against ``opponent_owner`` within the window (this one
    included): a result against the same opponent again tells less about a bot's play,
    and is what a farm of throwing accounts is made of."""
    recent = (entry.get("recent") or {}).get(opponent_owner) or ()
    k = 1 + sum(1 for t in recent if at - float(t) < SAME_OPPONENT_WINDOW_S)
    return 1.0 / k


def scaled(before: Rating, after: Rating, w: float) -> Rating:
    """The update from ``before`` to ``after`` taken with weight ``w`` (0..1): mu moves by w
    of its change and sigma shrinks by w of its change, so a weight-½ game teaches half as
    much as a full one."""
    return {"mu": before["mu"] + w * (after["mu"] - before["mu"]),
            "sigma": before["sigma"] + w * (after["sigma"] - before["sigma"])}


def published(entry: dict[str, Any], new: Rating, won: bool, opponent_owner: str,
              at: float, opponent_established: bool = True) -> dict[str, Any]:
    """``entry`` after one rated game (``new``: its rating after it, weighted already)."""
    out = dict(entry)
    out.update(new)
    out["games"] = int(entry.get("games", 0)) + 1
    out["wins"] = int(entry.get("wins", 0)) + (1 if won else 0)
    owners = list(entry.get("owners") or [])
    if opponent_owner not in owners and len(owners) < OWNERS_KEPT:
        owners.append(opponent_owner)
    out["owners"] = owners
    established = list(entry.get("established") or [])
    if opponent_established and opponent_owner not in established \
            and len(established) < OWNERS_KEPT:
        established.append(opponent_owner)
    out["established"] = established
    recent = {o: [t for t in ts if at - float(t) < SAME_OPPONENT_WINDOW_S]
              for o, ts in (entry.get("recent") or {}).items()}
    recent.setdefault(opponent_owner, []).append(int(at))  # whole seconds: a smaller entry
    out["recent"] = {o: ts for o, ts in recent.items() if ts}
    return out


def rate_published(winner: dict[str, Any], loser: dict[str, Any], owners: tuple[str, str],
                   at: float, winner_moves: bool = True,
                   standing: tuple[float, float] = (1.0, 1.0)
                   ) -> tuple[dict[str, Any], dict[str, Any], tuple[float, float]]:
    """Both published entries after ``winner`` beat ``loser`` (``owners``: the winner's
    owner, the loser's; ``standing``: each owner's weight, ``Standing.of``), each update
    weighted by its own count of recent games against the other's owner and by the other
    owner's standing. ``winner_moves`` False: only the loser's entry changes (a forfeit
    whose winner has not shown it plays: see tournament_control). Returns the weights."""
    w_w = weight(winner, owners[1], at) * standing[1]
    w_l = weight(loser, owners[0], at) * standing[0]
    full_w, full_l = rate(winner, loser)
    new_w = published(winner, scaled(winner, full_w, w_w), True, owners[1], at,
                      standing[1] >= 1.0) if winner_moves else winner
    new_l = published(loser, scaled(loser, full_l, w_l), False, owners[0], at,
                      standing[0] >= 1.0)
    return new_w, new_l, (w_w, w_l)


def provisional(entry: Mapping[str, Any] | None, games: int, owners: int) -> bool:
    """Not yet ranked: fewer than ``games`` rated games, or against fewer than ``owners``
    distinct owners that were established when they were played (an entry written
    before that rule, which the ratings migration rewrites, counts its owners)."""
    if not entry:
        return True
    counted = entry.get("established")
    if counted is None:
        counted = entry.get("owners") or ()
    return int(entry.get("games", 0)) < games or len(counted) < owners
