"""House rules on the wire: ``VariantsIn`` (a request names only those it changes) and
``VariantsOut`` (every rule in force)."""

from __future__ import annotations

from marshmallow import fields, validate

from service.engine import Variants
from service.engine.variants import DEFAULT_VARIANTS
from service.http.schemas.common import JsonInt, Out, Strict, StrictBool, one_of

_D = DEFAULT_VARIANTS
VARIANT_DOCS = {
    "target": "R22: points that win the game",
    "game_point_value": "R20: what Game scores",
    "game_tie": "R20: who scores a tied Game: nobody, or the non-dealer's team",
    "give_one_at_target_minus_one": "R9: may the dealer give one when it hands the "
    "beggar's team the game (false: must run the pack)",
    "under_trumping": "R15: may a player under-trump (false: only when holding nothing "
    "but trumps)",
    "void_may_discard": "R14/R15: may a player void in the led suit play any card",
    "pack_runs_out": "R11: when a full run is impossible, turn the last cards one by one, "
    "or redeal at once",
    "tobago_kick": "R6: a kicked Two scores 2 instead of the Six",
}


def _variant(name: str, **kw: object) -> dict[str, object]:
    return {"description": VARIANT_DOCS[name], "default": getattr(_D, name), **kw}


class VariantsIn(Strict):
    """House rules (all optional; each omitted one is its default)."""

    target = JsonInt(validate=validate.Range(1, 1000),
                     metadata=_variant("target", example=7))
    game_point_value = JsonInt(validate=validate.OneOf([1, 2]),
                               metadata=_variant("game_point_value"))
    game_tie = fields.Str(validate=validate.OneOf(["nobody", "non_dealer"]),
                          metadata=_variant("game_tie"))
    give_one_at_target_minus_one = StrictBool(
        metadata=_variant("give_one_at_target_minus_one"))
    under_trumping = StrictBool(metadata=_variant("under_trumping"))
    void_may_discard = StrictBool(metadata=_variant("void_may_discard"))
    pack_runs_out = fields.Str(validate=validate.OneOf(["one_by_one", "redeal"]),
                               metadata=_variant("pack_runs_out"))
    tobago_kick = StrictBool(metadata=_variant("tobago_kick"))

class VariantsOut(Out):
    """Every house rule in force (the defaults included)."""

    target = fields.Int(required=True, metadata=_variant("target"))
    game_point_value = fields.Int(required=True, validate=validate.OneOf([1, 2]),
                                  metadata=_variant("game_point_value"))
    game_tie = one_of(["nobody", "non_dealer"], required=True, metadata=_variant("game_tie"))
    give_one_at_target_minus_one = fields.Bool(
        required=True, metadata=_variant("give_one_at_target_minus_one"))
    under_trumping = fields.Bool(required=True, metadata=_variant("under_trumping"))
    void_may_discard = fields.Bool(required=True, metadata=_variant("void_may_discard"))
    pack_runs_out = one_of(["one_by_one", "redeal"], required=True,
                           metadata=_variant("pack_runs_out"))
    tobago_kick = fields.Bool(required=True, metadata=_variant("tobago_kick"))


class AllVariants(fields.Nested):
    """Every house rule, from a dict that may name only those that differ from the
    defaults (a tournament keeps only those)."""

    def __init__(self, **kw: object) -> None:
        super().__init__(VariantsOut, **kw)  # type: ignore[arg-type]

    def _serialize(self, value: object, attr: object, obj: object, **kw: object) -> object:
        full = Variants.from_dict(value).to_dict() if isinstance(value, dict) else value
        return super()._serialize(full, attr, obj, **kw)
