"""check-bot's report: a line per situation, the cause first.

Why ranked by cause: a bot that fails one thing often fails several situations with it (a
process that exits on a 409 also leaves its games to the clock), and an author reads the
first failure first. So failures are ordered by the kind of cause — a process that exited,
then a refused protocol step, then a bot that plays one game or one seat at a time, then a
slow decision, then the rest — and a failure that another one explains is listed under it,
marked so. The first line names the first cause. Every line says how long its situation
took, and the JSON says the same.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# the kinds of cause, most telling first
CAUSES = {
    "exited": "the bot's process exited",
    "refused": "a protocol step refused or mishandled",
    "ignored": "an invitation left unanswered",
    "one_game": "one game played at a time",
    "one_seat": "one seat played of two",
    "slow": "decisions too slow for the clock",
    "busy": "too many requests",
    "other": "a game not played to its end",
}


@dataclass
class Result:
    """One situation's verdict. ``cause`` (a key of ``CAUSES``) and ``real_play`` (what
    real play does to such a bot) are set for a failure; ``explained_by`` names the failure
    that explains this one, when one does."""

    situation: str
    passed: bool
    what: str
    fix: str = ""
    docs: str = ""
    title: str = ""
    seconds: float = 0.0
    real_play: str = ""
    cause: str = ""
    explained_by: str = ""


def ranked(results: list[Result]) -> list[Result]:
    """Failures first, by cause (each followed by the failures it explains), then passes,
    each group in the order the situations are listed."""
    order = {r.situation: i for i, r in enumerate(results)}
    failed = [r for r in results if not r.passed]
    names = {r.situation for r in failed}
    roots = [r for r in failed if r.explained_by not in names]
    roots.sort(key=lambda r: (list(CAUSES).index(r.cause) if r.cause in CAUSES
                              else len(CAUSES), order[r.situation]))
    out: list[Result] = []
    for root in roots:
        out.append(root)
        out.extend(r for r in failed if r.explained_by == root.situation and r is not root)
    out.extend(r for r in failed if r not in out)
    return out + [r for r in results if r.passed]


def first_cause(results: list[Result]) -> Result | None:
    order = ranked(results)
    return order[0] if order and not order[0].passed else None


def headline(results: list[Result], seconds: float) -> str:
    failed = [r for r in results if not r.passed]
    if not failed:
        return (f"allfours check-bot: {len(results)} situations, {len(results)} passed "
                f"({seconds:.1f} s)")
    root = first_cause(results)
    assert root is not None
    explains = sum(1 for r in failed if r.explained_by == root.situation)
    return (f"allfours check-bot: {len(failed)} of {len(results)} situations failed "
            f"({seconds:.1f} s); the cause: {root.situation} — "
            f"{CAUSES.get(root.cause, root.cause)}"
            + (f" (it explains {explains} other failure{'s' if explains > 1 else ''})"
               if explains else ""))


def report_text(results: list[Result], seconds: float) -> str:
    lines = [headline(results, seconds)]
    width = max((len(r.situation) for r in results), default=10)
    for r in ranked(results):
        lines.append(f"  {'PASS' if r.passed else 'FAIL'}  {r.situation:<{width}} "
                     f"{r.seconds:5.1f} s  {r.what}")
        if r.passed:
            continue
        if r.explained_by:
            lines.append(f"        explained by: {r.explained_by}")
        if r.real_play:
            lines.append(f"        in real play: {r.real_play}")
        if r.fix:
            lines.append(f"        fix: {r.fix}")
        if r.docs:
            lines.append(f"        see: {r.docs}")
    return "\n".join(lines)


def report_json(results: list[Result], seconds: float, log_tail: str,
                extra: dict[str, Any] | None = None) -> dict[str, Any]:
    root = first_cause(results)
    return {"passed": all(r.passed for r in results), "seconds": round(seconds, 2),
            **(extra or {}),
            "cause": None if root is None else {
                "situation": root.situation, "kind": root.cause,
                "what": CAUSES.get(root.cause, root.cause)},
            "situations": [asdict(r) for r in ranked(results)],
            "bot_log_tail": log_tail}


def write_json(path: str, data: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(data, indent=2) + "\n")
