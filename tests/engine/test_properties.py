"""Property-based tests: invariants of random seeded games played by random legal actions.

Every test draws a game (2 or 4 players, R1; a seed; a seed for the random choices; a random
combination of house-rule variants, including small targets so that kicks and give-ones can
end a game, R22) and plays it to the end with random legal actions, checking its invariant
after EVERY action. Rule ids are those of ``docs/rules.md``.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from service.engine import (
    BEG,
    CARD_NAMES,
    OVER,
    RUN_PACK,
    IllegalAction,
    State,
    Variants,
    apply,
    legal_actions,
    new_game,
    redact_event,
    replay,
    seat_view,
    spectator_view,
)

# a few long tests: pytest-xdist may run them on different workers (tests/conftest.py)
SPREAD_OVER_WORKERS = True

CARD_RE = re.compile(r"\b[2-9TJQKA][CDHS]\b")

variants_strategy = st.builds(
    Variants,
    target=st.sampled_from([1, 2, 3, 4, 7, 10, 14]),
    game_point_value=st.sampled_from([1, 2]),
    game_tie=st.sampled_from(["nobody", "non_dealer"]),
    give_one_at_target_minus_one=st.booleans(),
    under_trumping=st.booleans(),
    void_may_discard=st.booleans(),
    pack_runs_out=st.sampled_from(["one_by_one", "redeal"]),
    tobago_kick=st.booleans(),
)
games = st.tuples(
    st.sampled_from([2, 4]),
    st.integers(min_value=0, max_value=2**63 - 1),
    st.integers(min_value=0, max_value=2**32),
    st.one_of(st.none(), variants_strategy),
    st.booleans(),  # True: beg and run the pack whenever allowed (R9-R11 runs, redeals)
)
# Seed 0 with target 1: the first kick scores and ends the game at creation (R6, R22).
KICK_ENDS_GAME = (4, 0, 0, Variants(target=1), False)
# A 4-player game whose pack runs out and is redealt by the same dealer (R11).
REDEAL_GAME = (4, 8, 0, None, True)


def examples(n: int):
    """Hypothesis settings for ``n`` random games, plus the two hand-picked games."""

    def wrap(test):
        test = example(REDEAL_GAME)(example(KICK_ENDS_GAME)(test))
        return settings(
            max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow]
        )(test)

    return wrap


@dataclass
class Step:
    before: State
    action: int
    after: State
    events: list[dict]  # the events this action caused


@dataclass
class Game:
    players: int
    seed: int
    variants: Variants | None
    start: State
    start_events: list[dict]
    steps: list[Step]

    @property
    def final(self) -> State:
        return self.steps[-1].after if self.steps else self.start

    @property
    def actions(self) -> list[int]:
        return [s.action for s in self.steps]

    def states(self) -> Iterator[State]:
        yield self.start
        for s in self.steps:
            yield s.after

    def events(self) -> list[dict]:
        out = list(self.start_events)
        for s in self.steps:
            out.extend(s.events)
        return out


def play_game(
    players: int, seed: int, choice_seed: int, variants: Variants | None, run_pack: bool = False
) -> Game:
    """Play a whole game with random legal actions (or, with ``run_pack``, always begging
    and running the pack when that is legal, to exercise R9-R11)."""
    rng = random.Random(choice_seed)
    state, events = new_game(players, seed, variants)
    game = Game(players, seed, variants, state, events, [])
    while state.phase != OVER:
        legal = legal_actions(state)
        if run_pack and BEG in legal:
            action = BEG
        elif run_pack and RUN_PACK in legal:
            action = RUN_PACK
        else:
            action = rng.choice(legal)
        after, more = apply(state, action)
        game.steps.append(Step(state, action, after, more))
        state = after
        assert len(game.steps) < 20_000, "game does not end"
    return game


def bits(mask: int) -> list[int]:
    return [c for c in range(52) if mask >> c & 1]


# --- (1) conservation of the 52 cards ---------------------------------------------------------


def check_conservation(s: State) -> None:
    """The 52 cards are conserved (R2, R5, R6, R9, R11).

    Precisely: at every step, the multiset made of
      - every card in every seat's hand (``hands``, one 52-bit mask per seat),
      - every card in the finished tricks of the current deal (``tricks[i][1]``),
      - every card of the current, unfinished trick (``trick``),
      - every card turned up in the current deal (``kicks``: the first kick and, in a run,
        the earlier kicks that were set aside out of play but still sit in ``kicks``), and
      - every card not yet dealt (``stock``; with 2 players most of the pack stays there)
    holds each of the 52 cards exactly once: no card is missing, none is duplicated. Also
    a hand is the part of what the seat was ``dealt`` (R5, R9) that it has not played, and
    what every seat was dealt is disjoint. This holds after every action, across runs of
    the pack, redeals by the same dealer (R11) and new hands, and when the game is over.
    """
    pile: list[int] = []
    for h in s.hands:
        pile.extend(bits(h))
    for _leader, cards, _winner in s.tricks:
        pile.extend(cards)
    pile.extend(s.trick)
    pile.extend(s.kicks)
    pile.extend(s.stock)
    assert sorted(pile) == list(range(52)), (
        f"cards not conserved: {len(pile)} cards, missing "
        f"{sorted(set(range(52)) - set(pile))}, duplicated "
        f"{sorted(c for c in set(pile) if pile.count(c) > 1)}"
    )
    union = 0
    for seat, (dealt, hand) in enumerate(zip(s.dealt, s.hands)):
        assert union & dealt == 0, "a card was dealt to two seats"
        union |= dealt
        assert hand & ~dealt == 0, f"seat {seat} holds a card it was never dealt"
    played = 0
    for _leader, cards, _winner in s.tricks:
        for c in cards:
            played |= 1 << c
    for c in s.trick:
        played |= 1 << c
    held = 0
    for h in s.hands:
        held |= h
    assert held | played == union, "dealt cards are neither held nor played"


@given(games)
@examples(200)
def test_cards_conserved_at_every_step_R2_R5_R9_R11(g):
    game = play_game(*g)
    for s in game.states():
        check_conservation(s)


# --- (2) only legal actions; illegal ones refused without change (R23) -------------------------


def _frozen(s: State) -> str:
    return json.dumps(s.to_dict(), sort_keys=True)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(KICK_ENDS_GAME, random.Random(0))
@example(REDEAL_GAME, random.Random(0))
@given(games, st.randoms(use_true_random=False))
def test_only_legal_actions_and_illegal_ones_refused_unchanged_R14_R23(g, rng):
    """Each applied action is in ``legal_actions``; a random action that is not, and any
    action by a seat whose turn it is not, raises ``IllegalAction`` naming a rule
    (``"R14: ..."``) and leaves the state exactly as it was (R23)."""
    game = play_game(*g)
    for step in game.steps:
        s = step.before
        legal = legal_actions(s)
        assert legal == sorted(set(legal)) and legal, "legal actions sorted, unique, non-empty"
        assert step.action in legal
        assert legal_actions(s, s.turn) == legal
        for other in range(game.players):
            if other != s.turn:
                assert legal_actions(s, other) == []
        snapshot = _frozen(s)
        illegal = [a for a in range(56) if a not in legal]
        tries = [*rng.sample(illegal, min(3, len(illegal))), 56, -1, rng.randrange(60, 1000)]
        for bad in tries:
            try:
                apply(s, bad)
            except IllegalAction as e:
                assert re.fullmatch(r"R\d+", e.rule), e.rule
                assert str(e).startswith(e.rule + ": ")
                # R23: the refusal reveals nothing: it names no card but the one tried
                named = set(CARD_RE.findall(str(e))) - {CARD_NAMES[bad] if 0 <= bad < 52 else ""}
                assert not named, f"refusal names hidden cards: {e}"
            else:
                raise AssertionError(f"illegal action {bad} accepted in {s!r}")
            assert _frozen(s) == snapshot, "a refused action changed the state"
        wrong_seat = rng.choice([x for x in range(game.players) if x != s.turn])
        try:
            apply(s, step.action, seat=wrong_seat)
        except IllegalAction as e:
            assert e.rule == "R23"
        else:
            raise AssertionError("an out-of-turn action was accepted")
        assert _frozen(s) == snapshot
        # the legal action itself does not change the state it was applied to either
        apply(s, step.action, seat=s.turn)
        assert _frozen(s) == snapshot
    final = game.final
    snapshot = _frozen(final)
    assert legal_actions(final) == []
    for a in (0, 51, 52, 53, 54, 55):
        try:
            apply(final, a)
        except IllegalAction as e:
            assert e.rule == "R22"
        else:
            raise AssertionError("an action was accepted after the game was over")
    assert _frozen(final) == snapshot


# --- (3) views never leak hidden cards (R7, R23) ------------------------------------------------


def _card_names(obj: object) -> set[str]:
    return set(CARD_RE.findall(json.dumps(obj)))


def _leaks(obj: object, hidden: set[str], where: str) -> None:
    shown = _card_names(obj) & hidden
    assert not shown, f"{where} shows hidden cards {sorted(shown)}: {obj}"


@given(games)
@examples(40)
def test_views_never_show_hidden_cards_R7_R23(g):
    """While the game is live, a seat's view and every event of the current deal redacted
    for it (``redact_event(e, seat)``) show none of the cards now held by the other seats,
    and no card of the stock; the spectator's show no card of any hand and none of the
    stock. Excepted, because they were public when they happened: ``last_hand_items`` (the
    previous hand's High/Low/Jack cards) and the kicks of an earlier deal of this hand
    (after an R11 redeal those cards are back in the new pack). The seed, which would
    reveal every deal, is never shown while the game is live."""
    game = play_game(*g)
    for e in game.events():
        if e["type"] == "game_started":
            assert "seed" not in redact_event(e, None)
            for seat in range(game.players):
                assert "seed" not in redact_event(e, seat)
        if e["type"] in ("deal", "run_deal"):  # every deal: a seat sees only its own cards
            assert all(c is None for c in redact_event(e, None)["cards"])
            for seat in range(game.players):
                shown = redact_event(e, seat)["cards"]
                assert shown[seat] == e["cards"][seat]
                assert all(c is None for x, c in enumerate(shown) if x != seat)
    history: list[dict] = []
    deal_start = 0  # index in history of the current deal's "deal" event
    earlier_kicks: set[str] = set()  # kicks of earlier deals of the current hand
    kicks_this_deal: set[str] = set()
    states = list(game.states())
    per_step_events = [game.start_events] + [s.events for s in game.steps]
    for s, new in zip(states, per_step_events):
        for e in new:
            if e["type"] == "deal":
                if e["deal"] == 0:
                    earlier_kicks = set()
                else:
                    earlier_kicks |= kicks_this_deal
                kicks_this_deal = set()
                deal_start = len(history)
            elif e["type"] == "kick":
                kicks_this_deal.add(e["card"])
            history.append(e)
        if s.phase == OVER:  # R7: once the game is over, every hand may be shown
            for seat in range(game.players):
                assert seat_view(s, seat)["hands"] == spectator_view(s)["hands"]
            assert len(spectator_view(s)["hands"]) == game.players
            continue
        stock = {CARD_NAMES[c] for c in s.stock}
        held = [{CARD_NAMES[c] for c in bits(h)} for h in s.hands]
        current = history[deal_start:]
        for seat in [None, *range(game.players)]:
            hidden = set(stock)
            for other, cards in enumerate(held):
                if other != seat:
                    hidden |= cards
            view = seat_view(s, seat) if seat is not None else spectator_view(s)
            assert "seed" not in view and "hands" not in view
            view = dict(view)
            view.pop("last_hand_items")
            view["hand_items"] = [
                i for i in view["hand_items"]
                if not (i["item"] == "kick" and i.get("card") in earlier_kicks)
            ]  # fmt: skip
            _leaks(view, hidden, f"view of seat {seat}")
            for e in current:
                _leaks(redact_event(e, seat), hidden, f"event redacted for seat {seat}")
            if seat is not None:
                assert set(seat_view(s, seat)["hand"]) == held[seat]


# --- (4) scores never fall; (5) the game ends exactly at the target (R22) --------------------


@given(games)
@examples(300)
def test_scores_never_fall_R22(g):
    game = play_game(*g)
    prev = game.start.scores
    assert min(prev) >= 0
    for s in game.states():
        assert len(s.scores) == 2
        assert s.scores[0] >= prev[0] and s.scores[1] >= prev[1], f"{prev} -> {s.scores}"
        prev = s.scores
    for e in game.events():
        if e["type"] == "score":
            assert e["points"] >= 0


@given(games)
@examples(300)
def test_game_ends_exactly_when_a_team_reaches_target_R22(g):
    """The game is over exactly when a team has reached the target; never both teams;
    ``winner`` is that team; in the event stream, the first score reaching the target is
    followed by ``game_over`` and nothing else (nothing after is scored)."""
    game = play_game(*g)
    target = (game.variants or Variants()).target
    for s in game.states():
        reached = [t for t in (0, 1) if s.scores[t] >= target]
        assert len(reached) <= 1, f"both teams at the target: {s.scores}"
        if reached:
            assert s.phase == OVER and s.winner == reached[0] and s.turn == -1
        else:
            assert s.phase != OVER and s.winner is None
    final = game.final
    assert final.phase == OVER and final.scores[final.winner] >= target
    events = game.events()
    running = [0, 0]
    for i, e in enumerate(events):
        if e["type"] == "score":
            if e["team"] is not None:
                running[e["team"]] += e["points"]
            assert e["scores"] == running
            if max(running) >= target:
                assert events[i + 1 :] == [
                    {"type": "game_over", "winner": e["team"], "scores": running}
                ]
                break
        assert e["type"] != "game_over", "game over before any team reached the target"
    else:
        raise AssertionError("no score reached the target")
    assert running == final.scores


def test_a_kick_can_end_the_game_before_any_card_is_played_R6_R22():
    """With target 1 and a first kick that scores, the game is over at creation; the state
    of that finished game must still round-trip through JSON and have views (R6, R22)."""
    for seed in range(500):
        s, events = new_game(4, seed, Variants(target=1))
        if s.phase == OVER:
            break
    else:
        raise AssertionError("no scoring first kick in 500 seeds")
    assert s.winner == s.dealer & 1 and events[-1]["type"] == "game_over"
    assert State.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    assert spectator_view(s)["winner"] == s.winner
    assert seat_view(s, 0)["winner"] == s.winner


# --- (6) replay; (7) JSON round trip --------------------------------------------------------


@given(games)
@examples(150)
def test_game_replays_identically_from_seed_and_actions_R4_R5(g):
    game = play_game(*g)
    state, events = replay(game.players, game.seed, game.variants, game.actions)
    assert state == game.final
    assert state.to_dict() == game.final.to_dict()
    assert events == game.events()
    # a prefix replays to the state reached at that point
    k = len(game.steps) // 2
    mid, mid_events = replay(game.players, game.seed, game.variants, game.actions[:k])
    expect = game.steps[k - 1].after if k else game.start
    assert mid == expect
    assert mid_events == (game.start_events + [e for s in game.steps[:k] for e in s.events])


@given(games)
@examples(150)
def test_state_survives_json_round_trip_at_every_step(g):
    """The state is plain data: ``json.dumps(state.to_dict())`` and back through
    ``State.from_dict`` is equal to the original at every step, and applying the next action
    to the round-tripped state gives the same state and the same events."""
    game = play_game(*g)
    for s in game.states():
        d = json.loads(json.dumps(s.to_dict()))
        back = State.from_dict(d)
        assert back == s
        assert back.to_dict() == s.to_dict()
    for step in game.steps:
        back = State.from_dict(json.loads(json.dumps(step.before.to_dict())))
        after, events = apply(back, step.action)
        assert after == step.after
        assert events == step.events
        assert legal_actions(back) == legal_actions(step.before)
