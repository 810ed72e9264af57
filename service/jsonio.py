"""The service's JSON on the hot path: orjson, with the standard library as the fallback.

Every action encodes a view (a few dozen small dicts and lists) and the new state, and
every process decodes states from Redis and from game-channel messages; with the standard
``json`` module that was the largest single cost of an action after the framework
itself. orjson does the same work in a fraction of the instructions
(``bench/http_cost.py``: 3.05 M -> 2.64 M instructions per action).

``dumps`` gives compact JSON with non-ASCII characters as they are (what
``json.dumps(..., separators=(",", ":"), ensure_ascii=False)`` gave, byte for byte, except
that floats are written in their shortest form, e.g. ``0.00001`` for ``1e-05``). Anything
orjson refuses (an integer beyond 64 bits, say) is encoded by ``json`` instead, so no
input can make an answer fail. Request bodies are parsed by ``json`` elsewhere: they are
tiny, and its errors are the ones the API documents.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_OPTIONS = orjson.OPT_NON_STR_KEYS  # int keys become strings, as ``json`` does


def dumps(data: Any) -> str:
    """Compact, deterministic JSON text (a replayed idempotent answer is byte-identical)."""
    try:
        return orjson.dumps(data, option=_OPTIONS).decode()
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def loads(raw: bytes | str) -> Any:
    """Decode JSON this service wrote (states, metas, messages)."""
    return orjson.loads(raw)
