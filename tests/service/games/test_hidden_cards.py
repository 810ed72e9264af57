"""No payload shows a seat a card it has not seen (R7), across many random games.

Every view, action answer, live record and event stream is checked against the engine's
own unredacted events: a card may appear for a seat only if that seat was dealt it, or it
was cut, kicked or played; for a spectator, only if cut, kicked or played. Once the game
is over everything is public.
"""

from __future__ import annotations

import json
import random
import re

from service.engine import apply, new_game, parse_action

# each test starts what it needs (no module-wide service): pytest-xdist may run them on
# different workers (tests/conftest.py)
SPREAD_OVER_WORKERS = True
EXPECTED_S = 40  # seconds, the whole module: the order workers take it in (tests/conftest.py)

CARD = re.compile(r"^[2-9TJQKA][CDHS]$")


def cards_in(payload) -> set[str]:
    out: set[str] = set()
    stack = [payload]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
        elif isinstance(x, str) and CARD.match(x):
            out.add(x)
    return out


class Seen:
    """What each seat (and a spectator) may have seen, kept up to date action by action."""

    def __init__(self, players: int, seed: int) -> None:
        self.players = players
        self.state, events = new_game(players, seed)
        self.public: set[str] = set()
        self.own: list[set[str]] = [set() for _ in range(players)]
        self._add(events)

    def _add(self, events: list[dict]) -> None:
        for e in events:
            kind = e["type"]
            if kind == "game_started":
                self.public |= {c["card"] for r in e["cut"] for c in r}
            elif kind in ("deal", "run_deal"):
                for s in range(self.players):
                    self.own[s] |= set(e["cards"][s])
            elif kind in ("kick", "card_played"):
                self.public.add(e["card"])

    def play(self, action: str) -> None:
        self.state, events = apply(self.state, parse_action(action))
        self._add(events)

    def allowed(self, seat: int | None) -> set[str] | None:
        """None once the game is over: then everything is public."""
        if self.state.is_over:
            return None
        return self.public | (self.own[seat] if seat is not None else set())


def allowed(players: int, seed: int, actions: list[str], seat: int | None) -> set[str] | None:
    seen = Seen(players, seed)
    for a in actions:
        seen.play(a)
    return seen.allowed(seat)


def test_no_hidden_card_in_any_payload(api):
    rng = random.Random(2024)
    checked = 0
    for n in range(6):
        players = 4 if n % 2 else 2
        seed = rng.randrange(10**9)
        game_id, tokens = api.table(players, seed)
        seen = Seen(players, seed)

        def check(seat: int | None, payload: dict, seen: Seen = seen) -> None:
            nonlocal checked
            ok = seen.allowed(seat)
            if ok is not None:
                leaked = cards_in(payload) - ok
                assert not leaked, (seat, leaked)
            checked += 1

        for _ in range(2000):
            spectator = api.view(game_id).json
            check(None, spectator)
            if spectator["status"] == "finished":
                break
            seat = spectator["turn"]
            for s in range(players):
                view = api.view(game_id, tokens[s]).json
                check(s, view)
            if rng.random() < 0.1:
                for s in (None, seat):
                    tok = tokens[s] if s is not None else None
                    check(s, api.c.get(f"/games/{game_id}/record", headers=api.auth(tok)).json)
            mine = api.view(game_id, tokens[seat]).json
            action = rng.choice(mine["legal_actions"])
            r = api.act(game_id, tokens[seat], action)
            seen.play(action)
            check(seat, r.json)
        else:
            raise AssertionError("game did not finish")
    assert checked > 500


def test_live_event_stream_shows_each_seat_only_its_cards(api):
    from tests.service.games.test_retries_and_waiting import _parse_sse

    rng = random.Random(7)
    game_id, tokens = api.table(4, 77)
    played = []
    for _ in range(30):
        seat = api.view(game_id).json["turn"]
        a = rng.choice(api.view(game_id, tokens[seat]).json["legal_actions"])
        assert api.act(game_id, tokens[seat], a).status_code == 200
        played.append(a)
    for seat in (None, 0, 1, 2, 3):
        headers = api.auth(tokens[seat]) if seat is not None else {}
        resp = api.c.get(f"/games/{game_id}/events", headers=headers, buffered=False)
        it = iter(resp.response)
        chunks = []
        while True:
            chunk = next(it)
            if chunk.startswith(b":"):
                break
            chunks.append(chunk)
        resp.close()
        events, _ = _parse_sse(chunks)
        assert events
        payload = [json.loads(e["data"]) for e in events]
        leaked = cards_in(payload) - allowed(4, 77, played, seat)
        assert not leaked
