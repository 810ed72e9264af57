"""Reference bot strategies and the registry that names them.

``get_strategy("random" | "heuristic" | "search")`` builds a built-in bot;
``get_strategy("package.module:Class")`` loads a bot author's own class, which needs only
``choose(view, legal) -> action`` (see ``Strategy``).
"""

from __future__ import annotations

import importlib
from typing import Any

from service.engine.freshness import is_compiled, warn_if_stale

from . import playout
from .base import RandomStrategy, Strategy, View
from .heuristic import HeuristicStrategy
from .search import SearchStrategy

# The search bot's playout, and the heuristic and inference its sampling runs for every
# card played, are compiled by mypyc with the engine (setup.py); an extension older than
# its sources would silently run old code: say so, as the engine does.
PLAYOUT_COMPILED: bool = is_compiled(playout)
warn_if_stale(
    playout, ("playout", "heuristic", "knowledge", "inference"), "the compiled search playout"
)

BUILTIN: dict[str, type] = {
    "random": RandomStrategy,
    "heuristic": HeuristicStrategy,
    "search": SearchStrategy,
}


def get_strategy(name: str, **options: Any) -> Strategy:
    """A strategy by name: a built-in one, or ``"module:Class"`` (built with ``options``).

    Options the class does not take are an error, so a typo in a bench or CLI flag is
    caught rather than silently ignored.
    """
    if name in BUILTIN:
        return BUILTIN[name](**options)
    if ":" not in name:
        raise ValueError(
            f"unknown strategy {name!r}: use one of {sorted(BUILTIN)} or 'module:Class'"
        )
    module_name, _, attr = name.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot load strategy {name!r}: {exc}") from exc
    strategy = obj(**options) if isinstance(obj, type) else obj
    if not callable(getattr(strategy, "choose", None)):
        raise ValueError(f"strategy {name!r} has no choose(view, legal) method")
    return strategy


__all__ = [
    "BUILTIN",
    "PLAYOUT_COMPILED",
    "HeuristicStrategy",
    "RandomStrategy",
    "SearchStrategy",
    "Strategy",
    "View",
    "get_strategy",
]
