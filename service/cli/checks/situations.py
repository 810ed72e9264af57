"""The situations a pulling bot is put through, the games that bring them, and their
settings.

Two phases of games, each phase's games side by side (so a check stays about as long as
when it played three games one after another):

1. **faults and company** — ``duel`` (2 players, target 7, a 10 s move limit: a 429 and a
   503 with ``Retry-After``, an answer lost after the service applied it, a quiet 3 s while
   the opponent thinks, a restart of the service), ``team`` (4 players, the bot in seats 0
   and 2, a 5 s move limit: the same faults, each at a seat of its own, a stale version,
   the same restart and a cut connection: reconnects mid-game), ``invited`` (a stranger's
   invitation, played once accepted), ``house4`` (4 players under the house rules that
   change what is legal there: no under-trumping, a void may discard, a redeal when the
   pack runs out) and ``multi`` (three games at once, the opponent slow enough that a bot
   playing one of them to its end leaves the others to the clock);
2. **clocks** — ``clock`` (2 players, every house rule changed, a 3 s move limit, a stale
   version) and ``bank`` (a 1 s move limit with a 6 s time bank, one action delayed past
   the limit): short limits, measured away from the first phase's faults.

A move of the bot's that the clock played while check-bot held one of its requests in
another game, or while the service restarted, is not counted against it (:mod:`.evidence`).
"""

from __future__ import annotations

DOCS = "docs/bots.md"
BUSY_RATE = 3.0  # requests per second while not in turn above this: a busy loop
MAX_PER_MOVE = 10.0  # requests per move above this: far from the 1.1-1.9 of the project's bots
START_WAIT = 90.0  # seconds for the bot's first request (a `go run` or `tsc` build included)
GIVE_UP = 3  # the clock played this many of the bot's moves in a game: stop waiting for it
SLACK = 0.05  # seconds of clock jitter allowed when measuring a wait
IDLE_WINDOW = 2.0  # seconds watched with no game at all
THINK = 2.5  # seconds of quiet measured while the opponents hold their moves
INVITE_WAIT = 15.0  # seconds an invitation may stay unanswered (real play: 120)
INVITATION_TTL = 120  # the service's default, for the report
MULTI_THINK = 0.8  # seconds the opponent takes per move in the games played at once, so
# each lasts long enough that a bot playing one of them to its end leaves the others waiting
BANK_HOLD = 1.8  # seconds the proxy delays one action in the bank game (past its limit)
# the clock game's move limit: short (the clock plays a late move soon, and the stale-version
# hold lasts this long), yet a bot three requests a move from the service keeps it under load
CLOCK_LIMIT = 3

HOUSE_RULES = {"target": 3, "game_point_value": 2, "game_tie": "non_dealer",
               "give_one_at_target_minus_one": False, "under_trumping": False,
               "void_may_discard": True, "pack_runs_out": "redeal", "tobago_kick": True}
# the house rules that change what is legal in a 4-player game
HOUSE_RULES_4P = {"target": 10, "under_trumping": False, "void_may_discard": True,
                  "pack_runs_out": "redeal"}

# game -> (players, bot seats, settings, phase); the bot's seats come first in 2-player
# games except the clock game's (the bot second: it is dealt to, the opponent deals)
GAMES: dict[str, tuple[int, tuple[int, ...], dict, int]] = {
    "duel": (2, (0,), {"seed": 11, "variants": {"target": 7}, "move_limit": 10}, 1),
    "team": (4, (0, 2), {"seed": 5, "variants": {"target": 5}, "move_limit": 5}, 1),
    "invited": (2, (1,), {"seed": 7, "variants": {"target": 3}, "move_limit": 10}, 1),
    "clock": (2, (1,), {"seed": 24, "variants": HOUSE_RULES, "move_limit": CLOCK_LIMIT}, 2),
    "house4": (4, (0, 2), {"seed": 3, "variants": HOUSE_RULES_4P, "move_limit": 5}, 1),
    "multi-1": (2, (0,), {"seed": 31, "variants": {"target": 3}, "move_limit": 5}, 1),
    "multi-2": (2, (1,), {"seed": 32, "variants": {"target": 3}, "move_limit": 5}, 1),
    "multi-3": (2, (0,), {"seed": 34, "variants": {"target": 3}, "move_limit": 5}, 1),
    "bank": (2, (0,), {"seed": 41, "variants": {"target": 3}, "move_limit": 1,
                       "time_bank": 6}, 2),
}
GAME_CAP = {"duel": 120.0, "team": 120.0, "invited": 90.0, "clock": 60.0, "house4": 90.0,
            "multi": 90.0, "bank": 90.0}

# situation -> (games, docs anchor, title); "*": every game played
SITUATIONS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "two_player": (("duel",), "the-turn-loop", "a 2-player game played to its end"),
    "four_player_two_seats": (("team",), "accounts-games-and-seats",
                              "a 4-player game holding both seats of a team"),
    "decisions": (("*",), "the-view", "every decision kind: stand/beg, give one/run, play"),
    "invitation": (("invited",), "owners-and-invitations-consent-to-play",
                   "a stranger's invitation: accepted, declined, or refused by policy"),
    "house_rules": (("clock",), "", "a game with every house rule changed"),
    "house_rules_four_player": (("house4",), "", "a 4-player game under the house rules "
                                "that change what is legal: no under-trumping, a void may "
                                "discard, a redeal when the pack runs out"),
    "several_games": (("multi",), "the-turn-loop", "three games at once, every one moving"),
    "time_bank": (("bank",), "the-clock", "a time bank spent on a delay, not wasted"),
    "stale_version": (("clock", "team"), "versions-and-conflicts",
                      "another write got in first (a stale version), in 2 and 4 players"),
    "rate_limited": (("duel", "team"), "rate-limits", "429 with Retry-After, 2 and 4 players"),
    "unavailable": (("duel", "team"), "errors", "503 with Retry-After, 2 and 4 players"),
    "lost_answer": (("duel", "team"), "idempotency",
                    "an answer lost after the action was applied, 2 and 4 players"),
    "move_limit": (("clock",), "deadlines", "a 3 s move limit"),
    "restart": (("duel",), "errors", "the service restarted mid-game"),
    "four_player_reconnect": (("team",), "errors", "a reconnect mid 4-player game (the "
                              "service restarted): both seats played on"),
    "illegal_action": (("*",), "errors", "only legal actions, and no loop on a 409"),
    "idempotency_key": (("*",), "idempotency", "an Idempotency-Key on every action"),
    "no_busy_loop": (("duel",), "the-turn-loop", "no busy loop while waiting"),
    "requests_per_move": (("*",), "rate-limits", "requests per move"),
}

# what real play does to a bot that fails a situation
CLOCKED = ("the clock plays its seat each time (3 timeouts in one ladder game pause it; "
           "tournament standings count them)")
REAL_PLAY: dict[str, str] = {
    "invitation": (f"the invitation expires after {INVITATION_TTL} s and the game is "
                   "cancelled: nobody who challenges it gets a game"),
    "stale_version": "a decision made on a view that has moved on is refused (409): re-sent "
                     "it loops, and a bot that stops there leaves its seats to the clock",
    "rate_limited": "a request sent sooner than Retry-After is refused again (429) while "
                    "the clock runs; kept up, the clock plays the seat",
    "unavailable": "a request sent sooner than Retry-After meets the same 503 while the "
                   "clock runs; kept up, the clock plays the seat",
    "lost_answer": "answers are lost on any network: a retry without its key (or with "
                   "another body) is refused or applied as a second move",
    "illegal_action": "every refused action is a request spent while its clock runs; "
                      "a loop on one is 429 and then the clock",
    "idempotency_key": "a retried action without its key can be applied twice or refused",
    "no_busy_loop": "its requests run into the rate limit (429) while it waits",
    "requests_per_move": "its requests run into the rate limit (429)",
}


def link_to(anchor: str) -> str:
    """Where the docs say what a situation asks of a bot (no anchor: a house rule's)."""
    return "docs/rules.md#house-rules" if not anchor else f"{DOCS}#{anchor}"


def docs_link(situation: str) -> str:
    return link_to(SITUATIONS[situation][1])
