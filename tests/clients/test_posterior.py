"""The search's Markov chain over deals (``posterior.Chain``) deals only what the seat
could be facing, and draws it in proportion to how well it explains the table.

Exact rejection sampling — deals from the prior, each kept with probability its
likelihood, as many tries as it takes — is the reference: the chain must agree with it on
where the cards lie, while the prior (no evidence read) must not.
"""

from __future__ import annotations

import random

from clients.strategies import HeuristicStrategy
from clients.strategies.inference import evidence, likelihood, play_likelihood, plays
from clients.strategies.knowledge import read_view
from clients.strategies.posterior import Chain, seat_evidence
from clients.strategies.search import prepare, sample_hands
from service.engine import OVER, PLAY, apply, new_game, parse_action, seat_view
from service.engine.cards import ALL_CARDS


def positions(games: int, seed: int, players: int = 4):
    """Card-play positions of heuristic self-play (its model of the others is exact)
    where the seat in turn has evidence to read: a bid, or the others' cards."""
    bot = HeuristicStrategy()
    for g in range(games):
        state, _ = new_game(players, seed * 1000 + g)
        while state.phase != OVER:
            view = seat_view(state, state.turn)
            if state.phase == PLAY and (state.tricks or state.trick):
                k = read_view(view)
                ev = evidence(k, view)
                ps = plays(k)
                if ev or ps:
                    yield state, k, ev, ps
            state, _ = apply(state, parse_action(bot.choose(view, view["legal_actions"])))


def chain_for(state, k, ev, ps, rng: random.Random) -> Chain:
    deals = prepare(k)
    hands, stock = sample_hands(k, rng, deals)
    allowed = [ALL_CARDS & ~f for f in k.forbidden]
    return Chain(k.seat, hands, stock, allowed, seat_evidence(ev, ps, deals.played_by),
                 k.trump, state.variants)


def test_every_deal_of_the_chain_agrees_with_what_the_seat_saw_R14_R15():
    """R14, R15: no seat is dealt a card its plays showed it lacks; every seat holds as
    many cards as it does; the seat's own hand and the cards gone are never dealt."""
    rng = random.Random(3)
    checked = moved = 0
    for state, k, ev, ps in list(positions(3, seed=21))[::4]:
        chain = chain_for(state, k, ev, ps, rng)
        first = None
        for _ in range(20):
            hands, stock = chain.deal(rng, 5)
            first = first or hands
            moved += hands != first
            assert hands[k.seat] == k.hand
            dealt = 0
            for s in range(k.players):
                if s != k.seat:
                    assert hands[s].bit_count() == k.hand_sizes[s]
                    assert not hands[s] & k.forbidden[s]
                    assert not dealt & hands[s]
                    dealt |= hands[s]
            for c in stock:
                assert not dealt >> c & 1
                dealt |= 1 << c
            assert dealt == k.unseen and len(stock) + sum(
                hands[s].bit_count() for s in range(k.players) if s != k.seat
            ) == k.unseen.bit_count()
            checked += 1
    assert checked >= 200 and moved >= checked // 2


def marginals(draws: list[list[int]], players: int) -> dict[tuple[int, int], float]:
    """How often each card lay in each seat's hand."""
    counts: dict[tuple[int, int], float] = {}
    for hands in draws:
        for s in range(players):
            h = hands[s]
            while h:
                low = h & -h
                key = (s, low.bit_length() - 1)
                counts[key] = counts.get(key, 0) + 1
                h ^= low
    return {key: n / len(draws) for key, n in counts.items()}


def test_the_chain_draws_deals_as_often_as_they_explain_the_table_R8_R14():
    """R8 (the bids) and R14 (the cards played): in positions late in a hand, the chance
    of each card lying in each hand by the chain is the exact posterior's (rejection
    sampling without a cap on tries), within sampling noise (3,000 deals each way; the
    largest gap of some 500 chances), where the prior's is far off."""
    rng = random.Random(4)
    compared = 0
    for state, k, ev, ps in positions(8, seed=22):
        if len(k.tricks) != 3 or k.seat & 1:
            continue
        deals = prepare(k)
        exact, prior = [], []
        while len(exact) < 3000:
            hands, _ = sample_hands(k, rng, deals)
            prior.append(hands)
            w = likelihood(ev, hands, deals.played_by) * play_likelihood(
                ps, hands, k.trump, state.variants, 0.0)
            if rng.random() < w:
                exact.append(hands)
        chain = chain_for(state, k, ev, ps, rng)
        for _ in range(200):
            chain.step(rng)
        drawn = [chain.deal(rng, 10)[0] for _ in range(3000)]
        truth = marginals(exact, k.players)
        by_chain = marginals(drawn, k.players)
        by_prior = marginals(prior[:3000], k.players)
        keys = set(truth) | set(by_chain) | set(by_prior)
        gap = max(abs(truth.get(x, 0) - by_chain.get(x, 0)) for x in keys)
        prior_gap = max(abs(truth.get(x, 0) - by_prior.get(x, 0)) for x in keys)
        if prior_gap < 0.2:  # little to read here: the prior is near the posterior
            continue
        assert gap < 0.08 and gap < prior_gap / 3, (gap, prior_gap)
        compared += 1
        if compared == 4:
            break
    assert compared == 4

