"""``service.jsonio``: orjson's output must say what the standard library's said, and no
value may make an answer fail."""

from __future__ import annotations

import json
import random

from service import jsonio
from service.engine import apply, legal_actions, new_game, seat_view


def _std(data: object) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def test_views_and_states_encode_as_the_standard_library_did():
    rng = random.Random(4)
    state, _ = new_game(4, 99)
    for _ in range(60):
        for data in (seat_view(state, state.turn), state.to_dict(),
                     {"name": "béta \"q\" \u2028 \\ /", "n": None, "ok": True, "x": [1, -2]}):
            text = jsonio.dumps(data)
            assert text == _std(data)  # no floats here: byte for byte the same
            assert jsonio.loads(text) == data == jsonio.loads(text.encode())
        state, _ = apply(state, rng.choice(legal_actions(state)))


def test_floats_keep_their_value_and_odd_values_still_encode():
    for x in (1700000000.123456, 0.5, 1e-05, 12.0, 3.141592653589793):
        assert json.loads(jsonio.dumps({"t": x}))["t"] == x
    assert jsonio.dumps({1: "a", 2: [3]}) == '{"1":"a","2":[3]}'
    huge = 2**70  # orjson refuses integers beyond 64 bits: the standard library encodes it
    assert json.loads(jsonio.dumps({"v": huge})) == {"v": huge}
