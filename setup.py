"""Compiles the rules engine's hot modules with mypyc when a C compiler is at hand.

The engine is plain, type-annotated Python; mypyc turns the modules on the hot path of a
simulation (legal actions, apply, scoring, the state) into a C extension about 2.5 times
faster, which the search bots need, and the seat views every answer of the service is
built from (``bench/http_cost.py``: 2.69 M -> 2.57 M instructions per action). The
extensions are optional: with no compiler, or with ALLFOURS_PURE_PYTHON=1, the same
modules run as pure Python, with the same results.
Everything else about the package lives in pyproject.toml.
"""

import os

from setuptools import setup

COMPILED = [
    "service/engine/actions.py",
    "service/engine/cards.py",
    "service/engine/game.py",
    "service/engine/play.py",
    "service/engine/scoring.py",
    "service/engine/state.py",
    "service/engine/views.py",
    "clients/strategies/playout.py",
    "clients/strategies/heuristic.py",
    "clients/strategies/knowledge.py",
    "clients/strategies/inference.py",
    "clients/strategies/posterior.py",
]


def ext_modules() -> list:
    if os.environ.get("ALLFOURS_PURE_PYTHON"):
        return []
    try:
        from mypyc.build import mypycify

        extensions = mypycify(COMPILED, opt_level="3")
    except BaseException as exc:
        print(f"warning: the engine stays pure Python: mypyc failed: {exc!r}")
        return []
    for ext in extensions:
        ext.optional = True  # a failed C build falls back to the pure-Python modules
    return extensions


setup(ext_modules=ext_modules())
