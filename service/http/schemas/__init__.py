"""Wire schemas (marshmallow): what requests may say and what responses look like.

These are not engine types. Request schemas reject unknown fields (marshmallow's RAISE),
so a typo in a bot's request is an error naming the field, not a silently ignored value.
Response schemas shape what leaves the service and are the source of ``openapi.yaml``.

Each domain keeps its own shapes beside its routes (``service.http.games.schemas``,
``accounts.schemas``, ``tournaments.schemas``, ``ladder.schemas``, ``webhooks.schemas``,
``analyses.schemas``); this package holds what several domains share: ``common``
(patterns, strict JSON fields, the ``Strict``/``Out`` bases, problems), ``variants``
(house rules) and ``callback`` (a webhook registration as the bot reads it).
"""
