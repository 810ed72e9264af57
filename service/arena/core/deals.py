"""Fair deals (issue 23): every game says whether its creator chose its seed, and a random
seed is committed to before the first card is seen.

**Chosen seeds.** A seed given in ``POST /games`` fixes the cut and every deal, so whoever
chose it can know every hand in advance. Such a game is marked ``seed_chosen: true`` in its
summary and in every view from its creation on (a bot deciding whether to join can see
it), and it is never rated (``ladder_plan``/``rating_plan`` refuse it).

**The commitment.** For a random seed the game publishes, at its creation,
``seed_commitment = sha256(salt ‖ str(seed))`` in hex, where ``salt`` is 16 secret random
bytes (``seed_salt``, shown in hex) and ``str(seed)`` the seed's decimal digits in ASCII.
Once the game is over the view and the record show ``seed`` and ``seed_salt``; anyone can
recompute the hash and see that the deal was fixed before play (docs/ratings.md has the
snippet). The salt matters: a bare ``sha256(seed)`` can be searched by hashing candidate
seeds — a small seed falls at once, and even a random 63-bit one is within reach of
enough hardware over a long tournament. 128 secret random bits in front of it cannot be
searched, so the commitment hides the seed until it is revealed. Like the seed, the salt
is never shown before the game is over (nor while its duplicate deal is embargoed).

**Keys.** None: the three fields live in the game's meta (``seed_chosen``, ``seed_salt``,
``seed_commitment``), written with the game.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

SALT_BYTES = 16


def commitment(seed: int, salt_hex: str) -> str:
    """``sha256(salt ‖ decimal seed)``, hex: what ``seal`` publishes and a player checks."""
    return hashlib.sha256(bytes.fromhex(salt_hex) + str(int(seed)).encode()).hexdigest()


def seal(meta: dict[str, Any], chosen: bool) -> dict[str, Any]:
    """Mark a new game's meta (its ``seed`` set): chosen by its creator, or random and
    committed to with a fresh secret salt."""
    meta["seed_chosen"] = bool(chosen)
    if not chosen:
        salt = secrets.token_hex(SALT_BYTES)
        meta["seed_salt"] = salt
        meta["seed_commitment"] = commitment(meta["seed"], salt)
    return meta


__all__ = ["commitment", "seal"]
