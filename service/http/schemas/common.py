"""Shared building blocks of the wire schemas: patterns, field types that read JSON strictly, the
request (``Strict``) and response (``Out``) bases, and the schemas every part uses (``Empty``,
``Health``, ``ProblemSchema``)."""

from __future__ import annotations

from typing import Any

from marshmallow import RAISE, Schema, ValidationError, fields, pre_load, validate

from service.arena.core.problems import KINDS

ID_PATTERN = r"^[0-9a-f]{12}$"
CARD_RE = r"^[2-9TJQKA][CDHS]$"
ACTION_RE = r"^(stand|beg|give_one|run_pack|[2-9TJQKA][CDHS])$"
EVENT_ID_RE = r"^\d{1,9}(\.\d{1,5})?$"
SUIT_RE = r"^[CDHS]$"
EVENT_ID_DOC = (
    "an event id: `ply.index` resumes after event `index` of ply `ply` (ply 0 is the new "
    "game: cut, deal, kick; ply n what the n-th action caused); a bare `ply` resumes after "
    "every event of that ply, so `5` means: from the first event of ply 6 on"
)
SEAT_DOC = (
    "which of your seats; omitted, a bot holding two seats (a 4-player game where it "
    "plays both partners) gets the seat whose turn it is if it holds it, else its lower "
    "seat"
)
ACTION_DOC = "stand, beg, give_one, run_pack, or a card to play such as AS, TD, 7H"
TIMEOUT_DOC = (
    "seconds a seat has for each decision; when it runs out the service plays a default "
    "action for it (stand; give_one if legal, else run_pack; the lowest legal card: lowest "
    "rank, ties clubs, diamonds, hearts, spades) and records a timeout"
)
TIME_BANK_DOC = (
    "seconds of time bank per seat (0 to 3600; 0: none): a decision that takes longer than "
    "`move_limit` draws the excess from its seat's bank, and the default action is played "
    "only once the bank is empty too (docs/bots.md, \"The clock\"). Applies only with a "
    "move limit"
)
BANK_LEFT_DOC = (
    "seconds left in this seat's time bank (a spectator's view: the seat in turn's), as "
    "at the start of the decision now due; null: the game has no bank. While the seat is "
    "in turn its bank drains once `move_limit` has passed: `deadline` is the decision's "
    "start + `move_limit` + `bank_left`"
)


class Pattern(validate.Regexp):
    """``validate.Regexp`` that must match the whole string. The contract's patterns are
    anchored with ``^…$`` as JSON Schema reads them, but Python's ``$`` also matches
    before a final newline, so ``"abc\n"`` would pass ``^[a-z]+$``; ``fullmatch`` keeps
    the service exactly as strict as the pattern a client validates against."""

    def __call__(self, value: str) -> str:
        if self.regex.fullmatch(value) is None:
            raise ValidationError(self._format_error(value))
        return value


class JsonNumber(fields.Float):
    """A JSON number (never true or a string)."""

    def _deserialize(self, value: object, attr: object, data: object, **kw: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.make_error("invalid")
        return super()._deserialize(value, attr, data, **kw)


class StrictBool(fields.Boolean):
    """JSON true/false only: 1, "yes" or "true" are mistakes worth reporting."""

    def _deserialize(self, value: object, attr: object, data: object, **kw: object) -> bool:
        if not isinstance(value, bool):
            raise self.make_error("invalid")
        return value


class JsonInt(fields.Integer):
    """A JSON integer: 3 or 3.0 (JSON Schema's "integer"), never true, "3" or 3.5."""

    def _deserialize(self, value: object, attr: object, data: object, **kw: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.make_error("invalid")
        if isinstance(value, float) and not value.is_integer():
            raise self.make_error("invalid")
        return super()._deserialize(int(value), attr, data, **kw)


class Strict(Schema):
    """A request shape: an unknown member is refused (422), and an optional member sent as
    ``null`` is read as not sent. Generated clients send every optional member their model
    has, unset ones as null (openapi-python-generator's ``data.dict()``); a member that may
    really be null (``allow_none``) keeps its null, and a required one is still refused."""

    class Meta:
        unknown = RAISE
        ordered = True

    @pre_load
    def _null_is_absent(self, data: Any, **_: object) -> Any:
        if not isinstance(data, dict) or None not in data.values():
            return data
        by_key = {f.data_key or name: f for name, f in self.load_fields.items()}
        return {k: v for k, v in data.items()
                if not (v is None and k in by_key and not by_key[k].required
                        and not by_key[k].allow_none)}


class Out(Schema):
    """A response shape. Closed (``additionalProperties: false`` in the contract): every
    member an answer carries is named here, and the tests check every answer against it
    (tests/contract.py). ``unknown`` only shapes the contract: responses are dumped, and a
    dump writes only the declared fields."""

    class Meta:
        unknown = RAISE
        ordered = True


def card(**kw: object) -> fields.Str:
    """A card: rank 2-9, T, J, Q, K, A, then suit C, D, H, S (``AS``, ``TD``)."""
    return fields.Str(validate=Pattern(CARD_RE), **kw)  # type: ignore[arg-type]


def one_of(choices: list[object], **kw: object) -> fields.Str:
    return fields.Str(validate=validate.OneOf(choices), **kw)  # type: ignore[arg-type]


def const(value: str) -> fields.Str:
    return fields.Str(required=True, validate=validate.Equal(value))

class Empty(Strict):
    """A body that must be empty or ``{}``."""

class Health(Out):
    status = one_of(["ok"], required=True, metadata={"example": "ok"})


class ProblemSchema(Out):
    type = one_of([f"/problems/{k}" for k in KINDS], required=True,
                  metadata={"example": "/problems/illegal-action"})
    title = fields.Str(required=True)
    status = fields.Int(required=True)
    detail = fields.Str()
    instance = fields.Str(required=True, metadata={
        "description": "the request's path; where the request line could not be read (414, "
        "431, some 400s), an id of this occurrence (`urn:uuid:…`)"})
    errors = fields.Dict(metadata={"description": "validation: messages per field"})
    rule = fields.Str(
        validate=Pattern(r"^R([1-9]|1[0-9]|2[0-3])$"),
        metadata={"description": "illegal-action and not-your-turn: the rule the action "
                  "broke, e.g. R14"})
    rule_doc = fields.Str(metadata={
        "description": "where that rule is explained: docs/rules.md in the project's "
        "repository, at the rule's anchor (its id in lower case)",
        "example": "docs/rules.md#r14"})
    current_version = fields.Int(metadata={
        "description": "version-conflict (409) and precondition-failed (412): the game's "
        "version now"})
