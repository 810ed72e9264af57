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
