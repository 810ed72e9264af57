"""The house-rule variants table: each variant, off by default, changes exactly its rule.

(The R15 variants are also exercised card by card in test_rules_play.py and
pack_runs_out in test_rules_pack_exhaustion.py.)
"""

import pytest
from stacking import play, rigged_game, score_items
from test_rules_scoring import S1_HANDS, S1_PLAYS, TIE_BEGGAR, TIE_DEALER, TIE_PLAYS, hand

from service.engine import (
    BEG,
    GIVE_ONE,
    OVER,
    RUN_PACK,
    STAND,
    STAND_OR_BEG,
    IllegalAction,
    InvalidVariants,
    Variants,
    apply,
    build_record,
    legal_actions,
    new_game,
)


def test_R22_R20_R9_R15_R11_R6_variant_defaults_are_the_seed_rules():
    """Variants table: every default is the seed's rule."""
    v = Variants()
    assert v.target == 14
    assert v.game_point_value == 1
    assert v.game_tie == "nobody"
    assert v.give_one_at_target_minus_one is True
    assert v.under_trumping is True
    assert v.void_may_discard is False
    assert v.pack_runs_out == "one_by_one"
    assert v.tobago_kick is False
    assert new_game(4, 5)[0].variants == v


@pytest.mark.parametrize(
    "bad",
    [
        {"target": 0},
        {"game_point_value": 3},
        {"game_tie": "dealer"},
        {"pack_runs_out": "never"},
        {"tobago_kick": "yes"},
        {"no_such_rule": True},
    ],
)
def test_R22_R20_R11_R6_variants_outside_the_table_are_refused(bad):
    """Variants table: only the values the rule book offers are accepted."""
    with pytest.raises(InvalidVariants):
        Variants.from_dict(bad)


def test_R22_R6_variants_read_back_are_remembered_but_still_checked():
    """Variants table: each state read back builds its variants from a dict, so valid
    dicts are remembered; a value equal to a valid one but of another type (``True`` is
    ``1``, ``1.0`` is ``1``) must still be refused, before and after the valid one."""
    good = Variants.from_dict({"target": 1, "tobago_kick": True})
    assert good == Variants(target=1, tobago_kick=True)
    assert Variants.from_dict({"tobago_kick": True, "target": 1}) is good
    for bad in ({"target": True, "tobago_kick": True}, {"target": 1.0, "tobago_kick": True},
                {"target": 1, "tobago_kick": 1}, {"target": [1]}):
        with pytest.raises(InvalidVariants):
            Variants.from_dict(bad)
    assert Variants.from_dict({}) == Variants()
    assert good.changed() == {"target": 1, "tobago_kick": True}
    good.changed()["target"] = 99  # a fresh dict each time: the remembered one is safe
    assert good.changed() == {"target": 1, "tobago_kick": True}


def test_R22_variants_in_force_are_named_in_the_record():
    """Variants table: a game's record must say which variants were in force."""
    v = Variants(target=7, tobago_kick=True)
    record = build_record(2, 11, v, [])
    assert record["variants"]["target"] == 7
    assert record["variants"]["tobago_kick"] is True


def test_R22_variant_target_7_a_kick_reaching_seven_ends_the_game():
    """Variant target=7: a kick taking the dealer's team from 6 to 7 wins the game."""
    state, _ = rigged_game(4, 1, {}, ["AS"], scores=(3, 6), variants=Variants(target=7))
    assert state.phase == OVER
    assert state.winner == 1
    assert state.scores == [3, 7]
    default, _ = rigged_game(4, 1, {}, ["AS"], scores=(3, 6))
    assert default.phase == STAND_OR_BEG


def test_R20_variant_game_point_value_two():
    """Variant game_point_value=2: Game scores 2 points instead of 1."""
    v = Variants(game_point_value=2)
    _, events = hand(S1_HANDS, S1_PLAYS, variants=v)
    assert ("game", 0, 2) in score_items(events)
    assert [e["scores"] for e in events if e["type"] == "hand_over"] == [[3, 1]]


@pytest.mark.parametrize("dealer", [0, 1])
def test_R20_variant_game_tie_scores_for_the_non_dealers_team(dealer):
    """Variant game_tie='non_dealer': a tied Game scores for the non-dealer's team."""
    beggar = 1 - dealer
    state, _ = rigged_game(
        2, dealer, {beggar: TIE_BEGGAR, dealer: TIE_DEALER}, ["3H"],
        variants=Variants(game_tie="non_dealer"),
    )  # fmt: skip
    state, _ = apply(state, STAND)
    state, events = play(state, TIE_PLAYS)
    (game,) = [e for e in events if e["type"] == "score" and e["item"] == "game"]
    assert game["totals"] == [10, 10]
    assert (game["team"], game["points"]) == (beggar, 1)


def test_R9_variant_give_one_forbidden_only_at_target_minus_one():
    """Variant give_one_at_target_minus_one=False: the dealer may still give one when the
    beggar's team is below target − 1 (or when only the dealer's team is at 13)."""
    v = Variants(give_one_at_target_minus_one=False)
    for scores in ((0, 12), (13, 5)):
        state, _ = rigged_game(4, 0, {}, ["9H"], scores=scores, variants=v)
        state, _ = apply(state, BEG)
        assert legal_actions(state) == [GIVE_ONE, RUN_PACK]
        state, _ = apply(state, GIVE_ONE)
        assert state.scores == [scores[0], scores[1] + 1]


def test_R9_variant_give_one_forbidden_at_target_minus_one_with_target_7():
    """Variant give_one_at_target_minus_one=False with target 7: forbidden at 6 (R9)."""
    v = Variants(give_one_at_target_minus_one=False, target=7)
    state, _ = rigged_game(2, 1, {}, ["9H", "9C"], runs=1, scores=(6, 0), variants=v)
    state, _ = apply(state, BEG)
    assert legal_actions(state) == [RUN_PACK]
    with pytest.raises(IllegalAction) as err:
        apply(state, GIVE_ONE)
    assert err.value.rule == "R9"


def test_R9_R22_default_give_one_at_target_minus_one_with_target_7_wins():
    """Default: with target 7 the beggar's team at 6 may be given the winning point."""
    state, _ = rigged_game(2, 1, {}, ["9H"], scores=(6, 0), variants=Variants(target=7))
    state, _ = apply(state, BEG)
    state, _ = apply(state, GIVE_ONE)
    assert state.phase == OVER
    assert state.winner == 0


@pytest.mark.parametrize(
    ("kick", "default", "tobago"),
    [("2D", 0, 2), ("6D", 2, 0), ("AD", 1, 1), ("JD", 3, 3), ("5D", 0, 0), ("KD", 0, 0)],
)
def test_R6_variant_tobago_kick_two_scores_two_and_six_nothing(kick, default, tobago):
    """Variant tobago_kick: a kicked Two scores 2 and a Six nothing; Ace 1 and Jack 3 are
    unchanged."""
    state, _ = rigged_game(4, 0, {}, [kick])
    assert state.scores == [default, 0]
    state, _ = rigged_game(4, 0, {}, [kick], variants=Variants(tobago_kick=True))
    assert state.scores == [tobago, 0]


def test_R6_R9_variant_tobago_kick_applies_to_run_kicks():
    """Variant tobago_kick: kicks turned when running the pack score by the same table."""
    v = Variants(tobago_kick=True)
    state, _ = rigged_game(4, 3, {}, ["2H", "6H", "2S"], runs=2, variants=v)
    assert state.scores == [0, 2]
    state, _ = apply(state, BEG)
    state, events = apply(state, RUN_PACK)
    assert score_items(events) == [("kick", 1, 2)]
    assert state.scores == [0, 4]
    assert state.trump == 3
