"""Operations, against the real service: ``allfours serve`` with two gunicorn workers.

- metrics: a scrape of ``/metrics`` after a played game sums both workers' counters
  (prometheus_client's multiprocess mode) and names routes by URL rule;
- logs: one JSON line per request, and no token, hidden card or live seed in any line;
- graceful shutdown: SIGTERM answers open long-polls at once and loses no acknowledged
  action.

Every HTTP call has a timeout, every loop is bounded, and every process started here is
stopped (and its children killed) in a finalizer.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from service.engine import CARD_NAMES
from tests.conftest import REDIS_URL
from tests.test_serve import Serve, descendants, kill_leftovers, wait_for

# each test starts what it needs (no module-wide service): pytest-xdist may run them on
# different workers (tests/conftest.py)
SPREAD_OVER_WORKERS = True
EXPECTED_S = 60  # seconds, the whole module: the order workers take it in (tests/conftest.py)

HTTP_TIMEOUT = 15.0


class Service(Serve):
    """``allfours serve --workers 2`` on the test Redis and key prefix; output to a file."""

    def __init__(self, tmp_path: Path, workers: int = 2, **env: str) -> None:
        # no house bots: their accounts and long-polls would count in the checks
        super().__init__(tmp_path, None, workers, **{"ARENA_HOUSE_BOTS": "0", **env})

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Stop it (SIGTERM unless told otherwise) and kill whatever it left running."""
        code = super().stop(sig)
        kill_leftovers(self.seen)
        return code


@pytest.fixture
def service(tmp_path: Path, key_prefix: str) -> Iterator[Any]:
    """A factory of two-worker services; all stopped at teardown."""
    started: list[Service] = []

    def start(**env: str) -> Service:
        full = {"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                "ARENA_RATE_LIMIT": "0", **env}
        s = Service(tmp_path, **full)
        started.append(s)
        s.wait_healthy()
        return s

    yield start
    for s in started:
        s.stop()


def call(method: str, url: str, token: str | None = None, expect: int | None = 200,
         **kw: Any) -> requests.Response:
    """One request on a new connection (so the two workers share the load)."""
    headers = {**kw.pop("headers", {}), **({"Authorization": f"Bearer {token}"} if token
                                            else {})}
    r = requests.request(method, url, headers=headers, timeout=HTTP_TIMEOUT, **kw)
    if expect is not None:
        assert r.status_code == expect, (method, url, r.status_code, r.text)
    return r


def new_table(s: Service, players: int = 2, **game: Any) -> tuple[str, list[str], list[str]]:
    """A game with a bot in every seat: (game id, tokens by seat, bot ids by seat)."""
    # one owner's bots (the first's token): seated at once, no invitation
    bots = [call("POST", s.url("/bots"), json={"name": "ops0"}, expect=201).json()]
    bots += [call("POST", s.url("/bots"), bots[0]["token"], json={"name": f"ops{i}"},
                  expect=201).json() for i in range(1, players)]
    body = {"players": players, "seats": [b["id"] for b in bots], **game}
    created = call("POST", s.url("/games"), bots[0]["token"], json=body, expect=201).json()
    return created["id"], [b["token"] for b in bots], [b["id"] for b in bots]


def play_out(s: Service, game_id: str, tokens: list[str], rng: random.Random,
             max_moves: int = 2000) -> list[str]:
    """Random legal moves until the game is over; the actions applied."""
    played: list[str] = []
    view = call("GET", s.url(f"/games/{game_id}")).json()
    for _ in range(max_moves):
        if view["status"] == "finished":
            return played
        seat = view["turn"]
        mine = call("GET", s.url(f"/games/{game_id}/turn"), tokens[seat],
                    params={"timeout": 5}).json()["view"]
        action = rng.choice(mine["legal_actions"])
        view = call("POST", s.url(f"/games/{game_id}/actions"), tokens[seat],
                    json={"action": action, "version": mine["version"]}).json()
        played.append(action)
    raise AssertionError("the game did not finish")


def scrape(s: Service, token: str | None = None) -> dict[tuple[str, tuple[tuple[str, str], ...]],
                                                           float]:
    """The samples of one scrape: (name, sorted labels) -> value."""
    r = call("GET", s.url("/metrics"), token)
    assert r.headers["Content-Type"].startswith("text/plain")
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


# --- metrics ---------------------------------------------------------------------------------


def test_metrics_after_a_played_game_sum_both_workers(service, tmp_path: Path) -> None:
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    (metrics_dir / "counter_999999.db").write_bytes(b"stale")  # a crashed run's file
    s = service(PROMETHEUS_MULTIPROC_DIR=str(metrics_dir), ARENA_METRICS_TOKEN="scrape-me")
    assert not (metrics_dir / "counter_999999.db").exists()  # cleaned at start

    # the token guards the endpoint
    assert call("GET", s.url("/metrics"), expect=401).headers["Content-Type"].startswith(
        "application/problem+json")
    call("GET", s.url("/metrics"), "wrong", expect=403)

    rng = random.Random(1212)
    game_id, tokens, _ = new_table(s, seed=4242)
    played = play_out(s, game_id, tokens, rng)

    # refusals: an action out of turn, a card not held, a stale version, an unknown game
    other_game, otokens, _ = new_table(s, seed=99)
    view = call("GET", s.url(f"/games/{other_game}"), otokens[0]).json()
    turn = view["turn"]
    mine = call("GET", s.url(f"/games/{other_game}"), otokens[turn]).json()
    refused = [
        call("POST", s.url(f"/games/{other_game}/actions"), otokens[1 - turn],
             json={"action": "stand"}, expect=409),
        call("POST", s.url(f"/games/{other_game}/actions"), otokens[turn],
             json={"action": next(c for c in CARD_NAMES if c not in mine["hand"])},
             expect=409),
        call("POST", s.url(f"/games/{other_game}/actions"), otokens[turn],
             json={"action": mine["legal_actions"][0], "version": mine["version"] + 5},
             expect=409),
        call("GET", s.url("/games/nosuchgame1"), expect=404),
    ]
    kinds = Counter(r.json()["type"].rsplit("/", 1)[1] for r in refused)
    assert {"not-your-turn", "illegal-action", "version-conflict", "not-found"} <= set(kinds)

    # a move clock that runs out: the sweeper plays the default action
    timed, _, _ = new_table(s, seed=7, move_limit=0.5)
    wait_for(lambda: call("GET", s.url(f"/games/{timed}")).json()["version"] > 1, 60,
             "the move timeout")

    # a long-poll held open while we scrape: the live gauge counts it
    poll = threading.Thread(target=call, args=("GET", s.url(f"/games/{other_game}/turn"),
                                               otokens[1 - turn]),
                            kwargs={"params": {"timeout": 4}}, daemon=True)
    poll.start()
    samples: dict = {}

    def polling() -> bool:
        nonlocal samples
        samples = scrape(s, "scrape-me")
        return value(samples, "allfours_open_long_polls") == 1

    wait_for(polling, 5, "the open long-poll in the gauge")
    poll.join(10)

    # each worker writes its tallies every second (service.metrics.flush): wait for that
    actions_route = "/games/<game_id>/actions"

    def settled() -> bool:
        nonlocal samples
        samples = scrape(s, "scrape-me")
        return value(samples, "allfours_http_requests_total", route=actions_route,
                     method="POST", status="200") >= len(played)

    wait_for(settled, 5, "the actions in the metrics")
    time.sleep(1.5)  # one more flush of every worker: nothing left to add
    samples = scrape(s, "scrape-me")
    ok = value(samples, "allfours_http_requests_total", route=actions_route, method="POST",
               status="200")
    assert ok == len(played)  # every action request, whichever worker answered it
    assert value(samples, "allfours_actions_applied_total", source="bot") == len(played)
    assert value(samples, "allfours_actions_applied_total", source="timeout") >= 1
    assert value(samples, "allfours_move_timeouts_total") >= 1
    turns = value(samples, "allfours_http_requests_total", route="/games/<game_id>/turn",
                  method="GET", status="200")
    assert turns == len(played) + 1
    assert value(samples, "allfours_http_request_duration_seconds_count", route=actions_route,
                 method="POST") == len(played) + 3
    for kind, n in (kinds + Counter(["unauthorized", "forbidden"])).items():
        assert value(samples, "allfours_problems_total", type=kind) == n, kind
    assert value(samples, "allfours_http_requests_total", route="/games/<game_id>",
                 method="GET", status="404") == 1
    # three games: the one played, the refusals' one, the one the clock plays (it may end)
    assert value(samples, "allfours_games", status="finished") >= 1
    assert sum(value(samples, "allfours_games", status=st)
               for st in ("waiting", "active", "finished")) == 3
    assert value(samples, "allfours_open_long_polls") == 0
    assert value(samples, "allfours_open_event_streams") == 0
    assert value(samples, "allfours_wakeup_latency_seconds_count") > 0
    # routes are URL rules: no game id, no raw path in any label
    labels = " ".join(v for (_, ls) in samples for _, v in ls)
    assert game_id not in labels and "nosuchgame1" not in labels
    # both workers wrote their own files, and the scrape summed them
    pids = {m.group(1) for p in metrics_dir.iterdir()
            if (m := re.search(r"_(\d+)\.db$", p.name))}
    assert len(pids) >= 2, sorted(p.name for p in metrics_dir.iterdir())


# --- logs ------------------------------------------------------------------------------------

# A card as the service writes one ("AS", "TD", "2C"), standing alone, not inside a word.
CARD = re.compile(r"(?<![A-Za-z0-9])[2-9TJQKA][CDHS](?![A-Za-z0-9])")
ACCESS_FIELDS = {"ts", "level", "logger", "message", "request_id", "method", "route",
                 "status", "duration_ms"}


def test_one_json_line_per_request_and_no_secret_in_any_line(service) -> None:
    s = service()
    seed = random.Random().randrange(10**11, 10**12)  # 12 digits: no accidental match
    rng = random.Random(seed)
    game_id, tokens, bots = new_table(s, seed=seed)
    sent: dict[str, tuple[str, str]] = {}  # request id -> (route, bot id)

    def traced(method: str, path: str, route: str, token: str | None, bot: str | None,
               **kw: Any) -> requests.Response:
        rid = f"t-{len(sent):05d}"
        r = call(method, s.url(path), token, headers={"X-Request-ID": rid}, **kw)
        assert r.headers["X-Request-ID"] == rid  # taken from the request, returned
        sent[rid] = (route, bot or "")
        return r

    # the game as bots play it: every request names cards (hands, actions) and tokens
    view = call("GET", s.url(f"/games/{game_id}")).json()
    for _ in range(2000):
        if view["status"] == "finished":
            break
        seat = view["turn"]
        mine = traced("GET", f"/games/{game_id}", "/games/<game_id>", tokens[seat],
                      bots[seat]).json()
        assert mine["hand"] and all(CARD.fullmatch(c) for c in mine["hand"])
        traced("GET", f"/games/{game_id}/record", "/games/<game_id>/record", tokens[seat],
               bots[seat])
        # a refused card (not held) and a good one, both named in the body
        bad = next(c for c in CARD_NAMES if c not in mine["hand"])
        traced("POST", f"/games/{game_id}/actions", "/games/<game_id>/actions",
               tokens[seat], bots[seat], expect=409, json={"action": bad})
        view = traced("POST", f"/games/{game_id}/actions", "/games/<game_id>/actions",
                      tokens[seat], bots[seat], params={"wait": 0},
                      json={"action": rng.choice(mine["legal_actions"])}).json()
    assert view["status"] == "finished"
    # a generated id when the client sends none (or an unusable one)
    plain = call("GET", s.url("/healthz"), headers={"X-Request-ID": "bad id with spaces"})
    assert re.fullmatch(r"[0-9a-f]+\.[0-9a-f]{6}-[0-9a-f]+", plain.headers["X-Request-ID"])
    s.stop()  # flushes every worker's output

    lines = [ln for ln in s.output().splitlines() if ln.strip()]
    text = "\n".join(lines)
    for token in tokens:
        assert token not in text
    assert str(seed) not in text
    cards = CARD.findall(text)
    assert not cards, cards
    # the check would see a card or the seed: a view's hand, written as a line would be
    assert CARD.search(json.dumps({"hand": mine["hand"]}))

    access: dict[str, dict[str, Any]] = {}
    for line in lines:
        if line.startswith("allfours serve: "):  # the supervisor's own lines
            continue
        entry = json.loads(line)  # every other line is one JSON object
        assert {"ts", "level", "logger", "message"} <= set(entry), entry
        if entry["logger"] == "allfours.access":
            assert set(entry) >= ACCESS_FIELDS, entry
            assert entry["request_id"] not in access  # one line per request
            access[entry["request_id"]] = entry
    for rid, (route, bot) in sent.items():
        entry = access[rid]
        assert entry["route"] == route and entry["bot"] == bot
        assert entry["game"] == game_id
        assert isinstance(entry["duration_ms"], float) and entry["duration_ms"] >= 0
        if route != "/games/<game_id>/record" and entry["status"] == 200:
            assert isinstance(entry["version"], int)
    assert plain.headers["X-Request-ID"] in access


# --- graceful shutdown ---------------------------------------------------------------------


def stopping(r: requests.Response) -> bool:
    """The documented answer of a worker that is shutting down to a request it was sent
    after its SIGTERM (a 503 the client retries elsewhere or later): not an error."""
    return (r.status_code == 503
            and r.headers.get("Content-Type", "").startswith("application/problem+json")
            and r.json().get("type") == "/problems/shutting-down")


class Bot:
    """One bot playing its seats of one game with ``?wait``, recording every action the
    service acknowledged (200) with the version it was decided on, until told to stop or
    a request fails (the service went away, or said it is going: ``stopping``)."""

    def __init__(self, base: str, game_id: str, token: str, seed: int) -> None:
        self.base, self.game_id, self.token = base, game_id, token
        self.rng = random.Random(seed)
        self.acked: list[tuple[int, str]] = []  # (version decided on, action)
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"

    def run(self) -> None:
        try:
            view = self.session.get(f"{self.base}/games/{self.game_id}",
                                    timeout=HTTP_TIMEOUT).json()
            for n in range(5000):
                if self.stop.is_set() or view["status"] == "finished":
                    return
                if not view["your_turn"]:
                    r = self.session.get(f"{self.base}/games/{self.game_id}/turn",
                                         params={"timeout": 20}, timeout=30)
                    if stopping(r):
                        return
                    if r.status_code != 200:
                        self.errors.append(f"turn {r.status_code} {r.text[:200]}")
                        return
                    view = r.json()["view"]
                    continue
                action = self.rng.choice(view["legal_actions"])
                r = self.session.post(
                    f"{self.base}/games/{self.game_id}/actions", params={"wait": 20},
                    headers={"Idempotency-Key": f"{self.token[:8]}-{n}"},
                    json={"action": action, "version": view["version"]}, timeout=30)
                if r.status_code == 200:
                    self.acked.append((view["version"], action))
                    view = r.json()
                elif stopping(r):
                    return
                elif r.status_code >= 500:
                    self.errors.append(f"act {r.status_code} {r.text[:200]}")
                    return
                else:
                    view = self.session.get(f"{self.base}/games/{self.game_id}",
                                            timeout=HTTP_TIMEOUT).json()
        except requests.RequestException:
            return  # the service went away mid-request: nothing was acknowledged


def test_sigterm_answers_waiters_at_once_and_loses_no_acknowledged_action(
    service, key_prefix: str, redis_client
) -> None:
    from service.engine import parse_action
    from service.storage.store import Store

    s = service()
    tables = [new_table(s, seed=100 + i) for i in range(4)]
    bots: list[Bot] = []
    for t, (game_id, tokens, _) in enumerate(tables):
        bots += [Bot(s.url(""), game_id, tok, 1000 * t + i) for i, tok in enumerate(tokens)]
    threads = [threading.Thread(target=b.run, daemon=True) for b in bots]
    for th in threads:
        th.start()

    # load for a while: every bot has had some actions acknowledged
    wait_for(lambda: sum(len(b.acked) for b in bots) >= 40, 60, "the bots playing")

    # then a spectator long-poll that nothing will answer (a game nobody plays), a bot's
    # wait for a turn in any game, and an event stream of that game: each asks to wait
    # the longest a wait may, far beyond gunicorn's graceful timeout, so a worker that
    # held them would be cut off by it (its log line, and no answer) rather than answer
    idle, idle_tokens, _ = new_table(s, seed=5)
    idle_view = call("GET", s.url(f"/games/{idle}")).json()
    answers: dict[str, Any] = {}
    poll_s = 30  # the most a long-poll may ask for (the `timeout` parameter's maximum)

    def long_poll() -> None:
        r = requests.get(s.url(f"/games/{idle}/turn"),
                         params={"after": idle_view["version"], "timeout": poll_s},
                         timeout=poll_s + 30)
        answers["poll"] = (time.monotonic(), r.status_code, r.json())

    def bot_turns() -> None:  # the seat not in turn waits for a turn in any game
        other = idle_tokens[1 - idle_view["turn"]]
        r = requests.get(s.url("/bots/me/turns"), params={"timeout": poll_s},
                         timeout=poll_s + 30, headers={"Authorization": f"Bearer {other}"})
        answers["turns"] = (time.monotonic(), r.status_code, r.json())

    def stream() -> None:
        with requests.get(s.url(f"/games/{idle}/events"), stream=True,
                          timeout=poll_s + 30) as r:
            text = "".join(chunk for chunk in r.iter_content(None, decode_unicode=True))
        answers["stream"] = (time.monotonic(), r.status_code, text)

    waiters = [threading.Thread(target=f, daemon=True) for f in (long_poll, bot_turns, stream)]
    for th in waiters:
        th.start()
    wait_for(lambda: scrape(s).get(("allfours_open_long_polls", ()), 0) >= 2, 10,
             "the long-polls open")

    sigterm = time.monotonic()
    code = s.stop(signal.SIGTERM)
    assert code == 0, s.output()[-3000:]
    for th in [*threads, *waiters]:
        th.join(poll_s + 30)
    # the waiters did not hold the workers to their timeout: each was answered after
    # the SIGTERM, and none was cut off by gunicorn's graceful timeout (the log line
    # checked below)
    for name in ("poll", "turns", "stream"):
        at, status, _ = answers[name]
        assert status == 200, answers[name]
        assert at >= sigterm, (name, "answered before the SIGTERM")
    assert answers["poll"][2]["timed_out"] is True  # nothing happened: the state as it is
    assert answers["poll"][2]["view"]["version"] == idle_view["version"]
    assert answers["turns"][2] == {"timed_out": True, "games": [], "invitations": []}
    assert "retry: " in answers["stream"][2].split("\n\n")[-2]  # ends with a retry hint
    assert "Worker graceful timeout" not in s.output()  # nothing was cut off
    assert not [e for b in bots for e in b.errors]

    # after a restart, every acknowledged action is in its game, where it was played
    store = Store(redis_client, key_prefix)
    total = 0
    for t, (game_id, _, _) in enumerate(tables):
        game = store.get_game(game_id)
        assert game is not None
        for b in bots[2 * t: 2 * t + 2]:
            for version, action in b.acked:
                assert game.actions[version - 1] == parse_action(action), (game_id, version)
                total += 1
    assert total >= 40
    again = service()
    for game_id, tokens, _ in tables:
        view = call("GET", again.url(f"/games/{game_id}"), tokens[0]).json()
        assert view["version"] == 1 + len(store.get_game(game_id).actions)


def test_a_quick_stop_still_answers_open_long_polls(service) -> None:
    """SIGINT to gunicorn: no graceful wait, workers exit 0.1 s after being told
    (``worker_int``); an open long-poll is answered in that moment, not cut off."""
    s = service()
    game_id, tokens, _ = new_table(s, seed=8)
    view = call("GET", s.url(f"/games/{game_id}")).json()
    answers: list[tuple[float, int]] = []

    def long_poll() -> None:
        try:
            r = requests.get(s.url(f"/games/{game_id}/turn"), timeout=40,
                             params={"timeout": 25},
                             headers={"Authorization": f"Bearer {tokens[1 - view['turn']]}"})
            answers.append((time.monotonic(), r.status_code))
        except requests.RequestException:
            answers.append((time.monotonic(), 0))

    poll = threading.Thread(target=long_poll, daemon=True)
    poll.start()
    wait_for(lambda: value(scrape(s), "allfours_open_long_polls") == 1, 10,
             "the long-poll open")
    arbiter = min(pid for pid, line in descendants(s.proc.pid).items() if "gunicorn" in line)
    sent = time.monotonic()
    os.kill(arbiter, signal.SIGINT)
    poll.join(30)
    assert answers and answers[0][1] == 200, answers
    assert answers[0][0] - sent < 5
