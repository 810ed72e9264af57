"""The house-rule sets the strategy tests play under: the seed's rules, each R15 variant
alone, and both with a shorter game (R22)."""

from service.engine import Variants

VARIANT_SETS = [
    Variants(),
    Variants(under_trumping=False),
    Variants(void_may_discard=True),
    Variants(under_trumping=False, void_may_discard=True, target=7),
]
