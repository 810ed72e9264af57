"""What a person does to play and then review a game, in clicks and seconds (issue 41).

    python bench/person_review.py [--players 2] [--size desktop|phone] [--target 7]
                                  [--quality default] [--nice 19]

1. Starts its own ``redis-server``, the service under gunicorn as deployed (its analysis
   worker at ``--quality``, the service's default unless told) and the house bots, as
   ``allfours serve`` runs them.
2. In Chromium (``/usr/bin/chromium``, at 1366×768 or a 390×844 touch screen), as a
   person: opens the lobby, chooses the table size, random opponents and ``--target``
   points, presses *Play against a bot* and plays the first legal card or decision at each
   turn to the end; then presses *Review this game* in the end-of-game box.
3. Prints one JSON line: the clicks and seconds to the first card (the lobby's button
   pressed → the person's first move applied), the person's moves, and the clicks and
   seconds from the game's end (the result shown) to the review shown (every decision
   valued and drawn), with the number of decisions the analysis valued.

The seconds depend on the machine and on what else runs on it: the analysis is CPU work,
at the lowest priority by default (``ARENA_ANALYSIS_NICE`` 19: ``SCHED_IDLE``, only CPU time
nothing else wants), so on a busy machine it waits; ``--nice 0`` runs it at the service's
priority, to see its own cost. Figures for docs/benchmarks.md, never a test's limit.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as ``python bench/person_review.py``, this file's directory comes first on sys.path,
# where bench/http.py would shadow the standard library's ``http`` package: drop it.
_HERE = Path(__file__).resolve().parent
ROOT = _HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(ROOT))

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

from bench.harness import HOST, start_redis, start_service, stop, wait_until  # noqa: E402
from service.storage.embedded import die_with_parent  # noqa: E402

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
FIRST_LEGAL = """() => {
  const b = document.querySelector('#felt .seat.mine .decisions button:not([disabled]), '
    + '#felt .seat.mine button.card:not([disabled])');
  return b ? (b.dataset.card || b.dataset.action) : null;
}"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--players", type=int, default=2, choices=(2, 4))
    ap.add_argument("--size", default="desktop", choices=("desktop", "phone"))
    ap.add_argument("--target", default="7", choices=("7", "14", "21"))
    ap.add_argument("--quality", default="default")
    ap.add_argument("--nice", default="19", help="ARENA_ANALYSIS_NICE of the worker")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        redis_proc, redis_port = start_redis(work)
        settings = {"ARENA_RATE_LIMIT": "0", "ARENA_ANALYSIS_WORKERS": "1",
                    "ARENA_ANALYSIS_QUALITY": args.quality, "ARENA_KEY_PREFIX": "bench41:",
                    "ARENA_ANALYSIS_NICE": args.nice}
        service, port = start_service(redis_port, 2, work / "gunicorn.log", settings)
        base = f"http://{HOST}:{port}"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "REDIS_URL": f"redis://{HOST}:{redis_port}/0",
               **settings}
        house = subprocess.Popen([sys.executable, "-m", "service.arena.accounts.house",
                                  "--server", base], env=env, cwd=ROOT,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 preexec_fn=die_with_parent)
        try:
            import redis

            r = redis.Redis(host=HOST, port=redis_port)
            wait_until(lambda: r.exists("bench41:house:alive"), 60, "the house bots")
            print(json.dumps(run(base, args, sync_playwright)), flush=True)
        finally:
            stop(house)
            stop(service)
            stop(redis_proc)


def run(base: str, args: argparse.Namespace, sync_playwright: object) -> dict[str, object]:
    phone = args.size == "phone"
    viewport = {"width": 390, "height": 844} if phone else {"width": 1366, "height": 768}
    with sync_playwright() as p:  # type: ignore[operator]
        browser = p.chromium.launch(executable_path=CHROMIUM,
                                    args=["--headless=new", "--no-sandbox", "--disable-gpu"])
        context = browser.new_context(viewport=viewport, base_url=base, has_touch=phone,
                                      is_mobile=phone)
        pg = context.new_page()
        press = (lambda loc: loc.tap()) if phone else (lambda loc: loc.click())
        pg.goto("/")
        form = pg.locator("#house-form")
        form.get_by_label(f"{args.players} players").check()
        form.get_by_label("Opponents").select_option("random")
        form.get_by_label("Play to").select_option(args.target)
        clicks = 1
        start = time.monotonic()
        press(form.get_by_role("button", name="Play against a bot"))
        first_card_s = None
        moves = 0
        for _ in range(1000):
            pg.wait_for_function("() => document.body.dataset.status === 'finished' || "
                                 "document.body.dataset.yourTurn === 'true'", timeout=120_000)
            if pg.get_attribute("body", "data-status") == "finished":
                break
            version = pg.get_attribute("body", "data-version")
            choice = pg.evaluate(FIRST_LEGAL)
            if choice is None:
                continue
            sel = (f'#felt .seat.mine button.card[data-card="{choice}"]' if len(choice) == 2
                   else f'#felt .seat.mine .decisions button[data-action="{choice}"]')
            try:
                press(pg.locator(sel))
            except Exception:  # redrawn under the finger: look again
                continue
            pg.wait_for_function(f"() => document.body.dataset.version !== '{version}' || "
                                 "document.body.dataset.status === 'finished'", timeout=30_000)
            moves += 1
            if first_card_s is None:
                first_card_s = time.monotonic() - start
                clicks += 1
        pg.locator("#game-over").wait_for()
        ended = time.monotonic()
        press(pg.locator("#review"))
        pg.locator("#analysis[data-state=done]").wait_for(timeout=900_000)
        review_s = time.monotonic() - ended
        decisions = pg.locator("#an-chart circle.an-dot").count()
        browser.close()
    return {
        "bench": "person_review", "players": args.players, "size": args.size,
        "target": int(args.target), "quality": args.quality, "nice": int(args.nice),
        "first_card": {"clicks": clicks, "seconds": round(first_card_s or 0, 2)},
        "person_moves": moves,
        "game_end_to_review": {"clicks": 1, "seconds": round(review_s, 2),
                               "decisions_valued": decisions},
    }


if __name__ == "__main__":
    main()
