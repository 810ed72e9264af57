"""What the arena does with games, one package per domain, each importing only the
domains below it (the ``arena-domains`` contract in pyproject.toml):

- ``core``: what every domain shares: problems, a game's status, the clock, fair deals,
  the background loop's shape, ratings.
- ``accounts``: bots' owners, admission and suspension, consent (invitations), the house
  bots.
- ``games``: the game commands (create, join, act, view, record), waiting and the event
  streams, the per-process fan-out, move deadlines.
- ``webhooks``: bots that are called instead of polling.
- ``analyses``: post-game analysis, queued and computed by background workers.
- ``tournaments``: scheduling, pairing, knockout, standings, control, export.
- ``ladder``: the always-open rated queue and its validation game.
- ``migrations``: one-time rewrites of stored data (the ratings under new rules).
"""
