"""The requests the service sends to a bot's callback URL, as OpenAPI 3.1 ``webhooks``
(``openapi_spec.spec_yaml`` adds them to ``openapi.yaml``): a bot author can generate the
receiving side from the same contract as the calling side.
"""

from __future__ import annotations

from typing import Any

_WEBHOOK_HEADERS = [
    {"name": "Arena-Timestamp", "in": "header", "required": True,
     "description": "unix seconds when the request was signed (the service's clock): refuse "
     "one more than a minute from yours",
     "schema": {"type": "string", "pattern": "^[0-9]{1,12}$"}},
    {"name": "Arena-Signature", "in": "header", "required": True,
     "description": "`sha256=` and the lower-case hex HMAC-SHA256, keyed with your secret's "
     "UTF-8 bytes (from `PUT /bots/me/callback`), of the timestamp, a `.`, and the exact "
     "body bytes; compare in constant time",
     "schema": {"type": "string", "pattern": "^sha256=[0-9a-f]{64}$"}},
    {"name": "Arena-Delivery", "in": "header", "required": True,
     "description": "the request's id (the body's `delivery`): refuse one you have seen",
     "schema": {"type": "string"}},
    {"name": "Arena-Event", "in": "header", "required": True,
     "description": "`verify`, `turn`, `start`, `end` or `invitation` (the body's `event`)",
     "schema": {"type": "string", "enum": ["verify", "turn", "start", "end", "invitation"]}},
]

_WEBHOOK_TEXT = """\
Sent by the service to a bot's callback URL (`PUT /bots/me/callback`) from any of its
processes, over one pool of keep-alive connections. The connection goes only to a public
address or one inside the operator's `ARENA_CALLBACK_NETWORKS` (checked on the address
resolved at connection time); redirects are not followed (a 3xx is a failed call) and at
most `ARENA_CALLBACK_MAX_BYTES` (16384 by default) of the answer are read, uncompressed.
The whole call — connecting, retries, reading — must fit in the time before the move
deadline (less a margin) and in `ARENA_CALLBACK_TIMEOUT` (10 s by default). A call is
retried (at most `ARENA_CALLBACK_RETRIES` times, 2 by default, each a new `delivery` id
and signature) only when no answer arrived: the connection was refused, reset, or timed
out while connecting. An answer of any kind is final. Nothing but `verify` is sent to a
URL until it has passed its verification, and at most `ARENA_CALLBACK_HOST_RATE` calls a
second (300 by default) go to one host and port, across every bot, each owner called there
having an equal share: a call past it is not made (`host-rate-limited`).
"""


def webhooks() -> dict[str, Any]:
    """The requests the service sends (OpenAPI 3.1 ``webhooks``), so a bot author can
    generate the server side too."""
    body = {"required": True, "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/CallbackRequest"}}}}
    turn = {
        "operationId": "callbackTurn",
        "summary": "Your turn: answer with the action to play",
        "description": _WEBHOOK_TEXT + """
Answer `200` with `{"action": "<one of view.legal_actions>"}` before `deadline`. The
service applies it as `POST /games/{game_id}/actions` with `version` = the request's
`version` and `Idempotency-Key: callback-<version>`: the same rules, refusals and
idempotency, so a turn delivered twice (a process died mid-call and another called
again) applies at most one action, and an answer to a position that has moved on is
refused, never applied to the new one. Any other answer — another status, a body that is
not an action, an illegal action, no answer in time — applies nothing: the seat keeps its
turn (you may still act by pull) and at the deadline gets the default action. Each
delivery's outcome is in `GET /bots/me/callback/deliveries`, and the next `turn` in that
game carries the last failed one as `last_failure`.
""",
        "parameters": _WEBHOOK_HEADERS,
        "security": [],  # signed (Arena-Signature), not an HTTP auth scheme
        "requestBody": body,
        "responses": {
            "200": {"description": "the action to play", "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/CallbackAnswer"},
                "example": {"action": "AS"}}}},
            "default": {"description": "anything else: nothing is applied (see above)"},
        },
    }

    def note(event: str, what: str) -> dict[str, Any]:
        return {"post": {
            "operationId": f"callback{event.capitalize()}",
            "summary": what,
            "description": _WEBHOOK_TEXT + "\nThe answer is ignored (any 2xx is recorded "
            "as `delivered`). Queued by the process that saw the game start or end and "
            "retried where no answer came; a process that dies between the change and "
            "queueing it loses the notification (the game itself is unaffected).",
            "parameters": _WEBHOOK_HEADERS,
            "security": [],  # signed (Arena-Signature), not an HTTP auth scheme
            "requestBody": body,
            "responses": {"2XX": {"description": "received"}},
        }}

    def tournament_note(event: str, what: str) -> dict[str, Any]:
        return {"post": {
            "operationId": "callback" + "".join(w.capitalize() for w in event.split("_")),
            "summary": what,
            "description": _WEBHOOK_TEXT + "\nThe answer is ignored (any 2xx is recorded "
            "as `delivered`). The same notice is listed by `GET /bots/me/turns` "
            "(`tournaments`) for a day.",
            "parameters": _WEBHOOK_HEADERS,
            "security": [],  # signed (Arena-Signature), not an HTTP auth scheme
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/TournamentNoticeRequest"}}}},
            "responses": {"2XX": {"description": "received"}},
        }}

    verify = {
        "operationId": "callbackVerify",
        "summary": "Verify your URL: echo the challenge",
        "description": _WEBHOOK_TEXT + """
The first request a new callback URL gets, about a second after `PUT /bots/me/callback`
(so you have kept the secret from its answer), signed like every other. Answer `200` with
`{"challenge": "<the request's challenge>"}` (or the bare challenge as the whole body, as
`text/plain`). Until a URL has passed it is sent nothing else: its seats' turns fall to
the move deadline's default action and `start`/`end` wait. Another answer (another status,
no echo, no answer in time) fails the attempt: it is sent again after 4, 15 and 60 s, then
the URL is `failed` until `POST /bots/me/callback/verify`. Each attempt is a delivery record
(`event: verify`); `GET /bots/me/callback` shows `verified` and the `verification`.
""",
        "parameters": _WEBHOOK_HEADERS,
        "security": [],  # signed (Arena-Signature), not an HTTP auth scheme
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/VerifyRequest"}}}},
        "responses": {
            "200": {"description": "the challenge, echoed", "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/VerifyAnswer"},
                                     "example": {"challenge": "pVQ3f1aT9x0bYk2N5cE8sH4u"}},
                "text/plain": {"schema": {"type": "string"}}}},
            "default": {"description": "anything else: the URL is not verified"},
        },
    }
    return {
        "verify": {"post": verify},
        "turn": {"post": turn},
        "start": note("start", "A game you sit in has begun (every seat taken)"),
        "end": note("end", "A game you sit in is over (`view` shows every card)"),
        "invitation": note("invitation", "Another owner's bot invites you to a game "
                           "(`invitation`): accept or decline it by API before it expires"),
        **{event: tournament_note(event, what) for event, what in (
            ("tournament_starting", "A tournament you entered has started: your games "
             "come as turns"),
            ("tournament_finished", "A tournament you entered is over: its standings are "
             "final"),
            ("tournament_cancelled", "A tournament you entered was cancelled "
             "(`tournament.reason` says why)"))},
    }
