"""What one seat, or a spectator, may see (R7, R23).

Hidden information leaves the engine only through these functions: a seat sees its own
hand and the public table; a spectator sees the public table only. Nobody sees the stock,
the seed or another seat's cards until the game is over; then everything is public.
"""

from __future__ import annotations

from typing import Any

from .actions import action_name
from .cards import CARD_NAMES, SUITS, cards_of
from .game import Event, kick_points, legal_actions
from .state import OVER, State, team_of

_PRIVATE_DEALS = ("deal", "run_deal")


def _item(item: list[Any]) -> dict[str, Any]:
    name, team, points, detail = item
    out: dict[str, Any] = {"item": name, "team": team, "points": points}
    if name == "game":
        out["totals"] = list(detail)
    elif detail is not None:
        out["card"] = CARD_NAMES[detail]
    return out


def _trick_cards(leader: int, cards: list[int], players: int) -> list[dict[str, Any]]:
    return [{"seat": (leader + i) % players, "card": CARD_NAMES[c]} for i, c in enumerate(cards)]


def _view(s: State, seat: int | None) -> dict[str, Any]:
    n = s.players
    over = s.phase == OVER
    view: dict[str, Any] = {
        "players": n,
        "seat": seat,
        "team": None if seat is None else team_of(seat),
        "teams": [[t for t in range(n) if t & 1 == team] for team in (0, 1)],
        "variants": s.variants.to_dict(),
        "ply": s.ply,
        "phase": s.phase,
        "turn": None if over else s.turn,
        "decision": None if over else s.phase,
        "legal_actions": [],
        "hand_number": s.hand_no + 1,
        "dealer": s.dealer,
        "beggar": s.beggar,
        "beg": s.beg,
        "hand": None,
        "hand_sizes": [h.bit_count() for h in s.hands],
        "kicks": [{"card": CARD_NAMES[k], "points": kick_points(k, s.variants)} for k in s.kicks],
        "trump": SUITS[s.trump] if s.trump >= 0 else None,
        "trick": {"leader": s.leader, "cards": _trick_cards(s.leader, s.trick, n)},
        "tricks": [
            {"leader": lead, "cards": _trick_cards(lead, cards, n), "winner": w}
            for lead, cards, w in s.tricks
        ],
        "scores": list(s.scores),
        "target": s.variants.target,
        "hand_items": [_item(i) for i in s.items],
        "last_hand_items": [_item(i) for i in s.last_items],
        "winner": s.winner,
    }
    if seat is not None:
        view["hand"] = [CARD_NAMES[c] for c in cards_of(s.hands[seat])]
        if not over and s.turn == seat:
            view["legal_actions"] = [action_name(a) for a in legal_actions(s)]
    if over:
        view["hands"] = [[CARD_NAMES[c] for c in cards_of(h)] for h in s.hands]
        view["seed"] = s.seed
    return view


def seat_view(state: State, seat: int) -> dict[str, Any]:
    """Everything ``seat`` may know now: its own hand, the public table, the scores."""
    if not 0 <= seat < state.players:
        raise ValueError(f"no seat {seat} in a {state.players}-player game")
    return _view(state, seat)


def spectator_view(state: State) -> dict[str, Any]:
    """Public information only: no hand is shown until the game is over."""
    return _view(state, None)


def redact_event(event: Event, seat: int | None) -> Event:
    """``event`` as ``seat`` (None: a spectator) may see it while the game is live.

    Only deals carry hidden cards: another seat's cards become ``None``, with the count
    left in ``sizes``. The seed, which would reveal every deal, is dropped.
    """
    kind = event["type"]
    if kind in _PRIVATE_DEALS:
        cards = event["cards"]
        out = dict(event)
        out["cards"] = [c if s == seat else None for s, c in enumerate(cards)]
        out["sizes"] = [len(c) for c in cards]
        return out
    if kind == "game_started":
        out = dict(event)
        out.pop("seed", None)
        return out
    return event
