"""Wire schemas (marshmallow): what requests may say and what responses look like.

These are not engine types. Request schemas reject unknown fields (marshmallow's RAISE),
so a typo in a bot's request is an error naming the field, not a silently ignored value.
Response schemas shape what leaves the service and are the source of ``openapi.yaml``.

One module per part of the API (import from the module; nothing is re-exported here):
``common`` (patterns, strict JSON fields, the ``Strict``/``Out`` bases, problems),
``variants`` (house rules), ``bots`` (bots, tokens, the turn poll, invitations),
``games`` (games, actions, views), ``record`` (the record and the event stream),
``tournaments``, ``house`` (house games) and ``ladders``. The webhook and consent shapes
are in ``callback_schemas`` and ``consent_schemas``.
"""
