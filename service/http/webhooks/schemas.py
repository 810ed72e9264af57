"""Shapes of the webhook API (``service.arena.webhooks.callbacks``): registering a callback URL,
the delivery records a bot reads, and the requests the service sends to the bot (the
contract's ``webhooks``). Kept apart from ``schemas`` so the feature stays in its own
modules; the same conventions hold (requests ``Strict``, responses closed ``Out``)."""

from __future__ import annotations

from marshmallow import fields, validate

from service.arena.webhooks.callbacks import OUTCOMES
from service.arena.webhooks.calls import MAX_URL
from service.http.accounts.schemas import Invitation, TournamentNotice
from service.http.games.schemas import ActionIn, View
from service.http.schemas.callback import Callback, CallbackVerification  # noqa: F401
from service.http.schemas.common import ID_PATTERN, Out, Pattern, Strict

EVENTS = ["turn", "start", "end", "invitation"]  # what a CallbackRequest is
# what a TournamentNoticeRequest is: a tournament the bot entered started, ended, stopped
TOURNAMENT_EVENTS = ["tournament_starting", "tournament_finished", "tournament_cancelled"]
DELIVERY_EVENTS = [*EVENTS, *TOURNAMENT_EVENTS, "verify"]  # what a delivery record may be of
# the shape only (scheme, a host name or address, a port, a path and query); what may be
# called is decided on the address (``service.arena.webhooks.calls.check_url``)
URL_RE = r"^https?://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?([/?][^\s#]*)?$"
EVENT_DOC = ("turn: it is your move, answer with an action; start: a game you sit in has "
             "begun; end: it is over (the view shows every card); invitation: another "
             "owner's bot invites you to a game (`invitation`; accept or decline it with "
             "`POST /invitations/{id}/accept|decline`). Answers to start, end and "
             "invitation are ignored; tournament_starting, tournament_finished, "
             "tournament_cancelled: a tournament you entered started, finished or was "
             "cancelled (`tournament`; the answer is ignored); verify: the verification of "
             "your URL, answer 200 echoing its challenge")
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
                         metadata={"description": "null for `verify` and a tournament's"})
    version = fields.Int(required=True, allow_none=True, metadata={
        "description": "the game's version the request showed (a turn's action is applied "
        "only to it); null for `verify` and a tournament's"})
    seat = fields.Int(required=True, allow_none=True, metadata={"description": "null for "
                      "`verify` and a tournament's"})
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
    items = fields.List(fields.Nested(DeliveryRecord), required=True,
                        metadata={"description": "newest first; the latest 200 are kept"})
    next_cursor = fields.Int(required=True, allow_none=True, metadata={
        "description": "pass as `cursor` for the next page; null: the list is through"})
    deliveries = fields.List(fields.Nested(DeliveryRecord), required=True,
                             metadata={
        "deprecated": True, "description": "the same list as `items`, under its old "
        "name: read `items`; this key goes in the next API version"})


class DeliveriesQuery(Strict):
    limit = fields.Int(validate=validate.Range(1, 200), load_default=50)
    cursor = fields.Int(validate=validate.Range(0, 2**31), metadata={
        "description": "`next_cursor` of the previous page (opaque)"})
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


class TournamentNoticeRequest(Out):
    """What the service POSTs when a tournament your bot entered starts, finishes or is
    cancelled."""

    event = fields.Str(required=True, validate=validate.OneOf(TOURNAMENT_EVENTS))
    delivery = fields.Str(required=True, metadata={
        "description": "this request's id (also in `Arena-Delivery`)"})
    bot_id = fields.Str(required=True, validate=Pattern(ID_PATTERN))
    tournament = fields.Nested(TournamentNotice, required=True, metadata={
        "description": "the notice, as `GET /bots/me/turns` lists it under `tournaments`"})


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


class CallbackAnswer(ActionIn):
    """Your answer to a ``turn``: an action as ``POST /games/{game_id}/actions`` takes it
    (closed, like every object of the contract: another member makes it a bad answer).
    ``version`` defaults to the request's, ``seat`` to the seat in turn."""
