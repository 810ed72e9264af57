"""Creation quotas: how much storage one client may make per hour, whoever it is.

The request budget (``service.http.limits``) bounds how *fast* a client may ask; these
bound how much it may *create*, since everything created is kept for days (the bots
until they expire unused, the games for their retention: ``service.storage.store``
``Retention``). Each is a count per fixed window of ``ARENA_QUOTA_WINDOW`` seconds (an
hour), in one Redis counter per window (``{p}quota:{what}:{who}:{window number}``, who is
``a<client>`` or ``b<bot id>``; it expires with its window), taken by one script that
counts only below the limit (``QUOTA``), so exactly the limit is let through however many
requests race, and a refused request writes nothing at all. Past a quota: ``429``
problem+json with ``Retry-After`` (the seconds until the window ends), through
``limits.reject``.

- ``ARENA_QUOTA_BOTS``: bots registered (``POST /bots``) per client.
- ``ARENA_QUOTA_GAMES``: games created (``POST /games``) per bot, and
  ``ARENA_QUOTA_CLIENT_GAMES`` per client (a client's many bots share it).
- ``ARENA_QUOTA_HOUSE_GAMES``: house games (``POST /house/games``) per client, and per bot
  when the caller has a token. An anonymous house game also registers the person's
  account: that account is the house game's, not counted as a bot registration.

A client is its address: an IPv4 address, or an IPv6 address's /64 (one host is usually
handed a whole /64, so counting addresses inside it would count nothing). 0 turns a quota
off. The defaults and the figures they come from are in docs/operations.md ("What is
kept, and for how long").
"""

from __future__ import annotations

from typing import Any

from flask import current_app

from service.addresses import client_of
from service.http import limits
from service.storage.store import Store

QUOTA_WINDOW = 3600  # seconds: "per hour"
# Sized so that no normal use meets them (the test suite, bench/, the tournament CLI with
# its 64 entrants, people on the page) and one address still cannot fill the memory; the
# measured cost of each creation is in docs/operations.md.
QUOTA_BOTS = 100  # per client: the largest tournament (64 entrants) and then some
QUOTA_GAMES = 300  # per bot: a new game every 12 s for an hour (a bot's own test matches)
QUOTA_CLIENT_GAMES = 600  # per client: two such bots, or many bots playing less
QUOTA_HOUSE_GAMES = 60  # per client and per bot: a game a minute; a game to 7 takes longer

DEFAULTS: dict[str, Any] = {
    "ARENA_QUOTA_WINDOW": QUOTA_WINDOW,
    "ARENA_QUOTA_BOTS": QUOTA_BOTS,
    "ARENA_QUOTA_GAMES": QUOTA_GAMES,
    "ARENA_QUOTA_CLIENT_GAMES": QUOTA_CLIENT_GAMES,
    "ARENA_QUOTA_HOUSE_GAMES": QUOTA_HOUSE_GAMES,
}


def _store() -> Store:
    return current_app.extensions["arena"].store


def take(what: str, *counts: tuple[str, str]) -> None:
    """Take one ``what`` (``bots``, ``games``, ``house games``) from each of ``counts``
    (setting name, who), or none: 429 at the first quota that is used up, and the ones
    taken before it are given back."""
    cfg = current_app.config
    window = int(cfg["ARENA_QUOTA_WINDOW"])
    store = _store()
    taken: list[str] = []
    for setting, who in counts:
        limit = int(cfg[setting])
        if not limit:
            continue
        key, wait_ms = store.take_quota(who, limit, window)
        if key:
            taken.append(key)
            continue
        for k in taken:
            store.give_back_quota(k)
        whose = "this bot" if ":b" in who else "this client address"
        limits.reject(f"more than {limit} {what} created by {whose} in {window} s "
                      f"({setting})", limits.reset_ms(wait_ms, window))


def _client() -> str:
    return "a" + client_of(limits.client_address())


def bot_registration() -> None:
    """Before ``POST /bots`` registers a bot."""
    take("bots", ("ARENA_QUOTA_BOTS", "bots:" + _client()))


def game_creation(bot_id: str) -> None:
    """Before ``POST /games`` creates a game for ``bot_id``."""
    take("games", ("ARENA_QUOTA_GAMES", "games:b" + bot_id),
         ("ARENA_QUOTA_CLIENT_GAMES", "games:" + _client()))


def house_game(bot_id: str | None) -> None:
    """Before ``POST /house/games`` creates a house game (and, anonymous, an account)."""
    counts = [("ARENA_QUOTA_HOUSE_GAMES", "house:" + _client())]
    if bot_id:
        counts.append(("ARENA_QUOTA_HOUSE_GAMES", "house:b" + bot_id))
    take("house games", *counts)
