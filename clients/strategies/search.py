"""A determinized Monte Carlo player ("perfect information Monte Carlo").

For each decision in play it repeatedly deals the cards it cannot see in a way that
agrees with everything its seat has seen — its own hand, the kicks, every card played
this hand, and the voids the plays revealed (R14, R15) — builds an engine ``State`` from
that deal, and plays every legal card out to the end of the hand with a quick rollout
policy. The card with the best mean result for its team (the hand's point margin, plus a
bonus for winning the game) is played. Evaluating all candidate cards on the same deals
cancels most of the luck of the deal out of the comparison.

The decisions before play (stand or beg, give one or run) are searched the same way:
each sampled deal also fixes the stock, so running the pack, its kicks and the cards it
deals are simulated by the engine itself; the dealer a beggar faces is modelled by the
heuristic's rule on its sampled hand. Both options are scored on the same deals.

Sampling is information-set sampling with inference (``inference.py``): beyond the
voids, deals are drawn in proportion to their likelihood under a model of the other
players — the heuristic's rules — given what they did this hand: a beggar who stood
holds trumps worth standing on, one who begged does not, a dealer who gave one holds a
strong kicked suit (R8, R9), and each card another seat played is the one the heuristic
would have played from its sampled hand (R12–R16). Skat programs gained most from this
step; here it measured +0.023 (4 players) and +0.034 (2 players) points a decision over
voids only, at 100 samples a move (``bench/judge.py``, 10 games each). The deals come
from a Markov chain over the deals (``posterior.Chain``), which samples that posterior
where drawing and rejecting deals starved (docs/benchmarks.md).

``values`` gives every legal action's expected points, margin and chance of winning
(``ActionValue``) for the post-game analysis; ``choose`` is its argmax by ``score``.

It never reads hidden state: the only input is the seat view.

The inner loop — dealing a sample (``playout.Deals``) and playing it out
(``playout.rollout``) — lives in ``playout.py``, compiled with the engine by mypyc; this
module decides what to sample and how to score it.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from functools import lru_cache

from service.engine.actions import parse_action
from service.engine.cards import ALL_CARDS, parse_card
from service.engine.game import apply
from service.engine.state import OVER, PLAY, State
from service.engine.variants import Variants

from .base import View
from .inference import (
    MAX_TRIES,
    MISS_OPPONENT,
    PLAY_MISS_OPPONENT,
    Evidence,
    Play,
    evidence,
    likelihood,
    play_likelihood,
    plays,
)
from .knowledge import Knowledge, bits, read_view
from .outcome import win_chance as game_chance
from .playout import (
    WIN_VALUE,
    Deals,
    add_into,
    hand_points,
    play_hand,
    race,
    rollout,
    rollout_card,
    rollout_decision,
    value_deal,
    with_deal,
)
from .posterior import Chain, seat_evidence

__all__ = [
    "DEFAULT_MOVE_TIME",
    "WIN_VALUE",
    "ActionValue",
    "SearchStrategy",
    "determinize",
    "prepare",
    "rollout",
    "rollout_card",
    "rollout_decision",
    "sample",
    "sample_hands",
    "seen_state",
    "win_chance",
]

DEFAULT_MOVE_TIME = 0.1
_CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}
# What ``choose`` maximises: "margin", the hand's points margin plus a bonus for a game won
# in it; "win", the chance of winning the game (``outcome.win_chance`` on the scores the
# hand leaves), the margin only breaking ties.
_OBJECTIVES = ("margin", "win")
# Steps of the Markov chain (``posterior.Chain``) between two sampled deals, and before
# the first: see ``SearchStrategy``.
CHAIN_THIN = 10
CHAIN_BURN = 100


@dataclass(frozen=True)
class ActionValue:
    """What one legal action is worth to the seat's team, from the seat's view only.

    ``points`` and ``margin`` are the expected game points of this hand (kicks, give one,
    High, Low, Jack, Game) for the team, and team minus opponents; ``win`` the estimated
    chance the team wins the game (exact where the sampled hand ends the game, else
    ``win_chance`` on the scores the hand leaves); ``samples`` the sampled deals behind
    the means. ``score`` is what ``SearchStrategy.choose`` maximises.
    """

    points: float
    margin: float
    win: float
    samples: int
    score: float = 0.0


class SearchStrategy:
    """Determinized Monte Carlo over the rules engine, within a per-move budget.

    ``move_time`` seconds a move (default 0.1), or, when ``simulations`` is given, that
    many sampled deals a move whatever the time (reproducible, for tests and benches).
    ``clock`` is what the seconds count: ``"wall"`` (a house bot answering in time) or
    ``"cpu"``, the deciding thread's CPU time (benches on a shared machine, where wall
    time would hand a loaded run fewer samples). ``epsilon`` is the rollout policy's share
    of random moves. ``infer`` reads the decisions before play into the sampling, and
    ``infer_plays`` the cards the others played (``inference``); off, only the voids are.
    ``recent_plays`` (0: all) reads only that many of the others' latest cards, and
    ``partner_plays`` whether the partner's are read at all: each card read costs a
    heuristic decision per sampled deal tried, and a partner that is not the heuristic
    gets most deals rejected. Off by default: reading only the opponents' cards leaves a
    4-player move several times the samples and won more duplicate games against the
    heuristic than reading every card or none (docs/benchmarks.md, bench/strength.py);
    2-player games have no partner. ``objective`` is what a move maximises: ``"margin"``
    (the hand's margin, plus a bonus for a game won in it) or ``"win"`` (the chance of
    the game from the scores the hand leaves, ``outcome.win_chance``; the margin breaks
    ties), for the strength bench to compare (``search~objective=win``). ``chain`` is
    the number of steps of the Markov chain over deals (``posterior.Chain``) between two
    sampled deals, after ``burn`` steps from a deal drawn by rejection; ``chain=0`` draws
    every deal by rejection instead (``MAX_TRIES`` a deal), as before the chain.
    ``bid_miss`` and ``play_miss`` are what an opponent's bid and card the model
    contradicts leave of a deal's likelihood (``inference``); the search before the
    chain is ``search~chain=0~bid_miss=0.05~play_miss=0.2``.
    """

    def __init__(
        self,
        seed: int | None = None,
        move_time: float = DEFAULT_MOVE_TIME,
        simulations: int | None = None,
        epsilon: float = 0.0,
        clock: str = "wall",
        infer: bool = True,
        infer_plays: bool = True,
        recent_plays: int = 0,
        partner_plays: bool = False,
        objective: str = "margin",
        chain: int = CHAIN_THIN,
        burn: int = CHAIN_BURN,
        bid_miss: float = MISS_OPPONENT,
        play_miss: float = PLAY_MISS_OPPONENT,
    ) -> None:
        if clock not in _CLOCKS:
            raise ValueError(f"clock must be one of {sorted(_CLOCKS)}, not {clock!r}")
        if objective not in _OBJECTIVES:
            raise ValueError(f"objective must be one of {_OBJECTIVES}, not {objective!r}")
        self.rng = random.Random(seed)
        self.move_time = move_time
        self.simulations = simulations
        self.epsilon = epsilon
        self.clock = clock
        self._now = _CLOCKS[clock]
        self.infer = bool(infer)
        self.infer_plays = bool(infer_plays)
        self.recent_plays = max(int(recent_plays), 0)
        self.partner_plays = bool(partner_plays)
        self.objective = objective
        self.chain = max(int(chain), 0)
        self.burn = max(int(burn), 0)
        self.bid_miss = float(bid_miss)
        self.play_miss = float(play_miss)
        self._variants: dict[tuple, Variants] = {}

    def choose(self, view: View, legal: list[str]) -> str:
        """The legal action of highest ``score`` in ``values`` (the first of equals)."""
        if len(legal) == 1:
            return legal[0]
        vals = self.values(view, legal)
        return max(legal, key=lambda a: vals[a].score)

    def values(self, view: View, legal: list[str]) -> dict[str, ActionValue]:
        """Every legal action valued from the seat's information only (its view).

        All actions are valued on the same sampled deals, so their differences carry
        little of the deal's luck. With ``simulations`` set the answer is reproducible
        for a given ``seed`` (and the view).
        """
        k = read_view(view)
        if view.get("decision") != PLAY:
            actions = [parse_action(a) for a in legal]
        else:
            actions = [parse_card(a) for a in legal]
        stats = self.evaluate_all(k, view, actions)
        return dict(zip(legal, stats))

    def evaluate(self, k: Knowledge, view: View, cards: list[int]) -> dict[int, float]:
        """Mean rollout value (``score``) of each action over sampled deals."""
        return {c: v.score for c, v in zip(cards, self.evaluate_all(k, view, cards))}

    def evaluate_all(self, k: Knowledge, view: View, actions: list[int]) -> list[ActionValue]:
        """Each action (a card, or a decision before play) valued over the same sampled
        deals, within the budget."""
        template = seen_state(k, view, self._variants_of(view))
        deals = prepare(k)
        ev = evidence(k, view, self.bid_miss) if self.infer else []
        ps = self._plays_read(k)
        team = k.team
        m = len(actions)
        points = [0.0] * m
        margin = [0.0] * m
        win = [0.0] * m
        bonus = [0.0] * m
        chance = [0.0] * m
        by_chance = self.objective == "win"
        now = self._now
        deadline = now() + self.move_time
        n = 0
        chain: Chain | None = None
        chained = self.chain and (ev or ps)
        by_seat = seat_evidence(ev, ps, deals.played_by) if chained else []
        allowed = [ALL_CARDS & ~f for f in k.forbidden]
        # A deal in play is played out by a fixed policy (no random moves, ``epsilon`` 0)
        # and only its hands matter — not the stock, which nobody draws from before the
        # next hand — so a deal the chain gives again (a proposal refused, a late trick's
        # few possible hands) is valued once and its values summed again.
        memo: dict[tuple[int, ...], list[float]] | None = (
            {} if not by_chance and not self.epsilon and template.phase == PLAY else None
        )
        sums = [0.0] * (4 * m)  # per action: points, margin, win, bonus (``value_deal``)
        while True:
            if chained:
                if chain is None:
                    hands, stock = draw(k, deals, self.rng, ev, ps, template.variants)
                    chain = Chain(k.seat, hands, stock, allowed, by_seat, k.trump,
                                  template.variants)
                    for _ in range(self.burn):
                        chain.step(self.rng)
                hands, stock = chain.deal(self.rng, self.chain)
                state = with_deal(template, hands, stock, deals.played_by, self.rng)
            else:
                state = sample(k, template, deals, self.rng, ev, ps)
            if by_chance:
                self._score_by_chance(state, actions, team, points, margin, win, bonus, chance)
            elif memo is not None:
                key = tuple(state.hands)
                got = memo.get(key)
                if got is None:
                    got = memo[key] = value_deal(state, actions, team, self.rng, self.epsilon)
                add_into(sums, got)
            else:
                add_into(sums, value_deal(state, actions, team, self.rng, self.epsilon))
            n += 1
            if self.simulations is not None:
                if n >= self.simulations:
                    break
            elif now() >= deadline:
                break
        if by_chance:
            score = [(chance[i] + margin[i] / 100) / n for i in range(m)]
        else:
            points = sums[0::4]
            margin = sums[1::4]
            win = sums[2::4]
            score = [(margin[i] + sums[4 * i + 3]) / n for i in range(m)]
        return [ActionValue(points[i] / n, margin[i] / n, win[i] / n, n, score[i])
                for i in range(m)]

    def _score_by_chance(
        self, state: State, actions: list[int], team: int, points: list[float],
        margin: list[float], win: list[float], bonus: list[float], chance: list[float],
    ) -> None:
        """One deal's actions summed for the ``"win"`` objective (the chance of the game
        from the scores a hand leaves, ``outcome.win_chance``)."""
        for i, a in enumerate(actions):
            s, _ = apply(state, a, None, False)
            hand_no = s.hand_no
            end = play_hand(s, self.rng, self.epsilon)
            ours, theirs = hand_points(end, hand_no, team)
            points[i] += ours
            margin[i] += ours - theirs
            if end.phase == OVER:
                won = end.winner == team
                win[i] += won
                chance[i] += won
                if end.hand_no == hand_no:
                    bonus[i] += WIN_VALUE if won else -WIN_VALUE
            else:
                win[i] += win_chance(end.scores, team, end.variants.target)
                v = end.variants
                chance[i] += game_chance(end.scores[team], end.scores[1 - team],
                                         v.target, end.players, v.game_point_value)

    def _plays_read(self, k: Knowledge) -> list[Play]:
        """The others' cards this hand that the sampling weighs (most recent first)."""
        if not self.infer_plays or k.trump < 0:
            return []
        ps = plays(k, self.play_miss)
        if not self.partner_plays:
            ps = [p for p in ps if p.seat != k.partner]
        return ps[: self.recent_plays] if self.recent_plays else ps

    def _variants_of(self, view: View) -> Variants:
        raw = view.get("variants") or {}
        key = tuple(sorted(raw.items()))
        v = self._variants.get(key)
        if v is None:
            v = self._variants[key] = Variants.from_dict(raw)
        return v


# --- the game beyond this hand ----------------------------------------------------------


def win_chance(scores: list[int], team: int, target: int) -> float:
    """The chance ``team`` wins from ``scores``, each point after this one a fair coin.

    A race to ``target``: team needs ``a`` points, the opponents ``b``; with every point
    equally likely to go either way the team wins with the negative binomial tail below.
    Points come in clumps (hang jack, kicks), so this is a rough guide to the score's
    worth, not a model of the game; it only fills ``ActionValue.win`` where a sampled
    hand does not end the game.
    """
    return _race(max(target - scores[team], 0), max(target - scores[1 - team], 0))


@lru_cache(maxsize=4096)
def _race(a: int, b: int) -> float:
    """The chance of taking ``a`` fair points before the other side takes ``b``
    (``playout.race``, where the search's inner loop reads it compiled)."""
    return race(a, b)


# --- sampling the unseen cards ------------------------------------------------------------


def prepare(k: Knowledge) -> Deals:
    """The deals of the unseen cards that agree with ``k``, ready to sample (once a move).

    Every other seat gets exactly ``hand_sizes[seat]`` cards, none it is known not to hold
    (``Knowledge.forbidden``, the voids its plays revealed); the rest go to the stock.
    """
    n = k.players
    unseen = bits(k.unseen)
    allowed = [
        sum(1 << s for s in range(n) if s != k.seat and not k.forbidden[s] >> c & 1)
        for c in unseen
    ]
    room = [0 if s == k.seat else k.hand_sizes[s] for s in range(n)]
    return Deals(k.seat, k.hand, unseen, allowed, room, list(k.played_by))


def sample_hands(
    k: Knowledge, rng: random.Random, deals: Deals | None = None
) -> tuple[list[int], list[int]]:
    """Deal the unseen cards: hands (masks, the seat's own as it is) and the stock.

    ``Deals.deal`` almost always finds a consistent deal at once; if it paints itself into
    a corner (rare: only when many voids are known) a randomized bipartite matching does.
    """
    deals = deals or prepare(k)
    for _ in range(20):
        dealt = deals.deal(rng)
        if dealt is not None:
            return dealt
    unseen = bits(k.unseen)
    others = [s for s in range(k.players) if s != k.seat]
    allowed = {c: [s for s in others if not k.forbidden[s] >> c & 1] for c in unseen}
    room = {s: k.hand_sizes[s] for s in others}
    stock_room = len(unseen) - sum(room.values())
    return _finish(k, _matching_deal(unseen, allowed, room, stock_room, rng), rng)


_STOCK = -1


def _matching_deal(
    unseen: list[int],
    allowed: dict[int, list[int]],
    room: dict[int, int],
    stock_room: int,
    rng: random.Random,
) -> dict[int, int]:
    """A consistent deal by augmenting paths (Kuhn), with random orders for variety."""
    slots: list[int] = [s for s, r in room.items() for _ in range(r)] + [_STOCK] * stock_room
    slot_of: dict[int, int] = {}  # card -> slot index
    card_in: dict[int, int] = {}  # slot index -> card

    def fits(c: int, i: int) -> bool:
        return slots[i] == _STOCK or slots[i] in allowed[c]

    def place(c: int, seen: set[int]) -> bool:
        order = list(range(len(slots)))
        rng.shuffle(order)
        for i in order:
            if i in seen or not fits(c, i):
                continue
            seen.add(i)
            if i not in card_in or place(card_in[i], seen):
                card_in[i] = c
                slot_of[c] = i
                return True
        return False

    cards = unseen[:]
    rng.shuffle(cards)
    for c in cards:
        if not place(c, set()):
            raise ValueError("no deal of the unseen cards agrees with the revealed voids")
    return {c: slots[i] for c, i in slot_of.items()}


def _finish(k: Knowledge, dealt: dict[int, int], rng: random.Random) -> tuple[list[int], list[int]]:
    hands = [0] * k.players
    hands[k.seat] = k.hand
    stock = []
    for c, s in dealt.items():
        if s == _STOCK:
            stock.append(c)
        else:
            hands[s] |= 1 << c
    rng.shuffle(stock)
    return hands, stock


def determinize(k: Knowledge, view: View, variants: Variants, rng: random.Random) -> State:
    """An engine state for one sampled deal that agrees with everything the seat saw."""
    ps = plays(k) if k.trump >= 0 else []
    return sample(k, seen_state(k, view, variants), prepare(k), rng, evidence(k, view), ps)


def sample(
    k: Knowledge,
    template: State,
    deals: Deals,
    rng: random.Random,
    ev: list[Evidence] | None = None,
    ps: list[Play] | None = None,
) -> State:
    """``template`` (``seen_state``) with one deal of the hidden cards from ``deals``.

    With evidence (``inference``: the bidding ``ev``, the cards played ``ps``) deals are
    drawn until one is accepted with probability its likelihood; after ``MAX_TRIES`` the
    likeliest drawn is used.
    """
    if not ev and not ps:
        state = deals.sample(template, rng)
        if state is None:  # the quick deal got stuck: the exact one
            hands, stock = sample_hands(k, rng, deals)
            state = with_deal(template, hands, stock, deals.played_by, rng)
        return state
    hands, stock = draw(k, deals, rng, ev or [], ps or [], template.variants)
    return with_deal(template, hands, stock, deals.played_by, rng)


def draw(
    k: Knowledge,
    deals: Deals,
    rng: random.Random,
    ev: list[Evidence],
    ps: list[Play],
    variants: Variants,
) -> tuple[list[int], list[int]]:
    """A deal (hands, stock) by rejection: drawn from ``deals`` until one is kept with
    probability its likelihood, or the likeliest of ``MAX_TRIES``."""
    best: tuple[list[int], list[int]] | None = None
    best_w = -1.0
    for _ in range(MAX_TRIES):
        dealt = deals.deal(rng)
        if dealt is None:
            dealt = sample_hands(k, rng, deals)
        u = rng.random()
        w = likelihood(ev, dealt[0], deals.played_by) if ev else 1.0
        if ps and w >= u:
            w *= play_likelihood(ps, dealt[0], k.trump, variants, u / w)
        if w >= u:
            return dealt
        if w > best_w:
            best, best_w = dealt, w
    assert best is not None
    return best


def seen_state(k: Knowledge, view: View, variants: Variants) -> State:
    """The game as the seat sees it, as an engine state: everything public filled in, the
    hidden cards still to be dealt (``Deals``)."""
    s = State.__new__(State)
    s.players = k.players
    s.seed = 0
    s.variants = variants
    s.first_dealer = k.dealer
    s.ply = view.get("ply", 0)
    s.scores = list(k.scores)
    s.hand_no = view.get("hand_number", 1) - 1
    s.deal_no = 0
    s.dealer = k.dealer
    s.phase = view["decision"]
    s.turn = view["turn"]
    s.hands = [0] * k.players
    s.dealt = [0] * k.players
    s.stock = []
    s.kicks = list(k.kicks)
    s.beg = view.get("beg")
    s.trump = k.trump
    s.leader = k.leader
    s.trick = list(k.trick)
    s.tricks = [[lead, cards, w] for lead, cards, w in k.tricks]
    s.items = []
    s.last_items = []
    s.winner = None
    return s
