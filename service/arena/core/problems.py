"""The arena's refusals, one kind per stable ``type``: ``Problem`` and the list of kinds.

The game layer raises ``Problem`` (or lets an ``IllegalAction`` escape, which
``from_illegal`` names); ``service.http.problems`` maps both to RFC 9457 problem details,
so every error leaves the service as ``application/problem+json`` with the same shape. The
kinds live here, below the HTTP layer, so that the arena can refuse without knowing the
wire; bot authors switch on ``type``, never on the human text, which is why the kinds below
are a stable list and nothing else invents one.
"""

from __future__ import annotations

from typing import Any

from service.engine import IllegalAction

# type suffix -> (status, title). The one list of problem kinds; service.http.openapi documents it,
# and ``problem_texts.TEXTS`` says for each what happened and what a bot should do.
KINDS: dict[str, tuple[int, str]] = {
    "validation": (422, "The request is not valid"),
    "malformed-json": (400, "The body is not valid JSON"),
    "bad-request": (400, "Bad request"),
    "not-found": (404, "Not found"),
    "method-not-allowed": (405, "Method not allowed"),
    "not-acceptable": (406, "Not acceptable"),
    "unsupported-media-type": (415, "Unsupported media type"),
    "unauthorized": (401, "A valid bearer token is required"),
    "forbidden-seat": (403, "Your bot does not hold that seat"),
    "forbidden": (403, "Only the admin token may do that"),
    "embargoed": (403, "This deal is still being played at another table"),
    "forbidden-entrant": (403, "Only the entrant itself may do that"),
    "not-a-player": (403, "Only a bot that played this game may ask for that"),
    "tournament-over": (409, "The tournament is over"),
    "suspended": (403, "The operator has suspended this bot or its owner"),
    "owner-admission": (403, "This service admits no new owner this way"),
    "invitation-refused": (403, "That bot accepts no invitations from you"),
    "seed-reused": (409, "That seed was used by an earlier tournament"),
    "not-organizer": (403, "Only the tournament's organizer may do that"),
    "tournament-quota": (429, "Your owner has organized as many tournaments as it may"),
    "entry-closed": (409, "The tournament takes no entries now"),
    "entry-code": (403, "A private tournament needs its join code"),
    "entry-not-validated": (403, "The tournament admits validated bots only"),
    "entry-rated-games": (403, "The tournament needs more rated games than your bot has"),
    "entry-rating-band": (403, "Your bot's rating is outside the tournament's band"),
    "entry-one-per-owner": (409, "Another bot of your owner has entered this tournament"),
    "entry-quota": (429, "Your bot has entered as many open tournaments as it may"),
    "tournament-full": (409, "The tournament has as many entrants as it takes"),
    "not-started": (409, "The tournament has not started"),
    "too-few-entrants": (409, "The tournament has fewer entrants than its minimum"),
    "seat-taken": (409, "That seat is already taken"),
    "game-not-started": (409, "The game is waiting for players"),
    "game-not-over": (409, "The game is not over yet"),
    "not-your-turn": (409, "It is not your turn"),
    "illegal-action": (409, "The rules do not allow that action"),
    "version-conflict": (409, "The game has changed since that version"),
    "precondition-failed": (412, "If-Match does not match the game's version"),
    "idempotency-key-reused": (422, "That Idempotency-Key was used with a different request"),
    "payload-too-large": (413, "The request body is too large"),
    "malformed-body": (400, "The request body cannot be read"),
    "request-timeout": (408, "The request did not arrive in time"),
    "uri-too-long": (414, "The request line is too long"),
    "header-fields-too-large": (431, "The request's header fields are too large"),
    "rate-limited": (429, "Too many requests"),
    "too-many-connections": (429, "Too many open streams, long-polls or connections"),
    "service-unavailable": (503, "The game store is unavailable; retry shortly"),
    "over-capacity": (503, "The service is at its connection limit; retry shortly"),
    "shutting-down": (503, "This server is shutting down; retry shortly"),
    "unknown-api-version": (400, "That API version is not served here"),
    "internal": (500, "Internal error"),
}


class Problem(Exception):
    """An error answer: ``kind`` is a key of ``KINDS``; extra members go into the body."""

    def __init__(
        self,
        kind: str,
        detail: str | None = None,
        *,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown problem kind {kind!r}")
        super().__init__(detail or KINDS[kind][1])
        self.kind = kind
        self.status = KINDS[kind][0]
        self.detail = detail
        self.headers = headers or {}
        self.extra = extra


def rule_doc(rule: str) -> str:
    """Where a rule is explained: its anchor in the repository's ``docs/rules.md``."""
    return f"docs/rules.md#{rule.lower()}"


def from_illegal(exc: IllegalAction) -> Problem:
    """R23 (someone else's turn) is its own kind; every other refusal names its rule, and
    both say where the rule is explained, so a bot author can look it up."""
    kind = "not-your-turn" if exc.rule == "R23" else "illegal-action"
    return Problem(kind, str(exc), rule=exc.rule, rule_doc=rule_doc(exc.rule))
