"""The ladder in the browser: the lobby shows each ladder with who is queued and
its standings, and a bot's page charts its rating game by game — both exactly as the
public API says (standings, history)."""

from __future__ import annotations

from tests.web.support import DESKTOP, PHONE, screenshot, wait_until


def test_lobby_shows_the_ladder_and_a_bot_page_charts_its_rating(page, api, bots):
    made = [api.bot(n, new_owner=True) for n in ("Tassa", "Tamboo")]  # two owners
    for _, token in made:
        bots(token)
        r = api.call("POST", "/ladders/2p/entry", token, json={"games": 2})
        assert r.status_code == 200, r.text
    ids = [b for b, _ in made]

    def done():
        return all(api.get("/ladders/2p/entry", t)["state"] == "off" for _, t in made)

    wait_until(done, 240, "both bots' two ladder games", every=0.5)
    watcher, watcher_token = api.bot("Waiting Willie")
    bots(watcher_token)  # it plays its validation game (a first entry, docs/ladder.md)
    assert api.call("POST", "/ladders/2p/entry", watcher_token, json={}).status_code == 200
    wait_until(lambda: api.get("/ladders/2p/entry", watcher_token)["state"] == "waiting",
               240, "Willie's validation game", every=0.5)
    standings = api.get("/ladders/2p/standings")["items"]
    mine = [r for r in standings if r["bot_id"] in ids]
    assert len(mine) == 2 and all(r["games"] == 2 for r in mine)

    page.goto("/")
    page.locator('#ladders[data-loaded=true]').wait_for()
    page.locator(f'#ladders [data-ladder="2p"] li[data-bot-id="{watcher}"]').wait_for()
    assert page.locator(
        f'#ladders [data-ladder="2p"] li[data-bot-id="{watcher}"]').get_attribute(
        "data-state") == "waiting"
    for row in mine:
        tr = page.locator(f'#ladders [data-ladder="2p"] tbody tr[data-bot-id="{row["bot_id"]}"]')
        # a provisional bot (too few games, docs/ratings.md) has no rank: shown as "–"
        assert tr.get_attribute("data-rank") == ("" if row["rank"] is None else str(row["rank"]))
        assert tr.get_attribute("data-provisional") == str(row["provisional"]).lower()
        assert tr.locator("[data-col=rating]").text_content() == \
            f"{row['mu']:.2f} ± {row['sigma']:.2f}"
        assert tr.locator("[data-col=form]").text_content() == row["form"]
    screenshot(page, "lobby-ladder")

    bot = ids[0]
    hist = api.get(f"/ladders/2p/bots/{bot}/history")
    page.goto(f"/bots/{bot}")
    page.locator("body[data-loaded=true]").wait_for()
    assert page.locator("#b-name").text_content() == "Tassa"
    rating = page.locator('#ratings tr[data-ladder="2p"] [data-col=rating]').text_content()
    newest = hist["items"][0]["after"]
    assert rating == f"{newest['mu']:.2f} ± {newest['sigma']:.2f}"
    # one line for the 2p ladder: its start and one point per game
    points = page.locator("#chart svg polyline.mu").get_attribute("points").split()
    assert len(points) == hist["games"] + 1 == 3
    assert page.locator("#games tbody tr").count() == 2
    screenshot(page, "bot-page")
    page.set_viewport_size(PHONE)
    screenshot(page, "bot-page-phone")
    page.set_viewport_size(DESKTOP)
    api.call("DELETE", "/ladders/2p/entry", watcher_token)
