"""Is a module running as its mypyc build, and is that build older than its sources?

setup.py compiles the engine's hot modules and the search bot's playout with mypyc. An
extension built before its source was last edited would silently run the old code, so
the packages that hold compiled modules check at import and say so loudly.
"""

from __future__ import annotations

import os
import warnings
from types import ModuleType


def is_compiled(module: ModuleType) -> bool:
    return not (module.__file__ or "").endswith(".py")


def warn_if_stale(module: ModuleType, sources: tuple[str, ...], what: str) -> None:
    """Warn when any of ``sources`` (module names beside ``module``) is newer than the
    build ``module`` was loaded from; nothing when ``module`` runs as plain Python."""
    if not is_compiled(module):
        return
    path = module.__file__ or ""
    built = os.path.getmtime(path)
    folder = os.path.dirname(path)
    stale = [n for n in sources if os.path.getmtime(os.path.join(folder, n + ".py")) > built]
    if stale:
        warnings.warn(
            f"{what} is older than {', '.join(stale)}.py: run `pip install -e .` again "
            "(or set ALLFOURS_PURE_PYTHON=1 and reinstall)",
            RuntimeWarning,
            stacklevel=3,
        )
