"""Shapes of consent, owners and suspension (``service.arena.accounts.invitations``,
``service.arena.accounts.owners``): a bot's invitation policy, the admin's owner invitation codes
and suspensions. Kept apart from ``schemas`` as the feature's own module; the same
conventions hold (requests ``Strict``, responses closed ``Out``)."""

from __future__ import annotations

from marshmallow import fields, validate

from service.http.schemas.common import ID_PATTERN, Out, Pattern, Strict, one_of

OWNER_ID_PATTERN = r"^(o[0-9a-f]{12}|[0-9a-f]{12}|house)$"
POLICY_DOC = ("anyone (default): invitations are delivered and you decide; nobody: a game "
              "naming your bot is refused when it is created (403 `invitation-refused`); "
              "list: only the bots and owners in `from` may invite you (others refused)")


class PolicyIn(Strict):
    accept = one_of(["anyone", "nobody", "list"], required=True,
                    metadata={"description": POLICY_DOC})
    from_ = fields.List(
        fields.Str(validate=Pattern(OWNER_ID_PATTERN)), data_key="from",
        validate=validate.Length(0, 200),
        metadata={"description": "with `list`: bot ids and owner ids whose invitations "
                  "are delivered (at most 200)"})


class Policy(Out):
    accept = one_of(["anyone", "nobody", "list"], required=True,
                    metadata={"description": POLICY_DOC})
    from_ = fields.List(fields.Str(), required=True, data_key="from")


class SuspensionIn(Strict):
    reason = fields.Str(required=True, validate=validate.Length(1, 500),
                        metadata={"description": "why: logged and shown to the bot",
                                  "example": "threw games to a bot of the same author"})


class Owner(Out):
    id = fields.Str(required=True)
    created = fields.Int(required=True, metadata={"description": "unix seconds"})
    bots = fields.List(fields.Str(), required=True)
    suspended = fields.Str(required=True, allow_none=True,
                           metadata={"description": "the reason while suspended"})


class SuspendedBot(Out):
    id = fields.Str(required=True, validate=Pattern(ID_PATTERN))
    name = fields.Str(required=True)
    created = fields.Int(required=True)
    owner = fields.Str(required=True)
    suspended = fields.Str(required=True, allow_none=True)


class OwnerInvitation(Out):
    code = fields.Str(required=True, metadata={
        "description": "give it to the new author: `POST /bots {\"name\": ..., "
        "\"invitation\": code}` makes its owner (single use)"})
    expires = fields.Int(required=True, metadata={"description": "unix seconds"})


class SuspensionEntry(Out):
    at = fields.Float(required=True)
    act = one_of(["suspended", "lifted"], required=True)
    reason = fields.Str(required=True, allow_none=True)
    bot = fields.Str()
    owner = fields.Str()
    bots = fields.List(fields.Str(), required=True)


class SuspensionLog(Out):
    items = fields.List(fields.Nested(SuspensionEntry), required=True,
                        metadata={"description": "newest first (at most 1,000 kept)"})
    next_cursor = fields.Int(required=True, allow_none=True, metadata={
        "description": "pass as `cursor` for the next page; null: the list is through"})
    entries = fields.List(fields.Nested(SuspensionEntry), required=True,
                          metadata={
        "deprecated": True, "description": "the same list as `items`, under its old "
        "name: read `items`; this key goes in the next API version"})
