"""The spectator page's event stream recovers from a 503 and from a cut, resuming exactly
: the browser's EventSource retries a cut by itself but gives up for good after
a non-200 answer, so the page opens a new one with backoff from the last event it saw.

Playwright routes the page's stream requests: the first is answered 503 (a worker at its
connection cap), the next with the game's first events and then the end of the response
(a cut), the next 503 again; the rest reach the real service while bots play to the end.
"""

from __future__ import annotations

import json
import threading
from typing import Any
from urllib.parse import parse_qs, urlparse

import requests

from tests.web.test_browser import record_items, sheet_items, table

SHED = json.dumps({"type": "/problems/service-unavailable", "status": 503,
                   "title": "The game store is unavailable; retry shortly"})


def first_events(base: str, game_id: str, count: int) -> tuple[str, str]:
    """The first ``count`` events of the game's stream as the server sends them, and the
    last one's id."""
    text = ""
    with requests.get(f"{base}/games/{game_id}/events", stream=True, timeout=10) as r:
        for chunk in r.iter_content(chunk_size=None):
            text += chunk.decode()
            blocks = [b for b in text.split("\n\n") if b.startswith("id: ")]
            if len(blocks) >= count:
                break
    blocks = [b for b in text.split("\n\n") if b.startswith("id: ")][:count]
    last = blocks[-1].split("\n")[0][len("id: "):]
    return "retry: 200\n\n" + "".join(b + "\n\n" for b in blocks), last


def test_the_spectator_page_recovers_from_a_503_and_a_cut_resuming_exactly(
        page, api, bots, service) -> None:
    game_id, tokens = table(api, 2, ["Reco", "Nnect"])
    cut_body, cut_after = first_events(service.base, game_id, 2)
    seen: list[dict[str, Any]] = []

    def on_stream(route: Any) -> None:
        request = route.request
        n = len(seen)
        seen.append({"url": request.url,
                     "last": request.all_headers().get("last-event-id")})
        if n in (0, 2):
            route.fulfill(status=503, body=SHED, headers={"Retry-After": "1"},
                          content_type="application/problem+json")
        elif n == 1:
            route.fulfill(status=200, body=cut_body, content_type="text/event-stream")
        else:
            route.continue_()

    page.route(f"**/games/{game_id}/events*", on_stream)
    ids: list[str] = []
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.on("Network.eventSourceMessageReceived", lambda m: ids.append(m["eventId"]))

    page.goto(f"/games/{game_id}")
    page.locator("#felt .seat").first.wait_for()
    page.locator('body[data-stream="open"]').wait_for(timeout=30_000)
    gate = threading.Event()
    gate.set()
    for t in tokens:
        bots(t, gate=gate)
    page.locator('body[data-stream="ended"]').wait_for(timeout=180_000)

    assert len(seen) >= 4, seen
    # after the cut the browser retried by itself; after the second 503 the page did, from
    # the last event it had (?last_event_id=), and the server took it from there
    resumed = parse_qs(urlparse(seen[3]["url"]).query).get("last_event_id")
    assert resumed == [cut_after], seen
    assert seen[3]["last"] in (None, cut_after), seen
    # every event once, in order
    rec = api.get(f"/games/{game_id}/record")
    assert rec["complete"]
    assert ids and len(ids) == len(set(ids)), ids
    keys = [tuple(int(x) for x in i.split(".")) for i in ids]
    assert keys == sorted(keys)
    assert sheet_items(page) == record_items(rec)
    # the browser's own messages about the refused streams are expected here
    page.problems[:] = [p for p in page.problems  # type: ignore[attr-defined]
                        if "EventSource" not in p and "503" not in p]
