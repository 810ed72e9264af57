"""Post-game analysis: every decision of a game valued from its seat's information (issue 25).

``analyse(players, seed, variants, actions)`` is a pure function of what a game is stored
as; docs/analysis.md describes its result, the thresholds of its marks and its cost.
Layers: it uses the engine and the search bot's evaluator (clients.strategies) only.
"""

from .core import MARKS, QUALITIES, RULES, THRESHOLDS, VERSION, analyse, mark_of

__all__ = ["MARKS", "QUALITIES", "RULES", "THRESHOLDS", "VERSION", "analyse", "mark_of"]
