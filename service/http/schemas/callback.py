"""The shape of a webhook bot's callback registration, as the bot reads it: at ``GET
/bots/me/callback`` (the webhooks) and inside ``GET /bots/me`` (the accounts). Shared
below both domains, so neither imports the other."""

from __future__ import annotations

from marshmallow import fields, validate

from service.arena.webhooks.callbacks import VERIFICATION
from service.arena.webhooks.keys import VERIFY_SCHEDULE_S
from service.http.schemas.common import Out

VERIFICATION_DOC = "; ".join(f"`{k}`: {v}" for k, v in VERIFICATION.items())
SCHEDULE_DOC = ", ".join(f"{x:g}" for x in VERIFY_SCHEDULE_S)


class CallbackVerification(Out):
    status = fields.Str(required=True, validate=validate.OneOf(list(VERIFICATION)),
                        metadata={"description": VERIFICATION_DOC})
    attempts = fields.Int(required=True, metadata={
        "description": f"verification requests sent for this URL so far (at most "
        f"{len(VERIFY_SCHEDULE_S)}, {SCHEDULE_DOC} s apart counted from the registration)"})
    at = fields.Float(required=True, allow_none=True, metadata={
        "description": "unix seconds of the last attempt (null: none yet)"})
    detail = fields.Str(required=True, allow_none=True, metadata={
        "description": "why the last attempt failed (null: it passed, or none yet)"})


class Callback(Out):
    url = fields.Str(required=True)
    created = fields.Int(required=True, metadata={"description": "unix seconds"})
    verified = fields.Bool(required=True, metadata={
        "description": "whether the URL has echoed a verification challenge: until it has, "
        "it is sent nothing else (your turns fall to the move deadline's default action)"})
    verification = fields.Nested(CallbackVerification, required=True)
