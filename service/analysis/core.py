"""The analysis of a finished game: every decision valued from its seat's information.

The game is replayed from what it is stored as (players, seed, variants, actions; see
``service.engine.record.replay``). At each ply where the seat in turn had two or more
legal actions — stand or beg (R8), give one or run the pack (R9), a card to lead (R13) or
to play to a trick (R14, R15) — the seat's view at that ply (``seat_view``: its hand, the
kicks, every card played, the beg decisions; the voids the plays reveal are inferred
from it by ``knowledge.read_view``) goes to the evaluator, ``SearchStrategy.values``, which
deals the cards the seat cannot see consistently with the view and plays every legal
action out on the same deals. The chosen action's loss is the best's expected hand
margin minus its own; the mark follows ``THRESHOLDS``.

The only hidden information read is for the *hindsight* column, labelled as such:
the same actions valued on the true deal (every hand and the stock as they really were).

Pure and reproducible: no I/O, no clock; the evaluator draws a fixed number of samples
from a generator seeded by ``sampling_seed`` and the ply alone (never the game's seed,
which would tie the values to the hidden cards).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import Any

from clients.strategies.outcome import outcome
from clients.strategies.search import SearchStrategy
from service.engine import (
    GIVE_ONE_OR_RUN,
    PLAY,
    STAND_OR_BEG,
    State,
    Variants,
    action_name,
    apply,
    legal_actions,
    new_game,
    parse_action,
    seat_view,
)

VERSION = 1

# name -> (sampled deals a decision, rollouts a hindsight action)
QUALITIES: dict[str, tuple[int, int]] = {
    "fast": (50, 4),
    "default": (600, 8),
    "deep": (2000, 16),
}

# Marks by the loss in expected hand margin (points); see docs/analysis.md for how they
# were chosen from measured losses of the random, heuristic and search bots.
THRESHOLDS: dict[str, Any] = {
    "inaccuracy": 0.3,
    "mistake": 0.7,
    "blunder": 1.5,
    "unit": "expected points of the hand (team margin)",
}
MARKS = ("inaccuracy", "mistake", "blunder")

HINDSIGHT_EPSILON = 0.1  # random share of the open-handed rollouts, so one line does not decide

# The rules a decision exists by, cited beside it.
RULES = {
    STAND_OR_BEG: ["R8"],
    GIVE_ONE_OR_RUN: ["R9", "R10", "R11"],
    "lead": ["R12", "R13"],
    "follow": ["R14", "R15", "R16"],
}

Progress = Callable[[int, int], None]


def _r(x: float) -> float:
    return round(x, 3)


def _seed(sampling_seed: int, ply: int) -> int:
    """The evaluator's seed for one decision: the analysis's seed and the ply, nothing
    that depends on the cards."""
    return sampling_seed * 1_000_003 + ply


def mark_of(loss: float) -> str | None:
    """The mark a loss earns (``THRESHOLDS``), or None below an inaccuracy."""
    mark = None
    for name in MARKS:
        if loss >= THRESHOLDS[name]:
            mark = name
    return mark


def decisions_of(
    players: int, seed: int, variants: Variants | dict | None, actions: Iterable[Any]
) -> list[tuple[State, int]]:
    """The game replayed: (state before, action) for every ply with a choice (two or more
    legal actions); forced plies are no decisions."""
    if isinstance(variants, dict):
        variants = Variants.from_dict(variants)
    state, _ = new_game(players, seed, variants)
    out = []
    for raw in actions:
        a = parse_action(raw) if isinstance(raw, str) else raw
        if len(legal_actions(state)) >= 2:
            out.append((state, a))
        state, _ = apply(state, a)
    return out


def value_decision(
    state: State, samples: int, sampling_seed: int
) -> dict[str, tuple[float, float, float]]:
    """Every legal action of the seat in turn: (points, margin, win) for its team, from
    the seat's view alone — ``state`` is read only through ``seat_view``."""
    seat = state.turn
    view = seat_view(state, seat)
    legal = view["legal_actions"]
    evaluator = SearchStrategy(seed=_seed(sampling_seed, view["ply"]), simulations=samples)
    values = evaluator.values(view, legal)
    return {a: (v.points, v.margin, v.win) for a, v in values.items()}


def hindsight(
    state: State, rollouts: int, sampling_seed: int
) -> dict[str, tuple[float, float, float]]:
    """Every legal action valued on the true deal (all hands and the stock known): the
    open-handed rollout policy plays the hand out ``rollouts`` times from each."""
    team = state.turn & 1
    out = {}
    for a in legal_actions(state):
        rng = random.Random(_seed(sampling_seed, state.ply) ^ 0x5EED)
        after, _ = apply(state, a, None, False)
        sums = [0.0, 0.0, 0.0]
        for i in range(rollouts):
            p, m, w = outcome(after, team, rng, HINDSIGHT_EPSILON if i else 0.0)
            sums[0] += p
            sums[1] += m
            sums[2] += w
        out[action_name(a)] = (sums[0] / rollouts, sums[1] / rollouts, sums[2] / rollouts)
    return out


def _kind(state: State) -> str:
    if state.phase != PLAY:
        return state.phase
    return "follow" if state.trick else "lead"


def _rounded(values: dict[str, tuple[float, float, float]]) -> dict[str, tuple[float, ...]]:
    return {a: (_r(p), _r(m), _r(w)) for a, (p, m, w) in values.items()}


def ranked(values: dict[str, tuple[float, ...]]) -> list[str]:
    """Actions best first: by margin, then chance of winning, then name (stable)."""
    return sorted(values, key=lambda a: (-values[a][1], -values[a][2], a))


def analyse(
    players: int,
    seed: int,
    variants: Variants | dict | None,
    actions: Iterable[Any],
    *,
    quality: str = "default",
    sampling_seed: int = 0,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The analysis of a game (finished or not) as a JSON-able dict (docs/analysis.md)."""
    if quality not in QUALITIES:
        raise ValueError(f"unknown quality {quality!r}: use one of {sorted(QUALITIES)}")
    samples, rollouts = QUALITIES[quality]
    plies = decisions_of(players, seed, variants, actions)
    total = len(plies)
    if progress:
        progress(0, total)
    decisions = []
    for done, (state, a) in enumerate(plies, 1):
        decisions.append(_decision(state, a, samples, rollouts, sampling_seed))
        if progress:
            progress(done, total)
    return {
        "version": VERSION,
        "quality": {
            "name": quality,
            "samples": samples,
            "hindsight_rollouts": rollouts,
            "sampling_seed": sampling_seed,
        },
        "thresholds": dict(THRESHOLDS),
        "decisions": decisions,
        "seats": _seats(players, decisions),
        "teams": _teams(decisions),
    }


def _decision(
    state: State, action: int, samples: int, rollouts: int, sampling_seed: int
) -> dict[str, Any]:
    # rounded first, so that the order, the loss and the mark agree with what is shown
    values = _rounded(value_decision(state, samples, sampling_seed))
    chosen = action_name(action)
    order = ranked(values)
    best = order[0]
    loss = max(0.0, values[best][1] - values[chosen][1])
    top_win = max(v[2] for v in values.values())
    seen = _rounded(hindsight(state, rollouts, sampling_seed))
    seen_order = ranked(seen)
    kind = _kind(state)
    return {
        "ply": state.ply,
        "hand": state.hand_no + 1,
        "trick": len(state.tricks) + 1 if state.phase == PLAY else None,
        "seat": state.turn,
        "team": state.turn & 1,
        "decision": state.phase,
        "kind": kind,
        "rules": RULES[kind],
        "chosen": chosen,
        "alternatives": [
            {
                "action": x,
                "points": _r(values[x][0]),
                "margin": _r(values[x][1]),
                "win": _r(values[x][2]),
            }
            for x in order
        ],
        "best": best,
        "loss": _r(loss),
        "win_loss": _r(max(0.0, top_win - values[chosen][2])),
        "mark": mark_of(_r(loss)),
        "expected": {"margin": _r(values[chosen][1]), "win": _r(values[chosen][2])},
        "hindsight": {
            "best": seen_order[0],
            "loss": _r(max(0.0, seen[seen_order[0]][1] - seen[chosen][1])),
            "alternatives": [
                {
                    "action": x,
                    "points": _r(seen[x][0]),
                    "margin": _r(seen[x][1]),
                    "win": _r(seen[x][2]),
                }
                for x in seen_order
            ],
        },
    }


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    out: dict[str, Any] = {
        "decisions": n,
        "average_loss": _r(sum(d["loss"] for d in rows) / n) if n else 0.0,
    }
    for name in MARKS:
        out[name] = sum(1 for d in rows if d["mark"] == name)
    return out


def _seats(players: int, decisions: list[dict[str, Any]]) -> dict[str, Any]:
    seats: dict[str, Any] = {}
    for seat in range(players):
        mine = [d for d in decisions if d["seat"] == seat]
        summary = _summary(mine)
        by_kind: dict[str, Any] = {}
        for key in ("decision", "kind"):
            for name in sorted({d[key] for d in mine}):
                by_kind.setdefault(name, _summary([d for d in mine if d[key] == name]))
        summary["by_kind"] = by_kind
        seats[str(seat)] = summary
    return seats


def _teams(decisions: list[dict[str, Any]]) -> dict[str, Any]:
    teams: dict[str, list[dict[str, Any]]] = {"0": [], "1": []}
    for d in decisions:
        teams[str(d["team"])].append(
            {"ply": d["ply"], "hand": d["hand"], "seat": d["seat"], **d["expected"]}
        )
    return teams
