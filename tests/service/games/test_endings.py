"""Every way a game ends goes through one door (``service.arena.games.ending``) and reads
the same: for each, a webhook bot seated in it hears ``end`` with the reason, the
after-finish hooks run, and the game's view, record, summary, event stream and any
tournament or ladder history agree on the winner and the reason.

Games are ended by the last trick (R22), by a tournament entrant withdrawing (a forfeit),
by a cancelled tournament (void), by a suspension (a ladder forfeit), by a declined or
expired invitation (a cancel). The webhook's call is replaced by a recorder: what is
checked is the ``end`` envelope the service would send, not the network."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from service.arena.webhooks.calls import CallResult
from service.http.app import create_app
from tests.conftest import REDIS_URL
from tests.service.conftest import ADMIN_TOKEN, Api, settle
from tests.service.games.test_retries_and_waiting import _parse_sse

ALLOWED = "127.0.0.2"  # the one network webhooks may call here (nothing is called)
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def app(key_prefix):
    return create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                       "ARENA_RATE_LIMIT": 0, "ARENA_ADMIN_TOKEN": ADMIN_TOKEN,
                       "ARENA_OWNERS_PER_NETWORK": 0, "TESTING": True,
                       "ARENA_CALLBACK_NETWORKS": f"{ALLOWED}/32",
                       "ARENA_LADDER_VALIDATION": 0})


@pytest.fixture
def api(client):
    return Api(client, one_owner=False)


@pytest.fixture
def finished(app) -> list[str]:
    """The ids of the games the after-finish door ran for (``Arena._after_finish``)."""
    arena = app.extensions["arena"]
    seen: list[str] = []
    door = arena._after_finish

    def spy(game: Any) -> None:
        seen.append(game.id)
        door(game)

    arena._after_finish = spy
    return seen


@pytest.fixture
def hooked(app) -> list[str]:
    """The ids of the games the after-finish hooks heard (``Arena.on_finish``). The hooks
    run in the process's after-finish loop, after the request: read it after ``settle``."""
    seen: list[str] = []
    app.extensions["arena"].on_finish.append(lambda game: seen.append(game.id))
    return seen


def webhook_bot(api: Api, name: str) -> tuple[str, str]:
    bot, token = api.bot(name, new_owner=True)
    r = api.c.put("/bots/me/callback", json={"url": f"http://{ALLOWED}:9/"},
                  headers=api.auth(token))
    assert r.status_code == 200, r.json
    return bot, token


def heard(app, bot: str) -> dict[str, dict[str, Any]]:
    """The notifications ``bot``'s callback gets now, by event (the call recorded, not
    made): event -> envelope."""
    callbacks = app.extensions["callbacks"]
    got: dict[str, dict[str, Any]] = {}

    def call(cfg: dict[str, Any], envelope: dict[str, Any], budget_s: float) -> CallResult:
        got[envelope["event"]] = envelope
        return CallResult(status=204)

    callbacks.call = call
    cfg = callbacks.config(bot)
    assert cfg is not None
    callbacks.notify_due(bot, cfg)
    return got


def game_over(api: Api, gid: str, token: str | None = None) -> dict[str, Any]:
    """The last event of the finished game's stream (its ``game_over``)."""
    import json

    resp = api.c.get(f"/games/{gid}/events", headers=api.auth(token))
    events, _ = _parse_sse([resp.get_data()])
    assert events[-1]["event"] == "game_over"
    assert sum(e["event"] == "game_over" for e in events) == 1
    return json.loads(events[-1]["data"])


def reads_the_same(api: Api, gid: str, token: str, reason: str, winner: int | None,
                   forfeit_by: list[str], why: str | None = None) -> dict[str, Any]:
    """The view (a seat's and a spectator's), the summary, the record and the stream's
    game_over all say the game is over, why, and who won it; the seat's view."""
    ended = {"reason": reason, "winner": winner, "forfeit_by": sorted(forfeit_by)}
    for viewer in (token, None):
        v = api.view(gid, viewer).json
        assert v["status"] == "finished"
        assert v["phase"] == "over" and v["turn"] is None and v["decision"] is None
        assert v["legal_actions"] == [] and v["your_turn"] is False and v["deadline"] is None
        assert {k: v["ended"][k] for k in ended} == ended
        assert v["winner"] == winner
        if why is not None:
            assert v["ended"]["why"] == why
    summary = next(g for g in api.c.get("/games", query_string={"status": "finished"}
                                        ).json["items"] if g["id"] == gid)
    assert summary["ended"] == v["ended"] and summary["winner"] == winner
    record = api.c.get(f"/games/{gid}/record").json
    assert record["complete"] is True
    assert record["ended"] == v["ended"] and record["winner"] == winner
    over = game_over(api, gid)
    assert over["reason"] == reason and over["winner"] == winner
    assert sorted(over["forfeit_by"]) == sorted(forfeit_by)
    return api.view(gid, token).json


def test_the_last_trick_is_told_as_played(app, api, finished):
    """R22: a team reached the target; the webhook bot hears end, reason played."""
    a, ta = webhook_bot(api, "a")
    _, tb = api.bot("b", new_owner=True)
    g = api.game(ta, 2, seats=[a, None], seed=7, variants={"target": 5})
    assert api.c.post(f"/games/{g['id']}/seats/1", headers=api.auth(tb)).status_code == 200
    api.play_out(g["id"], [ta, tb], random.Random(3))
    engine_winner = api.c.get(f"/games/{g['id']}/record").json["winner"]
    view = reads_the_same(api, g["id"], ta, "played", engine_winner, [])
    assert heard(app, a)["end"]["view"]["ended"] == view["ended"]
    assert finished == [g["id"]]


def _two_entrant_tournament(api: Api, names: tuple[str, str]) -> tuple[dict, list]:
    bots = [webhook_bot(api, n) for n in names]
    t = api.c.post("/tournaments", headers=ADMIN, json={
        "entrants": [b for b, _ in bots], "format": "round_robin", "games_per_pairing": 1,
        "parallel": 1, "variants": {"target": 14}, "seed": 5}).json
    return t, bots


def _live_game(t: dict[str, Any]) -> str:
    [gid] = [s["game_id"] for rd in t["rounds"] for s in rd["games"] if s["status"] == "live"]
    return gid


def test_a_withdrawal_forfeits_the_live_game_and_every_reading_agrees(app, api, finished,
                                                                      hooked):
    t, bots = _two_entrant_tournament(api, ("w1", "w2"))
    gid = _live_game(t)
    (leaver, tl), (stayer, ts) = bots
    r = api.c.post(f"/tournaments/{t['id']}/entrants/{leaver}/withdraw", headers=api.auth(tl))
    assert r.status_code == 200, r.json
    seats = [s["bot_id"] for s in api.view(gid).json["seats"]]
    winner = seats.index(stayer)  # 2 players: the seat is the team
    view = reads_the_same(api, gid, ts, "forfeit", winner, [leaver], why="withdrawn")
    for bot in (leaver, stayer):
        end = heard(app, bot)["end"]
        assert end["view"]["ended"] == view["ended"]
    settle(app)
    assert gid in finished and gid in hooked  # the tournament's own hook, analysis...
    detail = api.c.get(f"/tournaments/{t['id']}").json
    [slot] = [s for rd in detail["rounds"] for s in rd["games"] if s["game_id"] == gid]
    assert slot["winner"] == stayer and slot["forfeit"]  # the tournament names the bot


def test_a_cancelled_tournament_voids_its_live_game(app, api, finished, hooked):
    t, bots = _two_entrant_tournament(api, ("v1", "v2"))
    gid = _live_game(t)
    r = api.c.post(f"/tournaments/{t['id']}/cancel", headers=ADMIN, json={})
    assert r.status_code == 200, r.json
    reads_the_same(api, gid, bots[0][1], "void", None, [])
    assert heard(app, bots[0][0])["end"]["view"]["ended"]["reason"] == "void"
    settle(app)
    assert gid in finished and gid in hooked


def test_a_suspension_forfeits_the_ladder_game_and_the_history_agrees(app, api, finished,
                                                                      hooked):
    lads = app.extensions["ladders"]
    bots = dict(webhook_bot(api, n) for n in ("l1", "l2"))
    for token in bots.values():
        assert api.c.post("/ladders/2p/entry", json={}, headers=api.auth(token)
                          ).status_code in (200, 201)
    [gid] = lads.match_once("2p")
    cheat, honest = list(bots)
    r = api.c.post(f"/admin/bots/{cheat}/suspension", headers=ADMIN,
                   json={"reason": "threw games"})
    assert r.status_code == 200, r.json
    seats = [s["bot_id"] for s in api.view(gid).json["seats"]]
    winner = seats.index(honest)
    view = reads_the_same(api, gid, bots[honest], "forfeit", winner, [cheat], why="suspended")
    assert heard(app, honest)["end"]["view"]["ended"] == view["ended"]
    settle(app)
    assert gid in finished and gid in hooked
    for bot, won in ((honest, True), (cheat, False)):
        [row] = api.c.get(f"/ladders/2p/bots/{bot}/history").json["items"]
        assert row["game_id"] == gid and row["won"] is won
        assert row["forfeit"] is (bot == cheat)


@pytest.mark.parametrize("how", ["declined", "expired"])
def test_a_cancelled_invitation_is_told_as_cancelled(app, api, finished, how):
    a, ta = webhook_bot(api, "host")
    b, tb = api.bot("guest", new_owner=True)
    g = api.game(ta, 2, seats=[a, b], variants={"target": 5})
    [inv] = api.c.get("/bots/me/invitations", headers=api.auth(tb)).json["invitations"]
    if how == "declined":
        r = api.c.post(f"/invitations/{inv['id']}/decline", headers=api.auth(tb), json={})
        assert r.status_code == 200, r.json
    else:
        assert app.extensions["arena"].invitations.expire_due(time.time() + 10**6) == 1
    view = reads_the_same(api, g["id"], ta, "cancelled", None, [], why=how)
    summary = next(s for s in api.c.get("/games", query_string={"status": "finished"}
                                        ).json["items"] if s["id"] == g["id"])
    assert summary["cancelled"] == how == view["ended"]["why"]
    assert heard(app, a)["end"]["view"]["ended"]["reason"] == "cancelled"
    assert finished == [g["id"]]


def test_an_action_on_a_game_ended_early_is_refused(app, api):
    t, bots = _two_entrant_tournament(api, ("r1", "r2"))
    gid = _live_game(t)
    r = api.c.post(f"/tournaments/{t['id']}/cancel", headers=ADMIN, json={})
    assert r.status_code == 200
    for _, token in bots:
        v = api.view(gid, token).json
        assert v["legal_actions"] == []
        r = api.act(gid, token, "stand")
        assert r.status_code == 409, r.json  # R22: the game is over


_CLOCK = [0.0]


def _later() -> float:
    """A sweeper clock past every deadline so far (each call goes further)."""
    _CLOCK[0] = max(_CLOCK[0], time.time()) + 3600
    return _CLOCK[0]


def test_a_game_played_out_by_the_clock_for_an_absent_side_is_its_forfeit(app, api, finished):
    """A tournament game that came to its end (R22) while every decision of one side was
    the clock's: that side never played and forfeits it (the tournament's rule, whatever
    its no-show setting). The game's own view, record and stream say so too, so none of
    them credits the absent side with a win its standings deny."""
    from service.arena.games.deadlines import Sweeper

    bots = [webhook_bot(api, n) for n in ("present", "absent")]
    (present, tp), (absent, _) = bots
    t = api.c.post("/tournaments", headers=ADMIN, json={
        "entrants": [present, absent], "format": "round_robin", "games_per_pairing": 1,
        "parallel": 1, "variants": {"target": 3}, "seed": 11, "move_limit": 5,
        "no_show": None}).json
    gid = _live_game(t)
    sweeper = Sweeper(app.extensions["arena"])
    rng = random.Random(4)
    for _ in range(500):
        v = api.view(gid, tp).json
        if v["status"] == "finished":
            break
        if v["your_turn"]:
            r = api.act(gid, tp, rng.choice(v["legal_actions"]), version=v["version"])
            assert r.status_code == 200, r.json
        else:
            assert sweeper.sweep_once(_later()) == 1
    seats = [s["bot_id"] for s in api.view(gid).json["seats"]]
    reads_the_same(api, gid, tp, "forfeit", seats.index(present), [absent], why="absent")
    assert heard(app, present)["end"]["view"]["ended"]["why"] == "absent"
    assert gid in finished
    detail = api.c.get(f"/tournaments/{t['id']}").json
    [slot] = [s for rd in detail["rounds"] for s in rd["games"] if s["game_id"] == gid]
    assert slot["winner"] == present and slot["forfeit"]
    out = {e["bot_id"]: e["status"] for e in detail["entrants"]}
    assert out[absent] == "in"  # absent from one game is not leaving the tournament


def test_a_disqualification_forfeits_the_live_game(app, api, finished, hooked):
    """``max_timeouts`` 1: the entrant whose move the clock plays once is disqualified
    and its live game forfeited at once (``why``: disqualified)."""
    from service.arena.games.deadlines import Sweeper

    bots = [webhook_bot(api, n) for n in ("d1", "d2")]
    t = api.c.post("/tournaments", headers=ADMIN, json={
        "entrants": [b for b, _ in bots], "format": "round_robin", "games_per_pairing": 1,
        "parallel": 1, "variants": {"target": 14}, "seed": 5, "move_limit": 5,
        "max_timeouts": 1}).json
    gid = _live_game(t)
    spec = api.view(gid).json
    late = spec["seats"][spec["turn"]]["bot_id"]
    other, token = next((b, tk) for b, tk in bots if b != late)
    assert Sweeper(app.extensions["arena"]).sweep_once(_later()) == 1
    app.extensions["tournaments"].advance(t["id"])  # what the sweeper's repair pass does
    seats = [s["bot_id"] for s in api.view(gid).json["seats"]]
    view = reads_the_same(api, gid, token, "forfeit", seats.index(other), [late],
                          why="disqualified")
    assert heard(app, late)["end"]["view"]["ended"] == view["ended"]
    settle(app)
    assert gid in finished and gid in hooked
