"""The web front end in a real browser (headless Chromium), against the real service
(gunicorn + Redis) while bots play over HTTP.

What each test checks against is the public API (views, records, standings) or the rules
engine replaying the record: never the page's own idea of the game.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from typing import Any

from service.engine import apply, new_game, parse_action
from service.engine.cards import CARD_NAMES, SUITS, cards_of
from service.engine.variants import Variants
from tests.web.support import ADMIN, DESKTOP, PHONE, screenshot, wait_until

EXPECTED_S = 60  # seconds, the whole module: the order workers take it in (tests/conftest.py)

NAMES4 = ["Alice", "Bongo", "Calypso", "Dougla"]
RANKS = {"2": "Two", "3": "Three", "4": "Four", "5": "Five", "6": "Six", "7": "Seven",
         "8": "Eight", "9": "Nine", "T": "Ten", "J": "Jack", "Q": "Queen", "K": "King",
         "A": "Ace"}
SUIT_WORDS = {"C": "clubs", "D": "diamonds", "H": "hearts", "S": "spades"}


def spoken(card: str) -> str:
    return f"{RANKS[card[0]]} of {SUIT_WORDS[card[1]]}"


def table(api, players: int, names: list[str], **extra: Any) -> tuple[str, list[str]]:
    """A game with one bot per seat; returns (game id, tokens by seat)."""
    made = [api.bot(n) for n in names[:players]]
    g = api.post("/games", {"players": players, "seats": [b for b, _ in made], **extra},
                 made[0][1])
    return g["id"], [t for _, t in made]


def wait_finished(api, game_id: str, timeout: float = 180) -> dict[str, Any]:
    return wait_until(lambda: (v := api.get(f"/games/{game_id}"))["status"] == "finished" and v,
                      timeout, f"game {game_id} to finish", every=0.3)


def dom_trick(page) -> list[str]:
    return page.eval_on_selector_all("#trick [data-card]", "els => els.map(e => e.dataset.card)")


def sheet_items(page) -> list[list[tuple]]:
    rows = page.eval_on_selector_all(
        "#sheet tr[data-hand]",
        """rows => rows.map(r => [...r.querySelectorAll('[data-item]')].map(i =>
            [i.dataset.item, i.dataset.team, Number(i.dataset.points), i.dataset.card]))""")
    return [[tuple(i) for i in row] for row in rows]


def record_items(rec: dict[str, Any]) -> list[list[tuple]]:
    return [[(i["item"], "" if i["team"] is None else str(i["team"]), i["points"],
              i.get("card", "")) for i in h["items"]] for h in rec["hands"]]


# --- lobby and live table --------------------------------------------------------------------


def test_lobby_lists_a_live_game_and_its_table_follows_the_event_stream(page, api, bots):
    game_id, tokens = table(api, 4, NAMES4)
    players = [bots(t, delay=0.12) for t in tokens]

    page.goto("/")
    row = page.locator(f'#live-games li[data-game-id="{game_id}"]')
    row.wait_for()
    assert "Alice & Calypso" in row.inner_text() and "Bongo & Dougla" in row.inner_text()
    screenshot(page, "lobby")

    views: list[str] = []
    page.on("request", lambda r: views.append(r.url) if r.resource_type == "fetch"
            and r.url.endswith(f"/games/{game_id}") else None)
    row.get_by_role("link", name=f"Watch game {game_id}").click()
    page.wait_for_url(f"**/games/{game_id}")
    page.locator("#felt .seat").first.wait_for()
    page.evaluate("window.__sameDocument = true")

    # Seats and teams by name, dealer and beggar marked, the kick shown.
    names = page.eval_on_selector_all("#felt .seat .seat-name",
                                      "els => els.map(e => e.textContent)")
    assert sorted(names) == sorted(NAMES4)
    assert page.locator("#felt [data-role=dealer]").count() == 1
    assert page.locator("#felt [data-role=beggar]").count() == 1
    assert page.locator("#kicks [data-card]").count() >= 1
    assert "Alice & Calypso" in page.inner_text("#scoreboard")

    # Cards appear on the table as the bots play, with no reload.
    seen: set[str] = set()
    snapshots: set[tuple[str, ...]] = set()

    def played_enough() -> bool:
        cards = dom_trick(page)
        seen.update(cards)
        snapshots.add(tuple(cards))
        return len(seen) >= 8 and len(snapshots) >= 5

    wait_until(played_enough, 60, "cards to appear in the trick", every=0.05)
    assert page.locator("#trump [data-suit]").count() == 1
    # Hidden hands are face down, with their counts.
    counts = page.eval_on_selector_all("#felt .hidden-hand",
                                       "els => els.map(e => +e.dataset.count)")
    assert len(counts) == 4 and all(c >= 0 for c in counts)
    assert page.locator("#felt .seat [data-card]").count() == 0  # no face-up hand card
    wait_until(lambda: page.locator("#turn-info[data-turn]").count(), 10, "whose turn")
    screenshot(page, "table-live", full_page=False)
    page.set_viewport_size(PHONE)
    screenshot(page, "table-live-phone")
    page.set_viewport_size(DESKTOP)
    # Only the first view was fetched: everything since came through the event stream.
    assert views == [f"{api.base}/games/{game_id}"], views

    for b in players:
        b.delay = 0
    wait_finished(api, game_id)
    page.locator('#status[data-status="finished"]').wait_for(timeout=30_000)
    rec = api.get(f"/games/{game_id}/record")
    assert rec["complete"]
    # The score items shown, hand by hand, are the record's.
    wait_until(lambda: sheet_items(page) == record_items(rec), 10, "the score sheet")
    scores = page.eval_on_selector_all("#scoreboard [data-role=score]",
                                       "els => els.map(e => +e.textContent)")
    assert scores == rec["scores"]
    # Every card is revealed: nothing face down, and the last hand's deal shown face up.
    last = rec["hands"][-1]["deals"][-1]
    page.locator("[data-role=dealt]").first.wait_for()
    for seat in range(4):
        dealt = page.eval_on_selector_all(f'[data-role=dealt][data-seat="{seat}"] [data-card]',
                                          "els => els.map(e => e.dataset.card)")
        expected = last["cards"][seat] + [c for run in last["runs"] for c in run[seat]]
        assert sorted(dealt) == sorted(expected)
    assert page.locator("#felt .card.back").count() == 0
    assert page.evaluate("window.__sameDocument") is True
    screenshot(page, "table-finished")


# --- what a spectator may see --------------------------------------------------------------


def test_no_hidden_card_reaches_a_spectator_page_while_the_game_is_live(page, api, bots):
    game_id, tokens = table(api, 4, ["Ana", "Ben", "Cy", "Di"], move_limit=120)
    requests_seen: list[Any] = []
    responses: list[Any] = []
    sse: list[str] = []
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.on("Network.eventSourceMessageReceived", lambda m: sse.append(m["data"]))
    page.on("request", lambda r: requests_seen.append(r))
    page.on("response", lambda r: responses.append(r))

    page.goto(f"/games/{game_id}")
    page.locator("#felt .seat").first.wait_for()
    gate = threading.Event()
    gate.set()
    for t in tokens:
        bots(t, delay=0.1, gate=gate)
    # Let a few cards be played, then hold the bots and let the page catch up.
    wait_until(lambda: len(dom_trick(page)) >= 2, 60, "cards in the first trick", every=0.05)
    gate.clear()
    last = [-1, time.monotonic()]

    def settled() -> bool:
        v = api.get(f"/games/{game_id}")["version"]
        if v != last[0]:
            last[:] = [v, time.monotonic()]
        return time.monotonic() - last[1] > 1.5

    wait_until(settled, 20, "the bots to stop")
    spectator = api.get(f"/games/{game_id}")
    assert spectator["status"] == "active"
    want = sorted(c["card"] for c in spectator["trick"]["cards"])
    wait_until(lambda: sorted(dom_trick(page)) == want, 10, "the page to catch up")

    # Whose turn, and the time left on the move clock (the view's time_left).
    turn = page.locator("#turn-info")
    assert turn.get_attribute("data-turn") == str(spectator["turn"])
    left = re.search(r"(\d+) s left", turn.inner_text())
    assert left and 0 < int(left.group(1)) <= 120, turn.inner_text()

    hidden = {c for t in tokens for c in api.get(f"/games/{game_id}", t)["hand"]}
    rec = api.get(f"/games/{game_id}/record")  # the spectator's: public facts only
    public = {c["card"] for rnd in rec["cut"] for c in rnd}
    for h in rec["hands"]:
        for d in h["deals"]:
            public |= {k["card"] for k in d["kicks"]}
        for t in h["tricks"]:
            public |= {c["card"] for c in t["cards"]}
        public |= {c["card"] for c in h.get("current_trick", [])}
    secret = hidden - public
    assert len(secret) >= 8, (hidden, public)

    html = page.content()
    for card in secret:
        assert f'data-card="{card}"' not in html, card
        assert spoken(card) not in html, card

    assert sse, "the page did not use the event stream"
    for data in sse:
        event = json.loads(data)
        if event.get("cards") is not None and event["type"] in ("deal", "run_deal"):
            assert all(c is None for c in event["cards"]), event
        for card in secret:
            assert f'"{card}"' not in data, (card, data)
    bodies = 0
    for r in responses:
        if "text/event-stream" in (r.headers.get("content-type") or ""):
            continue
        text = r.text()
        bodies += 1
        for card in secret:
            assert f'"{card}"' not in text, (card, r.url)
    assert bodies >= 5
    assert not any("authorization" in r.headers for r in requests_seen)
    gate.set()


# --- replay --------------------------------------------------------------------------------

READ_STEP = """() => {
  const pos = document.getElementById('rp-pos').dataset;
  const hands = {};
  document.querySelectorAll('#felt [data-role=hand]').forEach(h => {
    hands[h.dataset.seat] = [...h.querySelectorAll('[data-card]')].map(c => c.dataset.card);
  });
  const cards = sel => [...document.querySelectorAll(sel)].map(c => c.dataset.card);
  return {
    step: +pos.step, ply: +pos.ply, complete: pos.complete === 'true', hand: +pos.hand,
    hands, trick: cards('#trick [data-card]'), kicks: cards('#kicks [data-card]'),
    trump: (document.querySelector('#trump [data-suit]') || {dataset: {}}).dataset.suit || null,
    scores: [...document.querySelectorAll('#scoreboard [data-role=score]')]
      .map(e => +e.textContent),
    items: [...document.querySelectorAll('#hand-items [data-item]')].map(i =>
      [i.dataset.item, i.dataset.team, +i.dataset.points, i.dataset.card]),
    back: document.querySelectorAll('#felt .card.back').length,
  };
}"""


def engine_states(rec: dict[str, Any]) -> list[Any]:
    """The engine's state after each number of actions, replaying the record."""
    state, _ = new_game(rec["players"], rec["seed"], Variants.from_dict(rec["variants"]))
    states = [state]
    for a in rec["actions"]:
        state, _ = apply(state, parse_action(a))
        states.append(state)
    return states


def check_step(shown: dict[str, Any], states: list[Any], rec: dict[str, Any]) -> None:
    assert shown["back"] == 0  # a replay shows every hand face up
    if not shown["complete"]:  # a hand's end, before the next deal
        hand = rec["hands"][shown["hand"] - 1]
        assert shown["scores"] == hand["scores"]
        assert [tuple(i) for i in shown["items"]] == record_items({"hands": [hand]})[0]
        assert all(not cards for cards in shown["hands"].values())
        return
    s = states[shown["ply"]]
    where = f"step {shown['step']} (ply {shown['ply']})"
    for seat in range(s.players):
        want = sorted(CARD_NAMES[c] for c in cards_of(s.hands[seat]))
        assert sorted(shown["hands"][str(seat)]) == want, (where, seat)
    assert sorted(shown["trick"]) == sorted(CARD_NAMES[c] for c in s.trick), where
    assert shown["kicks"] == [CARD_NAMES[k] for k in s.kicks], where
    assert shown["trump"] == (SUITS[s.trump] if s.trump >= 0 else None), where
    assert shown["scores"] == list(s.scores), where
    items = [(i[0], "" if i[1] is None else str(i[1]), i[2],
              CARD_NAMES[i[3]] if isinstance(i[3], int) else "") for i in s.items]
    assert [tuple(i) for i in shown["items"]] == items, where


def test_replay_steps_through_a_finished_game_as_its_record_says(page, api, bots):
    game_id, tokens = table(api, 2, ["Left", "Right"], variants={"target": 10})
    for t in tokens:
        bots(t)
    wait_finished(api, game_id)
    rec = api.get(f"/games/{game_id}/record")
    states = engine_states(rec)

    page.goto(f"/games/{game_id}/replay")
    page.locator("#rp-pos[data-step]").wait_for()
    steps = int(page.get_attribute("body", "data-steps"))
    assert steps >= len(rec["actions"]) + 1
    assert not page.locator("#error").is_visible()
    shown = []
    for k in range(steps):
        now = page.evaluate(READ_STEP)
        assert now["step"] == k
        check_step(now, states, rec)
        shown.append(now)
        if k == steps // 3:
            screenshot(page, "replay")
        page.keyboard.press("ArrowRight")
    assert shown[-1]["ply"] == len(rec["actions"])
    assert shown[-1]["scores"] == rec["scores"]
    # Back again, with the buttons and the keyboard: the same cards and scores.
    page.click("#rp-prev")
    page.click("#rp-prev")
    assert page.evaluate(READ_STEP) == shown[steps - 3]
    page.keyboard.press("Home")
    assert page.evaluate(READ_STEP) == shown[0]
    page.keyboard.press("PageDown")  # the next hand's deal
    nxt = page.evaluate(READ_STEP)
    check_step(nxt, states, rec)
    assert nxt["hand"] == 2
    page.click("#rp-end")
    assert page.evaluate(READ_STEP) == shown[-1]
    page.set_viewport_size(PHONE)
    screenshot(page, "replay-phone")


# --- a person plays ------------------------------------------------------------------------


def test_a_person_plays_a_whole_game_against_the_random_bot(page, api, bots):
    _human, human_token = api.bot("you")
    bot_id, bot_token = api.bot("random-bot")
    game = api.post("/games", {"players": 2, "seats": [None, bot_id], "variants": {"target": 7}},
                    bot_token)
    game_id = game["id"]
    assert game["status"] == "waiting"
    bots(bot_token)

    page.goto(f"/games/{game_id}/play")
    page.fill("#token", human_token)
    page.click("text=Take my seat")
    page.click('button.take-seat[data-seat="0"]')
    page.locator("body[data-seat='0']").wait_for()

    # The first action is tampered with on its way (an illegal card): the page must show
    # the service's refusal, then carry on.
    tamper = {"done": False, "card": None}

    def route(r) -> None:
        body = r.request.post_data_json
        if not tamper["done"] and len(body["action"]) == 2:
            tamper["done"] = True
            v = api.get(f"/games/{game_id}", human_token)
            illegal = [c for c in v["hand"] if c not in v["legal_actions"]]
            other = [c for c in CARD_NAMES if c not in v["hand"]]
            tamper["card"] = (illegal or other)[0]
            r.continue_(post_data=json.dumps({**body, "action": tamper["card"]}))
        else:
            r.continue_()

    page.route(f"**/games/{game_id}/actions", route)
    rng = random.Random(5)
    moves = clicked_disabled = 0
    for _ in range(500):
        page.wait_for_function(
            "() => document.body.dataset.status === 'finished' || "
            "document.body.dataset.yourTurn === 'true'", timeout=30_000)
        if page.get_attribute("body", "data-status") == "finished":
            break
        view = api.get(f"/games/{game_id}", human_token)
        if not view["your_turn"]:
            time.sleep(0.05)
            continue
        version = str(view["version"])
        wait_until(lambda v=version: page.get_attribute("body", "data-version") == v,
                   10, "the page to show the current version")
        enabled = page.eval_on_selector_all(
            "[data-role=hand][data-seat='0'] button.card:not([disabled]), "
            ".decisions button:not([disabled])",
            "els => els.map(e => e.dataset.card || e.dataset.action)")
        assert sorted(enabled) == sorted(view["legal_actions"]), (enabled, view)
        disabled = page.eval_on_selector_all(
            "[data-role=hand][data-seat='0'] button.card[disabled]",
            "els => els.map(e => e.dataset.card)")
        assert sorted(disabled + [c for c in enabled if len(c) == 2]) == sorted(view["hand"])
        if disabled and not clicked_disabled:
            clicked_disabled += 1
            page.locator(f'button.card[data-card="{disabled[0]}"]').click(force=True)
            time.sleep(0.3)
            assert api.get(f"/games/{game_id}")["version"] == view["version"]
        if len(enabled) > 1 and moves == 0:
            screenshot(page, "play", full_page=False)
            page.set_viewport_size(PHONE)
            screenshot(page, "play-phone")
            page.set_viewport_size(DESKTOP)
        choice = rng.choice(enabled)
        sel = (f'button.card[data-card="{choice}"]' if len(choice) == 2
               else f'.decisions button[data-action="{choice}"]')
        was_tampered = tamper["done"]
        # Wait for the action's answer, not just the click: the route above may run after
        # the click returns, and a refused (tampered) action changes no version.
        posted = page.expect_response(
            lambda r: r.request.method == "POST" and r.url.endswith(f"/games/{game_id}/actions"))
        with posted:
            if moves == 1:
                # The page redraws whenever news arrives: a redraw between the press and
                # the release must not lose the click.
                box = page.locator(sel).bounding_box()
                page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
                page.mouse.down()
                page.evaluate("window.__arena.render()")
                page.mouse.up()
            else:
                page.click(sel)
        if not was_tampered and tamper["done"]:
            error = page.locator("#error")
            error.wait_for(state="visible")
            text = error.inner_text()
            assert "409" in text and re.search(r"R1[0-9]", text), text
            assert api.get(f"/games/{game_id}")["version"] == view["version"]
            screenshot(page, "play-refused", full_page=False)
            continue
        moves += 1
        page.wait_for_function(
            f"() => document.body.dataset.version !== '{view['version']}' || "
            "document.body.dataset.status === 'finished'", timeout=15_000)
    final = api.get(f"/games/{game_id}")
    assert final["status"] == "finished", final
    assert tamper["done"] and moves >= 10 and clicked_disabled == 1
    page.locator('#status[data-status="finished"]').wait_for()
    screenshot(page, "play-finished")


# --- tournaments ---------------------------------------------------------------------------


def test_tournament_page_shows_a_cancel_a_withdrawal_and_forfeits(page, api, service):
    """The status (cancelled), the entrant that left (withdrawn, its forfeits),
    each forfeited game and each voided one, as the API has them."""
    made = [api.bot(n) for n in ("Tassa", "Chutney", "Calypso", "Kaiso")]
    body = {"name": "stopped cup", "format": "round_robin", "entrants": [b for b, _ in made],
            "players": 2, "games_per_pairing": 2, "parallel": 2}
    tid = api.post("/tournaments", body, ADMIN)["id"]
    quitter, token = made[3]
    api.post(f"/tournaments/{tid}/entrants/{quitter}/withdraw", {}, token, status=200)
    full = api.post(f"/tournaments/{tid}/cancel", {}, ADMIN, status=200)
    assert full["status"] == "cancelled"
    games = [g for r in full["rounds"] for g in r["games"]]
    forfeits = [g for g in games if g["forfeit"]]
    voided = [g for g in games if g["status"] == "void"]
    assert forfeits and voided

    page.goto(f"/tournaments/{tid}")
    page.locator("body[data-loaded=true]").wait_for()
    assert page.locator("#t-status").text_content() == "cancelled"
    assert "left: Kaiso (withdrawn)" in page.locator("#t-info").text_content()
    row = page.locator(f'#standings tr[data-bot-id="{quitter}"]')
    assert row.locator(".badge").text_content() == "withdrawn"
    assert row.locator("[data-col=forfeits]").text_content() == f" · {len(forfeits)} forfeits"
    assert page.locator("#rounds [data-col=forfeit]").count() == len(forfeits)
    assert page.locator('#rounds tr[data-status="void"]').count() == len(voided)
    screenshot(page, "tournament-cancelled")


def test_tournament_page_shows_the_standings_the_api_returns(page, api, bots, service):
    # three owners: one owner's games are never rated, and the lobby shows the leaderboard
    made = [api.bot(n, new_owner=True) for n in ("Steelpan", "Soca", "Parang")]
    for _, t in made:
        bots(t)
    body = {"name": "browser cup", "format": "round_robin", "entrants": [b for b, _ in made],
            "players": 2, "games_per_pairing": 2,
            "variants": {"target": 5}, "parallel": 4}
    t = api.post("/tournaments", body, ADMIN)
    tid = t["id"]
    wait_until(lambda: api.get(f"/tournaments/{tid}")["status"] == "finished", 180,
               "the tournament to finish", every=0.5)
    standings = api.get(f"/tournaments/{tid}/standings")
    full = api.get(f"/tournaments/{tid}")

    page.goto(f"/tournaments/{tid}")
    page.locator("body[data-loaded=true]").wait_for()
    rows = page.eval_on_selector_all(
        "#standings tbody tr",
        """rows => rows.map(r => ({
            rank: +r.dataset.rank, bot_id: r.dataset.botId,
            name: r.querySelector('.bot').textContent,
            score: +r.querySelector('[data-col=score]').textContent,
            played: +r.querySelector('[data-col=played]').textContent,
            won: +r.querySelector('[data-col=won]').textContent,
            lost: +r.querySelector('[data-col=lost]').textContent,
            rating: r.querySelector('[data-col=rating]').textContent,
        }))""")
    assert [r["bot_id"] for r in rows] == [r["bot_id"] for r in standings["items"]]
    for shown, row in zip(rows, standings["items"]):
        assert shown["rank"] == row["rank"] and shown["name"] == row["bot_name"]
        assert (shown["score"], shown["played"], shown["won"], shown["lost"]) == (
            row["score"], row["played"], row["won"], row["lost"])
        assert shown["rating"] == f"{row['rating']['mu']:.2f} ± {row['rating']['sigma']:.2f}"
    # A line per entrant on the chart, every round with its games linked.
    assert page.locator("#chart svg polyline").count() == len(made)
    assert page.locator("#rounds section.round").count() == len(full["rounds"])
    games = [g["game_id"] for r in full["rounds"] for g in r["games"]]
    for gid in games:
        assert page.locator(f'#rounds a[href="/games/{gid}"]').count() == 1
    screenshot(page, "tournament")
    page.set_viewport_size(PHONE)
    time.sleep(0.4)  # the chart is redrawn for the new width
    screenshot(page, "tournament-phone")
    page.set_viewport_size(DESKTOP)

    # The lobby lists it, and the leaderboard.
    page.goto("/")
    page.locator(f'#tournaments li[data-tournament-id="{tid}"]').wait_for()
    board = api.get("/leaderboard")["items"]
    page.locator("#leaderboard tbody tr").first.wait_for()
    assert page.locator("#leaderboard tbody tr").count() == len(board)
    screenshot(page, "lobby-with-tournament")
    page.set_viewport_size(PHONE)
    screenshot(page, "lobby-phone")
