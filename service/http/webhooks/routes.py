"""HTTP routes of webhook bots: register, read and remove a callback URL, and read the
delivery records (``service.arena.webhooks.callbacks`` does the work)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response

from service.arena.webhooks.keys import DELIVERIES_KEPT
from service.http.api import callbacks, operation, respond, sch
from service.http.lists import LINK, page_of, respond_page
from service.http.schemas.common import Empty
from service.http.webhooks import schemas as cs

bp = Blueprint("webhooks", __name__)

_SIGNING = (
    "Every request the service sends is signed: `Arena-Timestamp` (unix seconds) and "
    "`Arena-Signature: sha256=<hex>`, the HMAC-SHA256 keyed with the secret's UTF-8 bytes "
    "of `<timestamp>.` followed by the exact body. Check it, refuse a timestamp more than "
    "a minute from your clock and a `delivery` id you have seen (a replay). "
    "`clients/examples/webhook_bot.py` does all three."
)


@bp.put("/bots/me/callback")
@operation(
    summary="Register (or replace) your callback URL: the service calls you on your turns",
    description="First the URL is verified: about a second after this answer (time to "
    "keep the secret it holds) the service POSTs a signed `verify` request with a random "
    "`challenge` (see `webhooks`); answer `200` with `{\"challenge\": \"<it>\"}` (or the "
    "bare challenge as the body). Until the URL has passed (`verified`, here and in `GET "
    "/bots/me/callback`) it is sent nothing else: your turns fall to the move deadline's "
    "default action and `start`/`end` wait. A failed verification is tried again after "
    "4, 15 and 60 s, then `failed` until you ask again (`POST "
    "/bots/me/callback/verify`). Registering again (another URL, or the same with a new "
    "secret) verifies afresh. Calls to one host and port are capped across all bots "
    "(`ARENA_CALLBACK_HOST_RATE` per second, 300 by default), each owner called there "
    "having an equal share: past it a turn is not called, and is recorded as "
    "`host-rate-limited`.\n\n"
    "Once verified, whenever it is your turn in a game, the service POSTs a "
    "`turn` request (see `webhooks` in this contract) to this URL with your seat's view and "
    "applies the action in your answer, exactly as if you had sent it to `POST "
    "/games/{game_id}/actions` with the view's `version` and an `Idempotency-Key`. It also "
    "sends `start` and `end` when a game you sit in begins and ends. A failed call (an "
    "error status, no answer before the deadline, a body that is not an action, an illegal "
    "action) applies nothing: your seat keeps its turn and, at the move deadline, gets the "
    "default action; `GET /bots/me/callback/deliveries` says what happened, and your next "
    "`turn` request in that game carries it as `last_failure`. You may still act by pull "
    "at any time. " + _SIGNING + " Answers a new secret, shown only here; registering "
    "again replaces both URL and secret.",
    tags=("bots",),
    body=cs.CallbackIn,
    response=cs.CallbackCreated,
    auth="required",
    example={"url": "https://bots.example.org/allfours"},
)
def put_callback(bot_id: str, body: dict[str, Any]) -> Response:
    return respond(sch(cs.CallbackCreated), callbacks().register(bot_id, body["url"]))


@bp.get("/bots/me/callback")
@operation(summary="Your callback URL and its verification (never the secret)",
           tags=("bots",), response=cs.Callback, auth="required", errors=(404,))
def get_callback(bot_id: str) -> Response:
    return respond(sch(cs.Callback), callbacks().registration(bot_id))


@bp.post("/bots/me/callback/verify")
@operation(
    summary="Verify your callback URL again, now",
    description="For a URL whose verification failed (or is still pending, e.g. your "
    "server was not up yet): a new `verify` request is sent at once, and again on the "
    "same schedule as after a registration if it fails. A verified URL stays as it is "
    "(nothing is sent). Answers the callback's state; watch `verified` in `GET "
    "/bots/me/callback` (or `GET /bots/me`) for the outcome, and the `verify` delivery "
    "records for why it failed.",
    tags=("bots",),
    body=Empty,
    body_required=False,
    response=cs.Callback,
    auth="required",
    errors=(404,),
)
def verify_callback(bot_id: str, body: dict[str, Any]) -> Response:
    return respond(sch(cs.Callback), callbacks().request_verification(bot_id))


@bp.delete("/bots/me/callback")
@operation(summary="Remove your callback URL: you play by pull again", tags=("bots",),
           response=None, status=204, auth="required", errors=(404,))
def delete_callback(bot_id: str) -> Response:
    callbacks().remove(bot_id)
    return Response(status=204)


@bp.get("/bots/me/callback/deliveries")
@operation(
    summary="What happened to the service's calls to you, newest first",
    description="One record per delivery (a turn, a start, an end): its outcome, your "
    "status, the action your answer named and, when it was not applied, why. The latest "
    "200 are kept.",
    tags=("bots",),
    query=cs.DeliveriesQuery,
    response=cs.DeliveryList,
    auth="required",
    response_headers=LINK,
)
def get_deliveries(bot_id: str, query: dict[str, Any]) -> Response:
    kept = callbacks().deliveries(bot_id, DELIVERIES_KEPT, query.get("game_id"))
    items, after = page_of(kept, query["limit"], query.get("cursor"))
    return respond_page(sch(cs.DeliveryList),
                        {"items": items, "next_cursor": after, "deliveries": items})
