"""Reference strategies: always legal, the search bot's sampler is faithful to the seat's
knowledge (and only to it), strategies load by name, and heuristic beats random."""

from __future__ import annotations

import random
import textwrap
from collections.abc import Iterator

import pytest

from clients.strategies import (
    HeuristicStrategy,
    RandomStrategy,
    SearchStrategy,
    Strategy,
    get_strategy,
)
from clients.strategies.duel import duplicate_pair
from clients.strategies.heuristic import follow, lead, stands
from clients.strategies.inference import (
    PLAY_MISS_PARTNER,
    evidence,
    likelihood,
    play_likelihood,
    plays,
)
from clients.strategies.knowledge import Knowledge, bits, mask, read_view
from clients.strategies.search import (
    _matching_deal,
    determinize,
    prepare,
    rollout_decision,
    sample_hands,
)
from service.engine import (
    GIVE_ONE_OR_RUN,
    OVER,
    PLAY,
    STAND_OR_BEG,
    action_name,
    apply,
    legal_actions,
    new_game,
    parse_action,
    seat_view,
)
from tests.clients.variant_sets import VARIANT_SETS


def random_states(count: int, seed: int) -> list:
    """States from random games at random points: 2 and 4 players, every decision kind,
    every variant set; random play reveals plenty of voids."""
    rng = random.Random(seed)
    states = []
    while len(states) < count:
        players = rng.choice((2, 4))
        state, _ = new_game(players, rng.randrange(10**9), rng.choice(VARIANT_SETS))
        stops = sorted(rng.sample(range(200), 6))
        ply = 0
        while state.phase != OVER and stops:
            if ply == stops[0]:
                stops.pop(0)
                states.append(state)
            state, _ = apply(state, rng.choice(legal_actions(state)))
            ply += 1
    return states


STATES = random_states(240, seed=11)


def test_states_cover_every_decision_and_both_table_sizes():
    kinds = {(s.players, s.phase) for s in STATES}
    for players in (2, 4):
        for phase in (STAND_OR_BEG, GIVE_ONE_OR_RUN, PLAY):
            assert (players, phase) in kinds


@pytest.mark.parametrize(
    "strategy",
    [RandomStrategy(seed=1), HeuristicStrategy(), SearchStrategy(seed=1, simulations=3)],
    ids=["random", "heuristic", "search"],
)
def test_every_strategy_returns_a_legal_action(strategy: Strategy):
    for state in STATES:
        view = seat_view(state, state.turn)
        legal = view["legal_actions"]
        assert legal == [action_name(a) for a in legal_actions(state)]
        assert strategy.choose(view, list(legal)) in legal


def play_states():
    return [s for s in STATES if s.phase == PLAY]


def test_revealed_voids_are_sound():
    """What the seat infers about others never contradicts their real hands (R14, R15),
    and random play does reveal voids, so the check has teeth."""
    revealed = 0
    for state in play_states():
        k = read_view(seat_view(state, state.turn))
        for s in range(state.players):
            if s != k.seat:
                assert state.hands[s] & k.forbidden[s] == 0
                revealed += k.forbidden[s] != 0
    assert revealed > 20


def test_sampler_deals_only_unseen_cards_consistently():
    rng = random.Random(5)
    for state in play_states():
        seat = state.turn
        view = seat_view(state, seat)
        k = read_view(view)
        seen = k.hand | k.played | k.kicked
        for _ in range(5):
            hands, stock = sample_hands(k, rng)
            assert hands[seat] == state.hands[seat]
            stock_mask = sum(1 << c for c in stock)
            assert len(stock) == len(state.stock) and stock_mask.bit_count() == len(stock)
            everything = stock_mask
            for s in range(state.players):
                assert hands[s].bit_count() == view["hand_sizes"][s]
                assert everything & hands[s] == 0  # no card dealt twice
                everything |= hands[s]
                if s != seat:
                    assert hands[s] & seen == 0
                    assert hands[s] & k.forbidden[s] == 0
            assert everything == k.unseen | k.hand


def test_determinized_state_matches_the_view():
    rng = random.Random(6)
    for state in play_states()[:40]:
        view = seat_view(state, state.turn)
        k = read_view(view)
        sample = determinize(k, view, state.variants, rng)
        assert legal_actions(sample) == legal_actions(state)
        public = ("players", "dealer", "trump", "leader", "trick", "tricks", "kicks", "scores")
        for name in public:
            assert getattr(sample, name) == getattr(state, name)
        assert sample.hands[k.seat] == state.hands[k.seat]
        assert [h.bit_count() for h in sample.hands] == [h.bit_count() for h in state.hands]


def test_matching_fallback_respects_constraints():
    """The exact matching (used when greedy dealing gets stuck) also honours the voids."""
    rng = random.Random(3)
    unseen = list(range(12))
    # seat 1 may hold only cards 0-3; seat 2 anything but 0-3; seat 3 only 8-11
    allowed = {c: [s for s, ok in ((1, c < 4), (2, c >= 4), (3, c >= 8)) if ok] for c in unseen}
    for _ in range(20):
        deal = _matching_deal(unseen, allowed, {1: 4, 2: 3, 3: 4}, 1, rng)
        assert sorted(deal) == unseen
        for c, s in deal.items():
            assert s == -1 or s in allowed[c]
        assert [list(deal.values()).count(s) for s in (1, 2, 3, -1)] == [4, 3, 4, 1]


def test_search_is_reproducible_from_the_view_alone():
    """Same view, same seed, same choice: nothing but the view reaches the decision."""
    for state in play_states()[:10]:
        view = seat_view(state, state.turn)
        a = SearchStrategy(seed=9, simulations=4).choose(view, view["legal_actions"])
        b = SearchStrategy(seed=9, simulations=4).choose(view, view["legal_actions"])
        assert a == b


def test_registry_builds_builtins_and_loads_module_class(tmp_path, monkeypatch):
    assert isinstance(get_strategy("random", seed=1), RandomStrategy)
    assert isinstance(get_strategy("heuristic"), HeuristicStrategy)
    assert isinstance(get_strategy("search", move_time=0.01), SearchStrategy)
    (tmp_path / "my_bot.py").write_text(
        textwrap.dedent(
            """
            class FirstLegal:
                def choose(self, view, legal):
                    return legal[0]
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    bot = get_strategy("my_bot:FirstLegal")
    state = STATES[0]
    view = seat_view(state, state.turn)
    assert bot.choose(view, view["legal_actions"]) == view["legal_actions"][0]
    with pytest.raises(ValueError):
        get_strategy("no_such_strategy")
    with pytest.raises(ValueError):
        get_strategy("my_bot:Missing")


def test_heuristic_beats_random_over_duplicate_deals():
    games = []
    for seed in range(30):
        games += duplicate_pair(
            lambda s=seed: HeuristicStrategy(), lambda s=seed: RandomStrategy(seed=s), seed
        )
    wins = sum(g.winner == 0 for g in games)
    margins = [m for g in games for m in g.hand_margins]
    assert wins / len(games) >= 0.65
    assert sum(margins) / len(margins) >= 0.4


def seat_knowledge(seat: int, hand: list[int], trick: list[int], kicks: list[int],
                   hand_sizes: list[int], played: list[int] | None = None,
                   forbidden: list[int] | None = None) -> Knowledge:
    """A hand-built seat's knowledge, 4 players, clubs trumps, seat 3 dealing to 14, the
    first trick of the hand led by seat 0."""
    k = Knowledge(players=4, seat=seat, hand=mask(hand), trump=0, dealer=3, beggar=0,
                  leader=0, trick=trick, tricks=[], kicks=kicks, hand_sizes=hand_sizes,
                  scores=[0, 0], target=14, variants={})
    k.played = mask(played or [])
    k.forbidden = forbidden or [0] * 4
    return k


def test_heuristic_keeps_a_trump_above_the_unseen_jack_for_the_jack():
    """Fourth to a trick with a queen in it: the ace of trumps would take it safely, but
    while the opponents' jack is unseen it is kept to hang the jack; once the jack is out,
    it takes. A trick with no card points is never trumped, even last: it buys only the
    lead."""
    ace, five_of_trumps, four_led_suit = 12, 3, 15
    queen_trick = [17, 14, 23]  # led suit 1, the queen's 2 points, seat 2 (an opponent) winning
    pointless_trick = [17, 14, 20]

    def knowledge(trick: list[int], played_before: list[int]) -> Knowledge:
        return seat_knowledge(seat=3, hand=[ace, four_led_suit], trick=trick,
                              kicks=[five_of_trumps], hand_sizes=[1, 1, 1, 2],
                              played=trick + played_before)

    legal = [ace, four_led_suit]
    assert follow(knowledge(queen_trick, []), legal) == four_led_suit
    jack_of_trumps = 9
    assert follow(knowledge(queen_trick, [jack_of_trumps]), legal) == ace
    assert follow(knowledge(pointless_trick, [jack_of_trumps]), legal) == four_led_suit


def test_heuristic_leads_a_master_only_when_no_opponent_can_trump_it():
    """The top card of a side suit is led only when the opponents cannot trump it."""
    ace_of_suit_1, three_of_suit_2 = 25, 27
    trumps = (1 << 13) - 1

    def knowledge(opponents_void_in_trumps: bool) -> Knowledge:
        void = trumps if opponents_void_in_trumps else 0
        return seat_knowledge(seat=0, hand=[ace_of_suit_1, three_of_suit_2], trick=[],
                              kicks=[3], hand_sizes=[2, 2, 2, 2], forbidden=[0, void, 0, void])

    legal = [ace_of_suit_1, three_of_suit_2]
    assert lead(knowledge(False), legal) == three_of_suit_2
    assert lead(knowledge(True), legal) == ace_of_suit_1


def test_determinized_state_before_play_runs_the_pack_from_a_sampled_stock():
    """Stand/beg and give-one/run are searched too: the sample keeps the phase, the seat's
    hand and the stock's size, and the engine can run the pack from it."""
    rng = random.Random(8)
    pre = [s for s in STATES if s.phase in (STAND_OR_BEG, GIVE_ONE_OR_RUN)]
    assert pre
    for state in pre:
        view = seat_view(state, state.turn)
        k = read_view(view)
        sample = determinize(k, view, state.variants, rng)
        assert sample.phase == state.phase and sample.turn == state.turn
        assert legal_actions(sample) == legal_actions(state)
        assert sample.hands[k.seat] == state.hands[k.seat]
        assert len(sample.stock) == len(state.stock)
        for action in legal_actions(sample):
            after, _ = apply(sample, action)
            assert after.phase in (PLAY, OVER, STAND_OR_BEG, GIVE_ONE_OR_RUN)


def test_rollout_decisions_follow_the_heuristic_rules():
    for state in STATES:
        if state.phase in (STAND_OR_BEG, GIVE_ONE_OR_RUN):
            assert rollout_decision(state) in legal_actions(state)


def test_beggar_stands_on_likely_high_or_low_and_not_on_length_alone():
    """R8: the beggar stands when the kicked suit likely brings its team High or Low (R17,
    R18) — the ace, or a king with the three — and begs on small trumps without them,
    whatever the score: even when the dealer's team is 2 short of the target."""
    trump = 0  # suit 0: card r is the trump of rank r (0 the two, 12 the ace)
    sides = [14, 16, 29, 31]  # small cards of suits 1 and 2

    def hand(*cards: int) -> int:
        return mask(list(cards))

    early, dealers_near = [0, 0], [5, 12]  # dealer 3: team 1 deals
    assert stands(hand(12, 3, *sides), trump, early, 3, 14)  # ace: High is ours
    assert stands(hand(11, 1, *sides), trump, early, 3, 14)  # king and three
    assert not stands(hand(3, 5, 7, *sides[:3]), trump, early, 3, 14)  # length alone
    assert not stands(hand(3, 5, 7, *sides[:3]), trump, dealers_near, 3, 14)
    assert not stands(hand(10, 3, *sides), trump, early, 3, 14)  # a lone queen


def test_sampler_spreads_cards_in_proportion_to_the_room_left():
    """With no void known, an unseen card lands in each hand (and the stock) as often as
    a real deal would put it there: in proportion to the cards each place still hides."""
    k = next(
        k
        for st in play_states()
        if (k := read_view(seat_view(st, st.turn))).tricks and not any(k.forbidden)
    )
    deals = prepare(k)
    rng = random.Random(11)
    unseen = bits(k.unseen)
    counts = {s: 0 for s in range(-1, k.players)}
    runs = 4000
    for _ in range(runs):
        hands, _stock = deals.deal(rng)
        for c in unseen[:3]:
            where = [s for s in range(k.players) if hands[s] >> c & 1]
            counts[where[0] if where else -1] += 1
    room = {s: (0 if s == k.seat else k.hand_sizes[s]) for s in range(k.players)}
    room[-1] = len(unseen) - sum(room.values())
    for s, n in counts.items():
        p = room[s] / len(unseen)
        expected = 3 * runs * p
        assert abs(n - expected) <= 5 * (3 * runs * p * (1 - p)) ** 0.5 + 1, (s, n, expected)


def _hidden_shuffled(state, seat: int, rng: random.Random):
    """``state`` with every card ``seat`` cannot see dealt again at random (other hands
    keep their sizes, the stock its length): a different world behind the same view."""
    hidden = [c for s in range(state.players) if s != seat for c in bits(state.hands[s])]
    hidden += list(state.stock)
    rng.shuffle(hidden)
    other = state.clone()
    hands = list(state.hands)
    for s in range(state.players):
        if s != seat:
            size = state.hands[s].bit_count()
            hands[s], hidden = mask(hidden[:size]), hidden[size:]
    other.hands = hands
    other.dealt = [h | (d & ~state.hands[s]) for s, (h, d) in enumerate(zip(hands, state.dealt))]
    other.stock = hidden
    return other


def test_search_values_depend_on_the_view_only():
    """The bot never reads hidden state: with the hidden cards dealt differently behind an
    identical seat view, ``values`` (and so ``choose``) are exactly the same."""
    rng = random.Random(4)
    checked = 0
    for state in STATES[::6]:
        seat = state.turn
        view = seat_view(state, seat)
        if len(view["legal_actions"]) < 2:
            continue
        other = _hidden_shuffled(state, seat, rng)
        assert other.hands != state.hands or other.stock != state.stock or not state.stock
        assert seat_view(other, seat) == view
        legal = view["legal_actions"]
        a = SearchStrategy(seed=2, simulations=6).values(view, list(legal))
        b = SearchStrategy(seed=2, simulations=6).values(seat_view(other, seat), list(legal))
        assert a == b
        checked += 1
    assert checked >= 20


def choices() -> Iterator[tuple[dict, list[str]]]:
    """Views of every eighth sample position with a real choice, and their legal actions."""
    for state in STATES[::8]:
        view = seat_view(state, state.turn)
        legal = list(view["legal_actions"])
        if len(legal) >= 2:
            yield view, legal


def test_search_values_every_legal_action_and_chooses_the_best():
    """``values`` answers every legal action with means over the stated samples, within
    their bounds; ``choose`` is its argmax by score; the same seed gives the same values."""
    for view, legal in choices():
        vals = SearchStrategy(seed=5, simulations=8).values(view, legal)
        assert list(vals) == legal
        for v in vals.values():
            assert v.samples == 8
            assert 0.0 <= v.win <= 1.0
            assert v.points >= 0 and v.points >= v.margin
        best = max(legal, key=lambda a: vals[a].score)
        assert SearchStrategy(seed=5, simulations=8).choose(view, legal) == best
        assert SearchStrategy(seed=5, simulations=8).values(view, legal) == vals


def heuristic_positions(games: int, players: int, seed: int) -> list:
    """Every position of some heuristic self-play games (the model the inference uses)."""
    bot = HeuristicStrategy()
    out = []
    for g in range(games):
        state, _ = new_game(players, seed * 1000 + g)
        while state.phase != OVER:
            out.append(state)
            view = seat_view(state, state.turn)
            state, _ = apply(state, parse_action(bot.choose(view, view["legal_actions"])))
    return out


@pytest.mark.parametrize("players", [4, 2])
def test_inference_explains_the_true_deal_of_heuristic_play(players: int):
    """R8, R9, R14: against players who decide by the heuristic's rules the inference's
    model is exact, so the real hidden hands explain every stand, beg, give-one and card
    seen (likelihood 1), while random deals often do not: the evidence has teeth, and the
    reconstruction of what each seat knew when it played is right."""
    rng = random.Random(1)
    informative = contradicted = 0
    for state in heuristic_positions(6, players, seed=players)[::3]:
        view = seat_view(state, state.turn)
        k = read_view(view)
        ev = evidence(k, view)
        ps = plays(k) if k.trump >= 0 else []
        if not ev and not ps:
            continue
        assert likelihood(ev, state.hands, k.played_by) == 1.0
        assert play_likelihood(ps, state.hands, k.trump, state.variants, 0.0) == 1.0
        informative += 1
        hands, _stock = sample_hands(k, rng)
        w = likelihood(ev, hands, k.played_by) * play_likelihood(
            ps, hands, k.trump, state.variants, 0.0
        )
        contradicted += w < 1.0
    assert informative >= 30
    assert contradicted >= informative // 5


def test_sampling_with_inference_keeps_the_deals_that_explain_a_stand():
    """R8: a beggar who stood holds a hand the heuristic stands on in most deals the
    search samples (a contradicting deal is kept with probability ``MISS_OPPONENT``),
    though most random hands would not stand."""
    rng = random.Random(2)
    found = 0
    for state in heuristic_positions(12, 4, seed=7):
        if state.phase != PLAY or state.beg != "stood" or state.tricks or state.trick:
            continue
        seat = (state.beggar + 1) % 4  # an opponent of the beggar, first to see the stand
        view = seat_view(state, seat)
        k = read_view(view)
        if k.seat == k.beggar:
            continue
        trump = k.kicks[0] // 13
        kept = sum(
            stands(determinize(k, view, state.variants, rng).hands[k.beggar], trump,
                   k.scores, k.dealer, k.target)
            for _ in range(40)
        )
        uniform = sum(
            stands(sample_hands(k, rng)[0][k.beggar], trump, k.scores, k.dealer, k.target)
            for _ in range(40)
        )
        assert kept >= 28 and kept >= uniform + 10  # a miss keeps 1 in 20 contradicting deals
        found += 1
    assert found >= 3


def test_the_search_scores_the_hand_margin_or_the_chance_of_the_game_R22():
    """``objective="margin"`` scores an action by the hand's margin (and a bonus for a game
    won in it); ``"win"`` by the chance of winning the game from the scores the hand
    leaves (1 or 0 where it reaches the target, R22), the margin only breaking ties. The
    same samples either way: only the score differs."""
    compared = differed = 0
    for view, legal in choices():
        by_margin = SearchStrategy(seed=5, simulations=8).values(view, legal)
        by_win = SearchStrategy(seed=5, simulations=8, objective="win").values(view, legal)
        for a in legal:
            m, w = by_margin[a], by_win[a]
            assert (w.points, w.margin, w.win, w.samples) == (m.points, m.margin, m.win, 8)
            assert -1e-9 <= w.score - w.margin / 100 <= 1 + 1e-9
        compared += 1
        differed += any(by_win[a].score != by_margin[a].score for a in legal)
    assert compared and differed
    with pytest.raises(ValueError):
        SearchStrategy(objective="points")


def test_search_budget_clock_is_wall_or_thread_cpu_time():
    """Benches on a shared machine count the move budget in the deciding thread's CPU
    time; a house bot answering in time counts the wall clock; nothing else is taken."""
    state = next(s for s in play_states() if len(seat_view(s, s.turn)["legal_actions"]) > 1)
    view = seat_view(state, state.turn)
    for clock in ("wall", "cpu"):
        bot = get_strategy("search", move_time=0.005, clock=clock, seed=1)
        vals = bot.values(view, list(view["legal_actions"]))
        assert all(v.samples >= 1 for v in vals.values())
    with pytest.raises(ValueError):
        SearchStrategy(clock="sundial")


def test_the_search_reads_only_the_plays_it_is_told_to_R14():
    """R14 (the cards played this hand): ``recent_plays`` keeps the latest cards of the
    others, most recent first, and ``partner_plays=0`` drops the partner's — the subsets
    of what ``inference.plays`` reads, in its order. By default the partner's cards are
    not read (they cost most of a 4-player move's samples, docs/benchmarks.md)."""
    checked = 0
    for state in heuristic_positions(4, 4, seed=9):
        view = seat_view(state, state.turn)
        k = read_view(view)
        if k.trump < 0:
            continue
        every = plays(k)
        if len(every) < 4:
            continue
        read = SearchStrategy(seed=1, partner_plays=True)._plays_read
        assert [(p.seat, p.card) for p in read(k)] == [(p.seat, p.card) for p in every]
        recent = SearchStrategy(seed=1, recent_plays=2, partner_plays=True)._plays_read(k)
        assert [(p.seat, p.card) for p in recent] == [(p.seat, p.card) for p in every[:2]]
        no_partner = SearchStrategy(seed=1, partner_plays=False)._plays_read(k)
        assert [(p.seat, p.card) for p in no_partner] == [
            (p.seat, p.card) for p in every if p.seat != k.partner]
        assert SearchStrategy(seed=1)._plays_read(k) == no_partner
        assert any(p.seat == k.partner for p in every) <= (len(no_partner) < len(every))
        assert SearchStrategy(seed=1, infer_plays=False)._plays_read(k) == []
        sharp = SearchStrategy(seed=1, play_miss=0.3, partner_plays=True)._plays_read(k)
        assert {p.miss for p in sharp if p.seat & 1 != k.team} <= {0.3}
        assert {p.miss for p in sharp if p.seat == k.partner} <= {PLAY_MISS_PARTNER}
        checked += 1
    assert checked >= 10


def test_the_chance_of_the_race_needs_no_recursion_for_any_target_R22():
    """``win_chance`` for every target the variants allow (up to 1,000, R22) with a
    recursion limit far below it, and equal to the race's recurrence where both can be
    computed (each point a fair coin: P(a, b) = (P(a-1, b) + P(a, b-1)) / 2)."""
    import sys

    from clients.strategies import search

    table = [[0.0] * 41 for _ in range(41)]
    for a in range(41):
        for b in range(41):
            table[a][b] = 1.0 if a == 0 else 0.0 if b == 0 else \
                0.5 * (table[a - 1][b] + table[a][b - 1])
    search._race.cache_clear()
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(100)
    try:
        for a in range(41):
            for b in range(41):
                assert search._race(a, b) == pytest.approx(table[a][b], abs=1e-12)
        assert search.win_chance([0, 0], 0, 1000) == pytest.approx(0.5)
        assert 0.5 < search.win_chance([10, 0], 0, 1000) < 0.6
        assert search.win_chance([0, 999], 0, 1000) < 1e-100
        assert search.win_chance([999, 0], 0, 1000) == pytest.approx(1.0)
    finally:
        sys.setrecursionlimit(limit)
        search._race.cache_clear()
