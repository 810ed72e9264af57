"""The bot contract: a seat's view and its legal actions in, one action out.

A strategy sees exactly what the HTTP service shows a seat (``service.engine.seat_view``)
and nothing else, so a bot that runs here runs unchanged against the service.
"""

from __future__ import annotations

import random
from typing import Any, Protocol, runtime_checkable

View = dict[str, Any]


@runtime_checkable
class Strategy(Protocol):
    """Anything with ``choose(view, legal) -> action``; a bot author writes just this.

    ``legal`` is ``view["legal_actions"]`` (names such as ``"stand"``, ``"beg"``,
    ``"give_one"``, ``"run_pack"``, ``"AS"``); the answer must be one of them.
    """

    def choose(self, view: View, legal: list[str]) -> str: ...


class RandomStrategy:
    """Any legal action, uniformly. The floor of the strength ladder.

    It owns its ``random.Random`` so that a seeded bot replays identically whatever else
    in the process draws random numbers.
    """

    def __init__(self, seed: int | None = None) -> None:
        self.rng = random.Random(seed)

    def choose(self, view: View, legal: list[str]) -> str:
        return self.rng.choice(legal)
