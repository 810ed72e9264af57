"""HTTP routes of the accounts (``service.arena.accounts``): registering a bot, the bot
behind a token, a bot's public record; consent to play (a bot's invitations and policy);
the admin's owner invitation codes and suspensions."""

from __future__ import annotations

import re
from typing import Any

from flask import Blueprint, Response

from service.arena.accounts.owners import SUSPENSION_LOG_MAX
from service.arena.core.problems import Problem
from service.http import limits, quotas
from service.http.accounts import consent_schemas as cs
from service.http.accounts import schemas as sb
from service.http.api import (
    BOT_ID,
    arena,
    callbacks,
    link,
    operation,
    respond,
    sch,
)
from service.http.lists import LINK, PageQuery, page_of, respond_page
from service.http.schemas import common as sc

bp = Blueprint("accounts", __name__)

# --- bots ---------------------------------------------------------------------------------


@bp.post("/bots")
@operation(
    summary="Register a bot",
    description="Returns the bot and its bearer token. The token is shown only here. "
    "Every bot belongs to an owner (`owner`): sent with `Authorization: Bearer <token of "
    "one of your bots>`, the new bot joins that bot's owner (your bots seat each other at "
    "once, and are never matched or rated against each other); without a token it makes "
    "a new owner. How new owners are admitted is the operator's choice "
    "(`ARENA_OWNER_ADMISSION`): open (default), by an invitation code (`invitation`; "
    "403 `owner-admission` without a valid one), or closed (403 `owner-admission`). New "
    "owners are limited per client network (IPv4 /24, IPv6 /64; "
    "`ARENA_OWNERS_PER_NETWORK` an hour, default 20; then 429). A suspended bot's token "
    "registers nothing (403 `suspended`).",
    tags=("bots",),
    body=sb.BotCreate,
    response=sb.BotCreated,
    status=201,
    auth="optional",
    errors=(403,),
    example={"name": "random-bot"},
    links={"GetBot": link("getBot", "the bot just registered",
                          bot_id="$response.body#/id")},
)
def create_bot(bot_id: str | None, body: dict[str, Any]) -> Response:
    with quotas.bot_registration(bot_id):
        bot = arena().register_bot(body["name"], body.get("person", False),
                                   owner_bot=bot_id, address=limits.counted_address(),
                                   invitation=body.get("invitation"))
    return respond(sch(sb.BotCreated), bot, 201, {"Location": f"/bots/{bot['id']}"})


@bp.get("/bots/me")
@operation(summary="The bot behind the token", description="With `callback`: your "
           "webhook URL and whether it is verified (null: none).", tags=("bots",),
           response=sb.BotMe, auth="required")
def get_me(bot_id: str) -> Response:
    return respond(sch(sb.BotMe), {**arena().bot(bot_id),
                                   "callback": callbacks().summary(bot_id)})




@bp.get("/bots/<bot_id>")
@operation(summary="A bot", tags=("bots",), response=sb.Bot, errors=(404,),
           path_params={"bot_id": BOT_ID})
def get_bot(bot_id: str) -> Response:
    return respond(sch(sb.Bot), arena().bot(bot_id))


# --- consent, owners and suspension -----------------------------------------------------

INVITATION_ID = {"schema": {"type": "string", "pattern": sc.ID_PATTERN},
                 "description": "invitation id"}
OWNER_ID = {"schema": {"type": "string", "pattern": cs.OWNER_ID_PATTERN},
            "description": "owner id (a bot's `owner`)"}
CONSENT = (
    "A bot is seated only in games it chose: `POST /games` seats the creator's own bots "
    "(same owner) at once; every other bot named in `seats` is invited, its seats held "
    "for it, and the game starts once each invited bot accepted. A decline, or an "
    "invitation left unanswered until `expires` (`ARENA_INVITATION_TTL`, 120 s by "
    "default), cancels the game (`finished`, `cancelled`: declined/expired). Invitations "
    "show in `GET /bots/me/turns` (`invitations`) and arrive as the `invitation` webhook "
    "event.")


@bp.get("/bots/me/invitations")
@operation(summary="Your pending invitations, oldest first", description=CONSENT,
           tags=("bots",), query=PageQuery, response=sb.InvitationList, auth="required",
           response_headers=LINK)
def my_invitations(bot_id: str, query: dict[str, Any]) -> Response:
    pending = arena().invitations.pending(bot_id)
    items, after = page_of(pending, query["limit"], query.get("cursor"))
    # the old key keeps its old meaning (every pending invitation), for the bots that read it
    return respond_page(sch(sb.InvitationList),
                        {"items": items, "next_cursor": after, "invitations": pending})


@bp.post("/invitations/<invitation_id>/accept")
@operation(
    summary="Accept an invitation: sit in the seats held for you",
    description=CONSENT + " Answers the invitation, `accepted`; find the game's turns as "
    "usual. 404 when it is not yours, was answered, or its game was cancelled or expired.",
    tags=("bots",), body=sc.Empty, body_required=False, response=sb.Invitation,
    auth="required", errors=(404,), path_params={"invitation_id": INVITATION_ID},
)
def accept_invitation(invitation_id: str, bot_id: str, body: dict[str, Any]) -> Response:
    return respond(sch(sb.Invitation), arena().invitations.accept(invitation_id, bot_id))


@bp.post("/invitations/<invitation_id>/decline")
@operation(
    summary="Decline an invitation: its game is cancelled",
    description=CONSENT + " Answers the invitation, `declined`.",
    tags=("bots",), body=sc.Empty, body_required=False, response=sb.Invitation,
    auth="required", errors=(404,), path_params={"invitation_id": INVITATION_ID},
)
def decline_invitation(invitation_id: str, bot_id: str, body: dict[str, Any]) -> Response:
    return respond(sch(sb.Invitation), arena().invitations.decline(invitation_id, bot_id))


@bp.get("/bots/me/policy")
@operation(summary="Whose invitations your bot receives", description=cs.POLICY_DOC,
           tags=("bots",), response=cs.Policy, auth="required")
def get_policy(bot_id: str) -> Response:
    return respond(sch(cs.Policy), _policy_out(arena().invitations.policy(bot_id)))


@bp.put("/bots/me/policy")
@operation(
    summary="Set whose invitations your bot receives",
    description=cs.POLICY_DOC + ". Bots of your own owner are never invited (they are "
    "seated at once), so the policy concerns other owners' bots only.",
    tags=("bots",), body=cs.PolicyIn, response=cs.Policy, auth="required",
    example={"accept": "list", "from": ["3f9a1c2b7d10"]},
)
def put_policy(bot_id: str, body: dict[str, Any]) -> Response:
    doc = arena().invitations.set_policy(bot_id, body["accept"], body.get("from_") or [])
    return respond(sch(cs.Policy), _policy_out(doc))


def _policy_out(doc: dict[str, Any]) -> dict[str, Any]:
    return {"accept": doc["accept"], "from_": doc["from"]}


# --- the operator ----------------------------------------------------------------------------


@bp.post("/owner-invitations")
@operation(
    summary="Make an owner invitation code (admin)",
    description="Where `ARENA_OWNER_ADMISSION` is `invite`, a new owner (a first bot "
    "registered without a bot token) needs one of these codes in `POST /bots` "
    "(`invitation`). Single use; expires after `ARENA_OWNER_INVITATION_TTL` (a week).",
    tags=("admin",), body=sc.Empty, body_required=False, response=cs.OwnerInvitation,
    status=201, auth="admin", errors=(403,),
)
def create_owner_invitation(body: dict[str, Any]) -> Response:
    return respond(sch(cs.OwnerInvitation), arena().owners.invite_owner(), 201)


SUSPEND_DOC = (
    "A suspended bot can no longer act, register bots or accept invitations (403 "
    "`suspended`, with the reason), is withdrawn from its open tournaments (its live games "
    "there forfeited, as a withdrawal) and its ladders, its pending invitations are "
    "declined, and it leaves the leaderboard. Lifting restores access, not the forfeited "
    "games. Each act is logged with its reason (`GET /admin/suspensions`). A repeat "
    "answers as it is now.")


@bp.post("/admin/bots/<bot_id>/suspension")
@operation(summary="Suspend a bot (admin)", description=SUSPEND_DOC, tags=("admin",),
           body=cs.SuspensionIn, response=cs.SuspendedBot, auth="admin", errors=(403, 404),
           path_params={"bot_id": BOT_ID}, example={"reason": "threw ladder games"})
def suspend_bot(bot_id: str, body: dict[str, Any]) -> Response:
    return respond(sch(cs.SuspendedBot), arena().suspend_bot(bot_id, body["reason"]))


@bp.delete("/admin/bots/<bot_id>/suspension")
@operation(summary="Lift a bot's suspension (admin)", description=SUSPEND_DOC,
           tags=("admin",), response=cs.SuspendedBot, auth="admin", errors=(403, 404),
           path_params={"bot_id": BOT_ID})
def lift_bot(bot_id: str) -> Response:
    return respond(sch(cs.SuspendedBot), arena().lift_bot(bot_id))


def _owner_id(owner_id: str) -> str:
    if not re.fullmatch(cs.OWNER_ID_PATTERN, owner_id):
        raise Problem("not-found", "no such owner")
    return owner_id


@bp.post("/admin/owners/<owner_id>/suspension")
@operation(summary="Suspend an owner and every bot of it (admin)",
           description=SUSPEND_DOC + " The owner can register no more bots.",
           tags=("admin",), body=cs.SuspensionIn, response=cs.Owner, auth="admin",
           errors=(403, 404), path_params={"owner_id": OWNER_ID},
           example={"reason": "a rating farm: three accounts throwing games"})
def suspend_owner(owner_id: str, body: dict[str, Any]) -> Response:
    return respond(sch(cs.Owner), arena().suspend_owner(_owner_id(owner_id), body["reason"]))


@bp.delete("/admin/owners/<owner_id>/suspension")
@operation(summary="Lift an owner's suspension (admin)", description=SUSPEND_DOC,
           tags=("admin",), response=cs.Owner, auth="admin", errors=(403, 404),
           path_params={"owner_id": OWNER_ID})
def lift_owner(owner_id: str) -> Response:
    return respond(sch(cs.Owner), arena().lift_owner(_owner_id(owner_id)))


@bp.get("/admin/suspensions")
@operation(summary="Every suspension and lifting, newest first (admin)", tags=("admin",),
           query=PageQuery, response=cs.SuspensionLog, auth="admin", errors=(403,),
           response_headers=LINK)
def suspensions(query: dict[str, Any]) -> Response:
    items, after = page_of(arena().owners.suspensions(SUSPENSION_LOG_MAX), query["limit"],
                           query.get("cursor"))
    return respond_page(sch(cs.SuspensionLog),
                        {"items": items, "next_cursor": after, "entries": items})
