"""The time bank across processes and in webhook turns: the app under gunicorn (two
workers, so two sweepers race for each deadline), a real Redis, a real callback server. The
rule step by step, with explicit clocks: tests/service/games/test_time_bank.py."""

from __future__ import annotations

import json
import time
from typing import Any

from tests.service.webhooks.test_webhooks import (  # noqa: F401  (``service``: the fixture)
    Service,
    register,
    scripted_server,
    service,
    wait_for,
)


def test_every_process_keeps_the_bank_s_deadline_and_the_clock_plays_at_it(
        service: Service):  # noqa: F811
    a, ta = service.bot("bank-a")
    b, tb = service.bot("bank-b")
    g = service.call("POST", "/games", ta, {"players": 2, "seats": [a, b], "seed": 5,
                                            "move_limit": 0.5, "time_bank": 3})
    view = service.call("GET", f"/games/{g['id']}")
    deadline, seat = view["deadline"], view["turn"]
    assert view["bank_left"] == 3 and view["move_limit"] == 0.5
    assert abs(deadline - 3.5 - view["updated_at"]) < 1
    # past the move limit, within the bank: no process has played for the seat (judged
    # only if the answer came while the deadline was still ahead, whatever the load)
    time.sleep(1.0)
    seen = service.call("GET", f"/games/{g['id']}")
    if time.time() < deadline:
        assert seen["version"] == view["version"] and seen["deadline"] == deadline
    # nobody acts: a sweeper (of either worker) plays once limit and bank are gone
    after = wait_for("the clock", lambda: (lambda v: v if v["version"] > view["version"]
                                           else None)(service.call("GET", f"/games/{g['id']}")))
    assert after["updated_at"] >= deadline
    record = service.record(g["id"])
    assert [t["seat"] for t in record["timeouts"]] == [seat]
    mine = service.call("GET", f"/games/{g['id']}", [ta, tb][seat], seat=seat)
    assert mine["bank_left"] == 0  # spent: the clock played


def test_a_webhook_turn_carries_the_clock_and_a_slow_answer_draws_on_the_bank(
        service: Service):  # noqa: F811
    hook_id, hook_token = service.bot("slow-hook")
    stall = 1.5  # over the move limit, well within the bank

    def behave(msg: dict[str, Any]) -> tuple[int, bytes, float]:
        if msg["event"] != "turn":
            return 200, b"{}", 0.0
        return 200, json.dumps({"action": msg["view"]["legal_actions"][0]}).encode(), stall

    url, seen, _server = scripted_server(behave)
    register(service, hook_token, url)
    game, pull_token = service.against_puller(hook_id, move_limit=0.5, time_bank=30,
                                              variants={"target": 3})

    def applied() -> list[dict[str, Any]]:
        return [d for d in service.deliveries(hook_token, game["id"])
                if d["event"] == "turn" and d["outcome"] == "applied"]

    service.play_by_pull(game["id"], pull_token, until=lambda: bool(applied()))
    first = seen.messages("turn")[0]
    assert first["view"]["move_limit"] == 0.5 and first["view"]["bank_left"] == 30
    assert first["deadline"] == first["view"]["deadline"]
    assert first["deadline"] > first["view"]["updated_at"] + 30  # the bank counted
    assert service.record(game["id"])["timeouts"] == []
    mine = service.call("GET", f"/games/{game['id']}", hook_token, seat=0)
    assert mine["bank_left"] < 30 - (stall - 0.5) + 0.01  # drawn by the slow answer
