"""The engine's one error type for refused actions (R23)."""

from __future__ import annotations


class IllegalAction(Exception):
    """An action the rules refuse: out of turn, not a legal choice, or game over.

    ``rule`` is the id of the rule broken (``"R14"``, explained at ``docs/rules.md#r14``),
    and ``str(error)`` starts with it, e.g. ``"R14: must follow suit (H) or trump (S)"``.
    Messages name only the action that was tried and public facts, never a card the actor
    has not seen. The state the action was applied to is left unchanged.
    """

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(f"{rule}: {message}")
        self.rule = rule
        self.detail = message


class InvalidVariants(ValueError):
    """A variant name or value that the house rules do not offer (docs/rules.md#house-rules)."""
