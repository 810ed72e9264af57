"""The engine the tests run is the engine the sources say, compiled where it should be."""

import importlib
import os
import warnings

import service.engine as engine


def test_engine_is_compiled_exactly_when_not_asked_for_pure_python():
    """setup.py compiles the hot modules with mypyc; a type error there would silently fall
    back to pure Python and halve the engine's speed, so CI insists on the compiled one
    unless ALLFOURS_PURE_PYTHON asked for the pure one at install time."""
    wants_pure = bool(os.environ.get("ALLFOURS_PURE_PYTHON"))
    assert engine.COMPILED is not wants_pure, (
        "compiled engine missing: run `pip install -e .` and read its warning"
        if not wants_pure
        else "ALLFOURS_PURE_PYTHON is set but a compiled engine is installed"
    )


def test_compiled_engine_is_not_older_than_its_sources():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importlib.reload(engine)


def test_search_playout_is_compiled_with_the_engine():
    """The search bot's inner loop (clients/strategies/playout.py) is in the same mypyc
    build: compiled exactly when the engine is, and never older than its source."""
    import clients.strategies as strategies

    assert strategies.PLAYOUT_COMPILED is engine.COMPILED
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importlib.reload(strategies)
