"""The house rules a game may switch on (docs/rules.md#house-rules).

Every field's default is the seed article's rule; the alternatives are the Trinidad club
and tournament variants. A game's record names the variants in force.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from .errors import InvalidVariants

GAME_TIE_NOBODY = "nobody"
GAME_TIE_NON_DEALER = "non_dealer"
PACK_OUT_ONE_BY_ONE = "one_by_one"
PACK_OUT_REDEAL = "redeal"

_CHOICES: dict[str, tuple[Any, ...]] = {
    "game_point_value": (1, 2),
    "game_tie": (GAME_TIE_NOBODY, GAME_TIE_NON_DEALER),
    "pack_runs_out": (PACK_OUT_ONE_BY_ONE, PACK_OUT_REDEAL),
}


@dataclass(frozen=True, slots=True)
class Variants:
    """House rules; all defaults are the seed's rules.

    - ``target`` (R22): points that win; default 14, commonly 7.
    - ``game_point_value`` (R20): 1, or 2 in some tournaments.
    - ``game_tie`` (R20): ``"nobody"`` scores a tied Game, or ``"non_dealer"``'s team does.
    - ``give_one_at_target_minus_one`` (R9): when the beggar's team stands at target − 1,
      may the dealer give one (and so hand them the game)? ``False``: must run the pack.
    - ``under_trumping`` (R15): ``False`` forbids under-trumping unless holding only trumps.
    - ``void_may_discard`` (R14/R15): a player void in the led suit may play any card.
    - ``pack_runs_out`` (R11): ``"one_by_one"`` turns the last cards one at a time;
      ``"redeal"`` redeals as soon as a full run is impossible.
    - ``tobago_kick`` (R6): a kicked Two scores 2 instead of the Six.
    """

    target: int = 14
    game_point_value: int = 1
    game_tie: str = GAME_TIE_NOBODY
    give_one_at_target_minus_one: bool = True
    under_trumping: bool = True
    void_may_discard: bool = False
    pack_runs_out: str = PACK_OUT_ONE_BY_ONE
    tobago_kick: bool = False

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "bool" and not isinstance(value, bool):
                raise InvalidVariants(f"{f.name} must be true or false, not {value!r}")
        if (
            isinstance(self.target, bool)
            or not isinstance(self.target, int)
            or not (1 <= self.target <= 1000)
        ):
            raise InvalidVariants(
                f"target must be a whole number from 1 to 1000, not {self.target!r}"
            )
        for name, choices in _CHOICES.items():
            value = getattr(self, name)
            if isinstance(value, bool) or value not in choices:
                raise InvalidVariants(f"{name} must be one of {list(choices)}, not {value!r}")

    def to_dict(self) -> dict[str, Any]:
        """All variants by name (a fresh dict; computed once per distinct Variants)."""
        cached = _AS_DICT.get(self)
        if cached is None:
            cached = _AS_DICT[self] = asdict(self)
        return dict(cached)

    def changed(self) -> dict[str, Any]:
        """Only the variants that differ from the defaults (kept small in saved state;
        a fresh dict, computed once per distinct Variants: every saved state asks)."""
        cached = _CHANGED.get(self)
        if cached is None:
            cached = _CHANGED[self] = {
                k: v for k, v in asdict(self).items() if v != _DEFAULTS[k]
            }
        return dict(cached)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Variants:
        """Check and build; a game's variants are read back with every decoded state, so
        each distinct valid dict is built once (keyed with the values' types: ``True``
        must not pass as the ``1`` it equals)."""
        if not data:
            return DEFAULT_VARIANTS
        try:
            key: Any = tuple(sorted((k, type(v), v) for k, v in data.items()))
            hash(key)
        except TypeError:  # an unhashable value (a list, say): invalid, checked below
            key = None
        known = _FROM_DICT.get(key) if key is not None else None
        if known is not None:
            return known
        unknown = sorted(set(data) - set(_DEFAULTS))
        if unknown:
            raise InvalidVariants(f"unknown variant(s): {', '.join(unknown)}")
        variants = cls(**data)
        if key is not None:
            if len(_FROM_DICT) >= _MEMO_MAX:
                _FROM_DICT.clear()
            _FROM_DICT[key] = variants
        return variants


_MEMO_MAX = 1024
_AS_DICT: dict[Variants, dict[str, Any]] = {}
_CHANGED: dict[Variants, dict[str, Any]] = {}
_FROM_DICT: dict[Any, Variants] = {}
_DEFAULTS = asdict(Variants())
DEFAULT_VARIANTS = Variants()
