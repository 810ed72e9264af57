"""The webhook feature's Redis keys, its two Lua scripts and its timings: what the
registration (``service.arena.webhooks.callbacks``), the deliveries
(``service.arena.webhooks.events``) and the dispatcher
(``service.arena.webhooks.dispatcher``) share.

**Keys** (one hash tag per bot, so every multi-key step stays in one cluster slot):
``{p}{hook:B}:cfg`` (hash: url, secret, created; verified, verification, vid (the current
verification's id), tries, checked, vdetail), ``{p}{hook:B}:claim:{game}:{v}``,
``{p}{hook:B}:deliveries`` (list of records, newest first, capped),
``{p}{hook:B}:failed`` (hash game -> the last failed turn delivery there),
``{p}{hook:B}:notify`` (sorted set of pending start/end notifications, score = due time,
claimed with leases like the deadlines). The shared keys: ``{p}hookverify`` (sorted set
of pending verifications ``<bot>|<vid>``, score = due time, claimed with leases; an entry
leaves it once its URL passed, failed for good, or was replaced or removed) and
``{p}hooks`` (set of bot ids), which is written as a second step: registration writes the
config first, removal removes the id first; a crash between leaves an id without a
config (skipped and dropped by the next repair pass) or a config without the id (the
bot's retried ``PUT`` adds it).
"""

from __future__ import annotations

from typing import NamedTuple

from service.storage.store import Game

# Verification of a callback URL (``service.arena.webhooks.callbacks``, "Verified first"): the delay
# before each attempt, counted from the registration (or the request to verify again) and
# then from the attempt before. The first waits a second so the bot can keep the secret the
# registration answered before a request signed with it arrives; then 4, 15 and 60 s (a server being
# deployed, a restart), about 80 s in all, after which the URL is ``failed`` until the bot
# asks again (``POST /bots/me/callback/verify``).
VERIFY_SCHEDULE_S = (1.0, 4.0, 15.0, 60.0)


VERIFY_TIMEOUT_S = 5.0  # one verification call's budget (connecting, retries, the answer)


SCAN_S = 0.5  # how often every webhook bot's turns are re-checked (the repair pass)


LEASE_MARGIN_S = 5.0  # a claim outlives its call's budget by this much


DEADLINE_MARGIN_S = 0.15  # the answer must be back this long before the deadline


MIN_BUDGET_S = 0.05  # less time than this left: no call (the sweeper plays)


NO_DEADLINE_RETRY_S = 30.0  # a failed turn in a game without a move limit: again after


RETRY_BACKOFF_S = (0.05, 0.2, 0.5)


NOTIFY_TRIES = 3  # start/end notifications: attempts where no answer came


NOTIFY_TIMEOUT_S = 5.0


DELIVERIES_KEPT = 200


CONCURRENCY = 200  # calls in flight per process


def hooks_key(p: str) -> str:
    return f"{p}hooks"


def cfg_key(p: str, bot: str) -> str:
    return f"{p}{{hook:{bot}}}:cfg"


def claim_key(p: str, bot: str, game_id: str, version: int) -> str:
    return f"{p}{{hook:{bot}}}:claim:{game_id}:{version}"


def deliveries_key(p: str, bot: str) -> str:
    return f"{p}{{hook:{bot}}}:deliveries"


def failed_key(p: str, bot: str) -> str:
    return f"{p}{{hook:{bot}}}:failed"


def notify_key(p: str, bot: str) -> str:
    return f"{p}{{hook:{bot}}}:notify"


def verify_key(p: str) -> str:
    """Pending verifications (sorted set: ``<bot>|<verification id>``, score = due time),
    claimed with leases like the notifications; shared by every bot, like ``hooks``."""
    return f"{p}hookverify"


# KEYS[1] a bot's config. ARGV[1] the verification id the outcome is for; then fields and
# values to set. Written only if the config still has that id: an answer for a URL since
# replaced (or a verification asked again) changes nothing.
SET_IF_VID = """
if redis.call('HGET', KEYS[1], 'vid') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
return 1
"""


# KEYS[1] the bot's pending notifications. ARGV: now, lease-until. As ``Store.CLAIM``.
CLAIM_NOTES = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 20)
for _, m in ipairs(due) do redis.call('ZADD', KEYS[1], 'XX', ARGV[2], m) end
return due
"""


class Claim(NamedTuple):
    """A turn this process has claimed: the game at the claimed version, the seconds left
    before its deadline (None: no move limit) and the call's time budget."""

    bot_id: str
    game: Game
    key: str
    left: float | None
    budget: float
