"""What one sampled hand is worth: its points, its margin and the chance of the game.

``outcome`` plays a hand to its end with the search bot's rollout policy (``playout``) and
reads the three values the analysis and ``SearchStrategy.values`` report (issue 25).

The chance of winning comes from the score, between two evenly matched teams: a point at
13-13 decides the game, a point at 0-0 hardly matters. ``win_chance`` lets each later hand
score its items in the rules' order (R17-R22: High, Low, Jack, Game), each to either team
with an even chance, the Jack only when the jack of trumps was dealt (about 24 of the 51
cards that are not the kick with 4 players, 12 with 2), and ends the game the instant a
team reaches the target (R22). Kicks, begging and hang jacks are left out: they are rare
or small, and even out between the teams. It is a prior, not a measurement of the bots.
"""

from __future__ import annotations

import random
from functools import lru_cache

from service.engine.state import OVER, State

from .playout import play_hand

# Chance that the jack of trumps is in a hand (dealt, not kicked), by number of players.
_JACK_DEALT = {2: 12 / 51, 4: 24 / 51}


@lru_cache(maxsize=16)
def _table(target: int, players: int, game_value: int) -> tuple[tuple[float, ...], ...]:
    """``table[a][b]``: the chance that a team at ``a`` beats one at ``b`` (both below the
    target) when a new hand begins."""
    pj = _JACK_DEALT.get(players, 18 / 51)
    t = target
    # items in order: (points, chance the item exists this hand)
    items = ((1, 1.0), (1, 1.0), (1, pj), (game_value, 1.0))

    def done(a: int, b: int, nxt: list[list[float]]) -> float:
        if a >= t:
            return 1.0
        if b >= t:
            return 0.0
        return nxt[a][b]

    # Values before the first item of a hand equal the values after its last item (the
    # next hand starts): solve by iterating from the highest total score down, since
    # every item adds at least one point to somebody (the Jack's absence aside, which
    # only passes to the next item).
    start = [[0.5] * t for _ in range(t)]
    for total in range(2 * t - 2, -1, -1):
        for a in range(max(0, total - t + 1), min(t, total + 1)):
            b = total - a
            # walk the items of one hand backwards from "next hand at (a', b')"
            start[a][b] = _hand(a, b, items, t, start)
    return tuple(tuple(row) for row in start)


def _hand(
    a: int, b: int, items: tuple[tuple[int, float], ...], t: int, start: list[list[float]]
) -> float:
    """Chance from (a, b) at the start of a hand, given ``start`` for higher totals."""

    def go(i: int, a: int, b: int) -> float:
        if a >= t:
            return 1.0
        if b >= t:
            return 0.0
        if i == len(items):
            return start[a][b]
        points, exists = items[i]
        scored = 0.5 * go(i + 1, a + points, b) + 0.5 * go(i + 1, a, b + points)
        if exists >= 1.0:
            return scored
        return exists * scored + (1 - exists) * go(i + 1, a, b)

    return go(0, a, b)


def win_chance(mine: int, theirs: int, target: int, players: int, game_value: int = 1) -> float:
    """The chance that the team at ``mine`` wins against the team at ``theirs``."""
    if mine >= target:
        return 1.0
    if theirs >= target:
        return 0.0
    if target > 60:  # a long game: the score hardly decides it yet; keep the table small
        scale = 60 / target
        mine, theirs, target = int(mine * scale), int(theirs * scale), 60
    return _table(target, players, game_value)[max(mine, 0)][max(theirs, 0)]


def outcome(s: State, team: int, rng: random.Random, epsilon: float) -> tuple[float, float, float]:
    """Play to the end of the hand as ``rollout`` does; ``team``'s points, margin and
    chance of winning the game (1 or 0 if it ended this hand, else ``win_chance``)."""
    hand_no = s.hand_no
    s = play_hand(s, rng, epsilon)
    items = s.items
    scores = list(s.scores)
    if s.hand_no != hand_no:  # the caller's own step finished the hand and dealt the next
        for _item, t, p, _detail in items:  # the new hand's kick is not this hand's
            if t is not None:
                scores[t] -= p
        items = s.last_items
    points = margin = 0.0
    for _item, t, p, _detail in items:
        if t is not None:
            margin += p if t == team else -p
            if t == team:
                points += p
    if s.phase == OVER:
        win = 1.0 if s.winner == team else 0.0
    else:
        v = s.variants
        win = win_chance(scores[team], scores[1 - team], v.target, s.players, v.game_point_value)
    return points, margin, win
