"""Scoring a hand: High, Low, Jack, Game, in that order (R17–R22)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .cards import CARD_NAMES, GAME_POINTS, JACK, SUIT_MASK, highest, lowest
from .state import State, team_of
from .variants import GAME_TIE_NON_DEALER

# Score item names, as they appear in events, views and records.
KICK, GIVE_ONE, HIGH, LOW, JACK_ITEM, HANG_JACK, GAME = (
    "kick", "give_one", "high", "low", "jack", "hang_jack", "game",
)  # fmt: skip
ITEMS = (KICK, GIVE_ONE, HIGH, LOW, JACK_ITEM, HANG_JACK, GAME)

Award = Callable[[State, int, int, str, Any, list], bool]


def score_event(item: str, team: int | None, points: int, detail: Any, scores: list[int]) -> dict:
    """The ``score`` event for one item; ``detail`` is a card, or Game's totals."""
    event: dict[str, Any] = {"type": "score", "item": item, "team": team, "points": points}
    if item == GAME:
        event["totals"] = list(detail)
    elif detail is not None:
        event["card"] = CARD_NAMES[detail]
    event["scores"] = list(scores)
    return event


def holder(dealt: list[int], c: int) -> int:
    """The seat that was dealt card ``c``."""
    for seat, mask in enumerate(dealt):
        if mask >> c & 1:
            return seat
    raise ValueError(f"{CARD_NAMES[c]} was not dealt")


def game_totals(s: State) -> list[int]:
    """R20: card points each team won in tricks (A 4, K 3, Q 2, J 1, T 10; all suits)."""
    totals = [0, 0]
    gp = GAME_POINTS
    for _leader, cards, winner in s.tricks:
        totals[winner & 1] += sum([gp[c] for c in cards])
    return totals


def score_hand(s: State, events: list, award: Award) -> bool:
    """Count High, Low, Jack and Game for the hand just played; True if the game ended.

    R17/R18: High and Low go to the team of the player *dealt* the highest and lowest
    trump (run cards count, kicks do not), whoever captured them. R21: a lone trump is
    both. R19: Jack, only if the jack of trumps was dealt: 1 to its holder's team if that
    team wins the trick holding it, 3 (hang jack) to the other team if it does. R20: Game
    to the higher card-point total. R22: each item is scored in turn and the first to
    reach the target ends the game.
    """
    trump = s.trump
    dealt = s.dealt
    trumps = 0
    for mask in dealt:
        trumps |= mask
    trumps &= SUIT_MASK[trump]
    if trumps:
        hi = highest(trumps)
        if award(s, team_of(holder(dealt, hi)), 1, HIGH, hi, events):
            return True
        lo = lowest(trumps)
        if award(s, team_of(holder(dealt, lo)), 1, LOW, lo, events):
            return True
        jack = trump * 13 + JACK
        if trumps >> jack & 1:
            own = team_of(holder(dealt, jack))
            for _leader, cards, winner in s.tricks:
                if jack in cards:
                    taker = team_of(winner)
                    break
            else:  # every dealt card is played by the end of a hand
                raise AssertionError("the jack of trumps was dealt but never played")
            if taker == own:
                ended = award(s, own, 1, JACK_ITEM, jack, events)
            else:
                ended = award(s, taker, 3, HANG_JACK, jack, events)
            if ended:
                return True
    totals = game_totals(s)
    if totals[0] != totals[1]:
        team: int | None = 0 if totals[0] > totals[1] else 1
    elif s.variants.game_tie == GAME_TIE_NON_DEALER:
        team = 1 - team_of(s.dealer)
    else:
        team = None
    if team is None:
        s.items = [*s.items, [GAME, None, 0, totals]]
        events.append(score_event(GAME, None, 0, totals, s.scores))
        return False
    return award(s, team, s.variants.game_point_value, GAME, totals, events)
