"""Shapes of the webhook API (``service.arena.callbacks``): registering a callback URL,
the delivery records a bot reads, and the requests the service sends to the bot (the
contract's ``webhooks``). Kept apart from ``schemas`` so the feature stays in its own
modules; the same conventions hold (requests ``Strict``, responses closed ``Out``)."""

from __future__ import annotations

from marshmallow import fields, validate

from service.arena.callback_calls import MAX_URL
from service.arena.callback_keys import VERIFY_SCHEDULE_S
from service.arena.callbacks import OUTCOMES, VERIFICATION
from service.http.schemas.bots import Bot, Invitation
from service.http.schemas.common import ID_PATTERN, Out, Pattern, Strict
from service.http.schemas.games import ActionIn, View

EVENTS = ["turn", "start", "end", "invitation"]  # what a CallbackRequest is
DELIVERY_EVENTS = [*EVENTS, "verify"]  # what a delivery record may be of
# the shape only (scheme, a host name or address, a port, a path and query); what may be
# called is decided on the address (``service.arena.callback_calls.check_url``)
URL_RE = r"^https?://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?([/?][^\s#]*)?$"
EVENT_DOC = ("turn: it is your move, answer with an action; start: a game you sit in has "
             "begun; end: it is over (the view shows every card); invitation: another "
             "owner's bot invites you to a game (`invitation`; accept or decline it with "
             "`POST /invitations/{id}/accept|decline`). Answers to start, end and "
             "invitation are ignored; verify: the verification of your URL, answer 200 "
             "echoing its challenge")
OUTCOME_DOC = "; ".join(f"`{k}`: {v}" for k, v in OUTCOMES.items())


class CallbackIn(Strict):
    url = fields.Str(
        required=True,
        validate=[validate.Length(1, MAX_URL), Pattern(URL_RE)],
        metadata={"description": "an absolute http(s) URL the service POSTs your turns to "
                  "(no user:password, no #fragment). A private, loopback or link-local "
                  "address is refused unless the operator allows its network "
                  "(`ARENA_CALLBACK_NETWORKS`); a host name is checked each time it is "
                  "resolved, at connection time",
                  "example": "https://bots.example.org/allfours"},
    )


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


class CallbackCreated(Callback):
    secret = fields.Str(
        required=True,
        metadata={"description": "the signing secret for `Arena-Signature`; shown only "
                  "here (registering again replaces the URL and the secret)"},
    )


class DeliveryRecord(Out):
    event = fields.Str(required=True, validate=validate.OneOf(DELIVERY_EVENTS),
                       metadata={"description": EVENT_DOC})
    game_id = fields.Str(required=True, allow_none=True, validate=Pattern(ID_PATTERN),
                         metadata={"description": "null for `verify`"})
    version = fields.Int(required=True, allow_none=True, metadata={
        "description": "the game's version the request showed (a turn's action is applied "
        "only to it); null for `verify`"})
    seat = fields.Int(required=True, allow_none=True, metadata={"description": "null for "
                      "`verify`"})
    at = fields.Float(required=True, metadata={"description": "unix seconds, when the "
                      "delivery began (the service's clock)"})
    outcome = fields.Str(required=True, validate=validate.OneOf(list(OUTCOMES)),
                         metadata={"description": OUTCOME_DOC})
    status = fields.Int(required=True, allow_none=True,
                        metadata={"description": "your server's HTTP status (null: no answer)"})
    action = fields.Str(required=True, allow_none=True,
                        metadata={"description": "the action your answer named, if any"})
    problem = fields.Str(required=True, allow_none=True,
                         metadata={"description": "with `refused`: the problem type a pulled "
                                   "action would have got, e.g. `/problems/illegal-action`"})
    detail = fields.Str(required=True, allow_none=True,
                        metadata={"description": "why, in words (null when applied)"})
    attempts = fields.Int(required=True, metadata={"description": "connections tried (a "
                          "retry only where no answer came); 0: no call was made"})
    latency_ms = fields.Float(required=True, allow_none=True,
                              metadata={"description": "from the start of the delivery to "
                                        "its outcome (the action applied, for `applied`)"})


class DeliveryList(Out):
    deliveries = fields.List(fields.Nested(DeliveryRecord), required=True,
                             metadata={"description": "newest first; the latest 200 are kept"})


class DeliveriesQuery(Strict):
    limit = fields.Int(validate=validate.Range(1, 200), load_default=50)
    game_id = fields.Str(validate=Pattern(ID_PATTERN),
                         metadata={"description": "only the deliveries of this game"})


class CallbackRequest(Out):
    """What the service POSTs to your callback URL."""

    event = fields.Str(required=True, validate=validate.OneOf(EVENTS),
                       metadata={"description": EVENT_DOC})
    delivery = fields.Str(required=True, metadata={
        "description": "this request's id, new for every request and every retry (also in "
        "the `Arena-Delivery` header): refuse one you have seen, a replay"})
    bot_id = fields.Str(required=True, validate=Pattern(ID_PATTERN))
    game_id = fields.Str(required=True, validate=Pattern(ID_PATTERN))
    version = fields.Int(required=True, metadata={
        "description": "the game's version; your action applies only to it"})
    seat = fields.Int(required=True, metadata={"description": "the seat in turn (yours)"})
    deadline = fields.Float(required=True, allow_none=True, metadata={
        "description": "unix seconds by which the action must be applied (null: no move "
        "limit); answer before it, or the default action is played for you"})
    view = fields.Nested(View, required=True, metadata={
        "description": "your seat's view, exactly as `GET /games/{game_id}` answers it"})
    last_failure = fields.Nested(DeliveryRecord, required=True, allow_none=True, metadata={
        "description": "with `turn`: your last turn in this game that was not applied, "
        "and why (null: none since your last applied action)"})
    invitation = fields.Nested(Invitation, allow_none=True, metadata={
        "description": "with `invitation`: the invitation (then `seat` is the first seat "
        "held for you and `view` the spectator's view of the waiting game)"})


class VerifyRequest(Out):
    """What the service POSTs to a callback URL before anything else."""

    event = fields.Str(required=True, validate=validate.OneOf(["verify"]))
    delivery = fields.Str(required=True, metadata={
        "description": "this request's id (also in `Arena-Delivery`)"})
    bot_id = fields.Str(required=True, validate=Pattern(ID_PATTERN))
    challenge = fields.Str(required=True, metadata={
        "description": "a random string: answer 200 with it echoed"})


class VerifyAnswer(Out):
    """Your answer to ``verify`` (the bare challenge as a ``text/plain`` body passes too)."""

    challenge = fields.Str(required=True, metadata={"description": "the request's challenge"})


class BotMe(Bot):
    callback = fields.Nested(Callback, required=True, allow_none=True, metadata={
        "description": "your callback URL and its verification (null: none, you play by "
        "pull); as `GET /bots/me/callback`"})


class CallbackAnswer(ActionIn):
    """Your answer to a ``turn``: an action as ``POST /games/{game_id}/actions`` takes it
    (closed, like every object of the contract: another member makes it a bad answer).
    ``version`` defaults to the request's, ``seat`` to the seat in turn."""
