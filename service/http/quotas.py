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

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flask import current_app

from service.http import budget, limits
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


def take(what: str, *counts: tuple[str, str]) -> list[str]:
    """Take one ``what`` (``bots``, ``games``, ``house games``) from each of ``counts``
    (setting name, who), or none: 429 at the first quota that is used up, and the ones
    taken before it are given back. The counters taken, for ``give_back``."""
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
    return taken


def give_back(keys: list[str]) -> None:
    store = _store()
    for k in keys:
        store.give_back_quota(k)


@contextmanager
def creating(what: str, *counts: tuple[str, str], spends: tuple[str, ...] = ()
             ) -> Iterator[None]:
    """Take the quotas, then the service-wide budgets ``spends`` (``service.http.budget``:
    ``accounts``, ``games``), then create: a creation refused after the quotas were taken
    (a budget spent, the owner admission, a bad seat, a missing house) gives them back, so
    a refused request takes nothing from any quota."""
    keys = take(what, *counts)
    spent: list[str] = []
    try:
        spent = budget.take(list(spends))
        yield
    except BaseException:
        give_back(keys)
        budget.give_back(spent)
        raise


def _client() -> str:
    return "a" + limits.client_key()


def bot_registration(bot_id: str | None = None) -> contextlib.AbstractContextManager[None]:
    """Around ``POST /bots``'s registration of a bot (``bot_id``: the caller's, whose
    owner gets the new bot; None: a new owner)."""
    return creating("bots", ("ARENA_QUOTA_BOTS", "bots:" + _client()),
                    spends=("accounts",) if budget.is_new(bot_id) else ())


def game_creation(bot_id: str) -> contextlib.AbstractContextManager[None]:
    """Around ``POST /games``'s creation of a game for ``bot_id``."""
    return creating("games", ("ARENA_QUOTA_GAMES", "games:b" + bot_id),
                    ("ARENA_QUOTA_CLIENT_GAMES", "games:" + _client()),
                    spends=("games",) if budget.is_new(bot_id) else ())


def house_game(bot_id: str | None) -> contextlib.AbstractContextManager[None]:
    """Around ``POST /house/games``'s creation of a house game (and, anonymous, of the
    person's account)."""
    counts = [("ARENA_QUOTA_HOUSE_GAMES", "house:" + _client())]
    if bot_id:
        counts.append(("ARENA_QUOTA_HOUSE_GAMES", "house:b" + bot_id))
    spends = ("accounts", "games") if bot_id is None else (
        ("games",) if budget.is_new(bot_id) else ())
    return creating("house games", *counts, spends=spends)
