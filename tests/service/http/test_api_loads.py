"""The operation machinery's short cuts past marshmallow give what marshmallow gives.

``ActionIn.fast_load`` accepts the plainly valid action body without the schema, and
``api.load_query`` keeps queries it has loaded: neither may let through what the schema
refuses, nor answer differently from it, nor hand out a dict that another request shares.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from marshmallow import ValidationError

from service.http.games.schemas import ActionIn

_SCHEMA = ActionIn()
_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 2**31 + 5), st.sampled_from([2**31, 0, 1, 3, 4]),
    st.floats(allow_nan=False, allow_infinity=False), st.just(12.0),
    st.sampled_from(["AS", "TC", "stand", "beg", "give_one", "run_pack", "1S", "AS\n", "as",
                     "", "12"]),
    st.text(max_size=6),
)
_BODIES = st.dictionaries(
    st.sampled_from(["action", "version", "seat", "extra", "Action"]), _VALUES, max_size=4)


def _loaded(body: dict[str, Any]) -> dict[str, Any] | None:
    try:
        return dict(_SCHEMA.load(body))
    except ValidationError:
        return None


@settings(max_examples=600, deadline=None)
@given(_BODIES)
def test_fast_load_agrees_with_the_schema(body: dict[str, Any]) -> None:
    fast = ActionIn.fast_load(body)
    if fast is not None:  # accepted: exactly what the schema makes of it, in its order
        assert _loaded(body) == fast
        assert list(fast) == list(_SCHEMA.load(body))


def test_fast_load_takes_the_moves_bots_send() -> None:
    for body in ({"action": "AS", "version": 12}, {"action": "stand"},
                 {"action": "give_one", "version": 1, "seat": 3},
                 {"action": "TC", "version": 2**31}):
        assert ActionIn.fast_load(body) == _loaded(body) == body


def test_fast_load_leaves_every_mistake_to_the_schema() -> None:
    for body in ({"action": "AS", "version": True}, {"action": "AS", "version": 12.0},
                 {"action": "AS", "version": 0}, {"action": "AS", "seat": 4},
                 {"action": "AS\n"}, {"action": "1S"}, {"action": "AS", "extra": 1},
                 {"version": 3}, {"action": None}):
        assert ActionIn.fast_load(body) is None


def test_a_kept_query_is_a_copy_and_a_bad_one_is_refused_each_time(api) -> None:
    game_id, tokens = api.table(2, 3)
    client = api.c
    for _ in range(2):  # the second time from the memo: the same answer
        bad = client.get(f"/games/{game_id}/turn?timeout=99",
                         headers={"Authorization": f"Bearer {tokens[0]}"})
        assert bad.status_code == 422, bad.get_data(as_text=True)
        good = client.get(f"/games/{game_id}/turn?timeout=0",
                          headers={"Authorization": f"Bearer {tokens[0]}"})
        assert good.status_code == 200, good.get_data(as_text=True)


def test_load_query_hands_out_copies() -> None:
    from flask import Flask

    from service.http import api
    from service.http.games.schemas import TurnQuery

    memo: dict[Any, dict[str, Any]] = {}
    app = Flask(__name__)
    with app.test_request_context("/?timeout=2"):
        first = api.load_query(TurnQuery(), memo)
        first["timeout"] = 99.0  # a view changing its own
    with app.test_request_context("/?timeout=2"):
        again = api.load_query(TurnQuery(), memo)
    assert again == {"timeout": 2.0} and again is not first and len(memo) == 1
