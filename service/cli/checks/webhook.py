"""``allfours check-bot --webhook URL -- CMD``: put a webhook bot (the service calls it)
through the situations real play brings, before it competes.

Why this shape: a webhook bot does not ask for its turns, so the pulling check's proxy in
front of the service has nothing to watch. Here check-bot starts its own service (the
embedded valkey-server and gunicorn, as for a pulling bot) allowed to call loopback
addresses (``ARENA_CALLBACK_NETWORKS``: the guard refuses them everywhere else), puts its
real TCP proxy (:mod:`service.cli.checks.proxy`) between the service and the bot's URL,
registers the proxy's address as the bot's callback URL, and runs the bot's command with
``ARENA_WEBHOOK_SECRET`` (the secret that registration answered), ``PORT`` (the URL's),
``ARENA_URL`` and ``ARENA_TOKEN`` in its environment. Every call the service makes
reaches the bot through the proxy, which logs it and injects, for real:

* a call whose connection breaks before the bot sees it (the service retries it);
* a call answered ``503`` on the way (the service gives up; the next turn carries
  ``last_failure``);
* a call held until the clock played the move (it reaches the bot past its move limit);
* a restart of the service mid-game.

check-bot also calls the bot itself, signed as the service signs, with a forged
signature, a stale timestamp, a replayed delivery and a turn for a position the game has
left. Nothing of the bot is mocked; every verdict is read from the proxy's log, the
service's delivery records (``GET /bots/me/callback/deliveries``) and the game's record.

The games, one after another: ``duel`` (2 players, target 7, a 5 s move limit, the
injections and the restart), ``clock`` (2 players, every house rule changed, a 3 s move
limit), ``team`` (4 players, a 3 s move limit, the bot in seats 0 and 2).
"""

from __future__ import annotations

import json
import secrets
import socket
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from service.arena.webhooks.callbacks import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    sign,
)
from service.cli.checks.games import Opponent, decision_kind
from service.cli.checks.proxy import CheckProxy, Exchange, Rule
from service.cli.checks.report import Result
from service.cli.checks.runner import CheckRun, check_unknown, run_command
from service.cli.checks.service import (
    CHECK_WORKERS,
    CheckError,
    CheckService,
    call,
    register_bots,
    seat_game,
)
from service.cli.checks.situations import HOUSE_RULES, link_to

HOOKS = "webhooks-the-service-calls-your-bot"
START_WAIT = 90.0  # seconds for the bot's port to open (a build included)
VERIFY_WAIT = 20.0  # seconds for the URL's verification to pass once asked for
GAME_CAP = {"duel": 150.0, "clock": 90.0, "team": 120.0}
DUEL_LIMIT, CLOCK_LIMIT, TEAM_LIMIT = 5, 3, 3
PROBE_TIMEOUT = 5.0  # seconds the bot gets to answer one of check-bot's own requests
# loopback, for the bot on this machine (the guard refuses it unless listed)
NETWORKS = "127.0.0.0/8,::1/128"

# situation -> (game, docs anchor, title)
SITUATIONS: dict[str, tuple[str, str, str]] = {
    "verification": (("*",), HOOKS, "the URL's verification: the challenge echoed"),
    "two_player": (("duel",), HOOKS, "a 2-player game played to its end"),
    "four_player_two_seats": (("team",), "accounts-games-and-seats",
                              "a 4-player game holding both seats of a team"),
    "decisions": (("*",), "the-view", "every decision kind: stand/beg, give one/run, play"),
    "house_rules": (("clock",), "", "a game with every house rule changed"),
    "move_limit": (("clock",), "deadlines", "every call answered within a 3 s move limit"),
    "signature": (("duel",), HOOKS, "a forged, a stale and a replayed request refused"),
    "stale_version": (("duel",), "versions-and-conflicts",
                      "a turn for a position the game has left (a second call)"),
    "late_call": (("duel",), HOOKS, "a call that reached the bot past the move limit"),
    "retries": (("duel",), HOOKS, "a call retried after a broken connection, one lost to a 503"),
    "illegal_action": (("*",), "errors", "only legal actions: no answer refused"),
    "restart": (("duel",), "errors", "the service restarted mid-game"),
}


# a failure's kind of cause (service.cli.checks.report.CAUSES), and what real play does
CAUSE = {"verification": "refused", "signature": "refused", "stale_version": "refused",
         "retries": "refused", "late_call": "refused", "illegal_action": "refused",
         "move_limit": "slow"}
REAL_PLAY = {
    "verification": "an unverified URL is never called: the bot plays no game",
    "signature": "whoever finds the URL can answer the service's calls in its name, or "
                 "replay them",
    "move_limit": "the clock plays its seat each time an answer outlasts the deadline",
    "illegal_action": "each refused answer leaves the turn to the clock",
    "*": "the clock plays its seat for each turn it does not answer in time",
}


def docs_link(situation: str) -> str:
    return link_to(SITUATIONS[situation][1])


@dataclass
class HookRun:
    """One game as played: the service's record, the deliveries, what was injected."""

    name: str
    game_id: str = ""
    bot_seats: tuple[int, ...] = ()
    finished: bool = False
    record: dict[str, Any] = field(default_factory=dict)
    deliveries: list[dict[str, Any]] = field(default_factory=list)
    marks: dict[str, Any] = field(default_factory=dict)
    rules: dict[str, Rule] = field(default_factory=dict)
    started: float = 0.0
    ended: float = 0.0

    def bot_timeouts(self) -> list[dict[str, Any]]:
        return [t for t in self.record.get("timeouts") or [] if t["seat"] in self.bot_seats]

    def allowed_timeouts(self) -> int:
        """The bot's moves the clock played because check-bot made it so."""
        return sum(1 for name in ("unavailable", "late_call")
                   if name in self.rules and self.rules[name].fired is not None)


class WebhookService(CheckService):
    """check-bot's service, allowed to call the bot on this machine (and nothing else
    private), with the default retries."""

    extra_env = {"ARENA_CALLBACK_NETWORKS": NETWORKS, "ARENA_CALLBACK_RETRIES": "2",
                 "ARENA_RATE_LIMIT": "0"}


def _turn_calls(proxy: CheckProxy, game_id: str) -> list[Exchange]:
    """The service's turn calls in ``game_id``, in order. Reads the log without the proxy's
    lock: a rule's ``match`` runs under it."""
    return [e for e in list(proxy.log) if isinstance(e.body, dict)
            and e.body.get("event") == "turn" and e.body.get("game_id") == game_id]


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


class WebhookCheck(CheckRun):
    """One run of check-bot in webhook mode: the service, the proxy, the bot, the games."""

    situations = SITUATIONS
    docs_link = staticmethod(docs_link)

    def __init__(self, url: str, command: list[str] | str, only: set[str] | None = None,
                 quiet: bool = False, workers: int = CHECK_WORKERS) -> None:
        self.url = url
        split = urlsplit(url)
        if split.scheme != "http" or not split.hostname or not split.port:
            raise CheckError(f"--webhook {url!r}: give the bot's own http URL with its port, "
                             "e.g. http://127.0.0.1:8080/")
        self.bot_host, self.bot_port = split.hostname, split.port
        self.bot_path = split.path or "/"
        self.command = command
        self.only = only
        self.quiet = quiet
        self.work = Path(tempfile.mkdtemp(prefix="allfours-check-webhook-"))
        self.service = WebhookService(admin_token=uuid.uuid4().hex,
                                      data_dir=self.work / "data", workers=workers)
        self.proxy: CheckProxy | None = None
        self.bot = None
        self.bot_log = self.work / "bot.log"
        self.runs: dict[str, HookRun] = {}
        self.secret = ""
        self.verified: tuple[bool, str] = (False, "not tried")
        self.probes: dict[str, tuple[int | None, Any]] = {}
        self.stop = threading.Event()

    # --- the run ---------------------------------------------------------------------------

    def run(self) -> list[Result]:
        try:
            self.say("starting the service (embedded valkey-server + gunicorn)")
            self.service.start()
            self.proxy = CheckProxy((self.bot_host, self.bot_port)).start()
            self.me, self.opponent = register_bots(self.base, ["checked-bot", "check-opponent"])
            hook_url = f"{self.proxy.url}{self.bot_path}"
            made = call(self.base, "PUT", "/bots/me/callback", self.me["token"],
                        {"url": hook_url})
            self.secret = made["secret"]
            self.start_bot({"ARENA_WEBHOOK_SECRET": self.secret, "PORT": str(self.bot_port),
                            "ARENA_URL": self.base, "ARENA_TOKEN": self.me["token"]})
            self.say(f"bot started; waiting for {self.url} to accept connections")
            if not self.wait_port():
                exited = self.bot.poll() if self.bot else None
                why = (f"the bot's process exited (status {exited}) before its port opened"
                       if exited is not None else
                       f"nothing listened on {self.url} within {START_WAIT:.0f} s")
                return [Result("verification", False, why,
                               "listen on the URL given to --webhook (PORT is in the "
                               "environment) and answer its POSTs", docs_link("verification"),
                               SITUATIONS["verification"][2])]
            self.verified = self.verify()
            if not self.verified[0]:
                return [Result("verification", False, self.verified[1],
                               'answer the signed "verify" request 200 with {"challenge": '
                               "...} echoed (check its signature with ARENA_WEBHOOK_SECRET)",
                               docs_link("verification"), SITUATIONS["verification"][2])]
            for name, plan in (("duel", self.plan_duel), ("clock", self.plan_clock),
                               ("team", self.plan_team)):
                if self.wanted(name):
                    self.say(f"game {name}")
                    self.runs[name] = self.play(name, plan)
                    if name == "duel":
                        self.probe()
            return self.verdicts()
        finally:
            self.close()

    def wait_port(self) -> bool:
        assert self.bot is not None
        deadline = time.monotonic() + START_WAIT
        while time.monotonic() < deadline:
            if _port_open(self.bot_host, self.bot_port):
                return True
            if self.bot.poll() is not None:
                return False
            time.sleep(0.1)
        return False

    def verify(self) -> tuple[bool, str]:
        """Ask for the verification now (the bot is listening) and wait for its outcome."""
        call(self.base, "POST", "/bots/me/callback/verify", self.me["token"], {})
        deadline = time.monotonic() + VERIFY_WAIT
        state: dict[str, Any] = {}
        while time.monotonic() < deadline:
            state = call(self.base, "GET", "/bots/me/callback", self.me["token"])
            if state.get("verified"):
                return True, "the challenge was echoed: the URL is verified"
            if (state.get("verification") or {}).get("status") == "failed":
                break
            time.sleep(0.3)
        v = state.get("verification") or {}
        return False, (f"the URL was not verified: {v.get('status')}, "
                       f"{v.get('attempts')} attempt(s), {v.get('detail') or 'no detail'}")

    # --- one game --------------------------------------------------------------------------

    def play(self, name: str, plan: Callable[[HookRun], Any]) -> HookRun:
        run = HookRun(name)
        players, seats, settings, hooks, opp_seats = plan(run)
        run.started = time.monotonic()
        run.game_id = seat_game(self.base, self.opponent["token"], players, seats, settings)
        self.install_rules(run)
        Opponent(self.base, self.opponent["token"], run.game_id, opp_seats, hooks,
                 self.stop).start()
        deadline = time.monotonic() + GAME_CAP[name]
        while time.monotonic() < deadline:
            view = call(self.base, "GET", f"/games/{run.game_id}/turn?timeout=2")["view"]
            if view["status"] == "finished":
                run.finished = True
                break
            if self.bot is not None and self.bot.poll() is not None:
                run.marks["bot_exited"] = self.bot.returncode
                break
            record = call(self.base, "GET", f"/games/{run.game_id}/record")
            late = [t for t in record.get("timeouts") or [] if t["seat"] in run.bot_seats]
            if len(late) >= 3 + run.allowed_timeouts():
                run.marks["gave_up"] = len(late)  # the verdicts are certain: move on
                break
        run.ended = time.monotonic()
        run.record = call(self.base, "GET", f"/games/{run.game_id}/record")
        run.deliveries = call(self.base, "GET", "/bots/me/callback/deliveries?limit=200"
                              f"&game_id={run.game_id}", self.me["token"])["deliveries"]
        return run

    def install_rules(self, run: HookRun) -> None:
        """The proxy's rules for this game, counted in the service's turn calls to it."""
        assert self.proxy is not None
        proxy = self.proxy

        def nth(n: int) -> Callable[[Exchange], bool]:
            def match(ex: Exchange) -> bool:
                if not (isinstance(ex.body, dict) and ex.body.get("event") == "turn"
                        and ex.body.get("game_id") == run.game_id):
                    return False
                return len(_turn_calls(proxy, run.game_id)) > n
            return match

        if run.name == "duel":
            run.rules["cut"] = proxy.add(Rule("cut", nth(1), "cut"))
            run.rules["unavailable"] = proxy.add(Rule("unavailable", nth(4), "answer",
                                                      status=503, retry_after=1))
            run.rules["late_call"] = proxy.add(Rule(
                "late_call", nth(7), "hold", hold_until=self.moved_on(run),
                hold_max=DUEL_LIMIT + 10.0))

    def moved_on(self, run: HookRun) -> Callable[[], bool]:
        """True once the game's version passed the one the held call delivered."""
        def check() -> bool:
            held = run.rules["late_call"].fired
            if held is None or not isinstance(held.body, dict):
                return False
            try:
                with urllib.request.urlopen(f"{self.base}/games/{run.game_id}",
                                            timeout=5) as resp:
                    view = json.loads(resp.read())
            except (OSError, ValueError):
                return False
            if view["version"] > held.body.get("version", 0):
                run.marks["late_from"] = held.body.get("version")
                run.marks["late_to"] = view["version"]
                return True
            return False
        return check

    # --- the plans ---------------------------------------------------------------------------

    def plan_duel(self, run: HookRun) -> Any:
        run.bot_seats = (0,)

        def restart() -> None:
            self.say("restarting the service")
            run.marks["restart_took"] = round(self.service.restart(), 2)
            run.marks["restart_done"] = time.monotonic()

        wanted = self.only is None or "restart" in self.only
        settings = {"seed": 11, "variants": {"target": 7}, "move_limit": DUEL_LIMIT}
        return 2, [self.me["id"], self.opponent["id"]], settings, \
            ({12: restart} if wanted else {}), [1]

    def plan_clock(self, run: HookRun) -> Any:
        run.bot_seats = (1,)
        settings = {"seed": 24, "variants": HOUSE_RULES, "move_limit": CLOCK_LIMIT}
        return 2, [self.opponent["id"], self.me["id"]], settings, {}, [0]

    def plan_team(self, run: HookRun) -> Any:
        run.bot_seats = (0, 2)
        settings = {"seed": 5, "variants": {"target": 3}, "move_limit": TEAM_LIMIT}
        seats = [self.me["id"], self.opponent["id"], self.me["id"], self.opponent["id"]]
        return 4, seats, settings, {}, [1, 3]

    # --- check-bot's own requests to the bot ------------------------------------------------

    def _send(self, body: bytes, headers: dict[str, str]) -> tuple[int | None, Any]:
        req = urllib.request.Request(self.url, data=body, method="POST", headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=PROBE_TIMEOUT) as resp:
                data = resp.read()
                status = resp.status
        except urllib.error.HTTPError as exc:
            return exc.code, None
        except OSError as exc:
            return None, str(exc)
        try:
            return status, json.loads(data) if data else None
        except ValueError:
            return status, data[:200].decode(errors="replace")

    def _signed(self, envelope: dict[str, Any], secret: str, ts: int | None = None
                ) -> tuple[bytes, dict[str, str]]:
        body = json.dumps(envelope, separators=(",", ":")).encode()
        stamp = str(int(time.time()) if ts is None else ts)
        return body, {"Content-Type": "application/json", TIMESTAMP_HEADER: stamp,
                      SIGNATURE_HEADER: sign(secret, stamp, body),
                      DELIVERY_HEADER: envelope["delivery"], EVENT_HEADER: envelope["event"]}

    def probe(self) -> None:
        """After the duel: a forged, a stale and a replayed request, and a stale turn."""
        assert self.proxy is not None
        run = self.runs["duel"]
        turns = [e for e in _turn_calls(self.proxy, run.game_id)
                 if e.outcome == "forwarded" and e.status == 200 and e.raw]
        if not turns:
            return
        first, last = turns[0], turns[-1]

        def fresh(ex: Exchange) -> dict[str, Any]:
            return {**ex.body, "delivery": secrets.token_hex(8)}

        self.probes["forged"] = self._send(*self._signed(fresh(last), "whsec_" + "0" * 32))
        self.probes["stale_timestamp"] = self._send(
            *self._signed(fresh(last), self.secret, int(time.time()) - 600))
        replay = {k: v for k, v in last.headers.items()
                  if k in ("content-type", "arena-timestamp", "arena-signature",
                           "arena-delivery", "arena-event")}
        self.probes["replayed"] = self._send(last.raw, replay)
        self.probes["stale_turn"] = self._send(*self._signed(fresh(first), self.secret))
        self.probes["stale_legal"] = (None, first.body.get("view", {}).get("legal_actions"))

    # --- the verdicts ------------------------------------------------------------------------

    def _applied(self, run: HookRun) -> list[dict[str, Any]]:
        return [d for d in run.deliveries
                if d.get("event") == "turn" and d.get("outcome") == "applied"]

    def _game_ok(self, run: HookRun) -> tuple[bool, str]:
        applied = len(self._applied(run))
        timeouts = run.bot_timeouts()
        allowed = run.allowed_timeouts()
        if len(timeouts) > allowed:
            plies = ", ".join(f"seat {t['seat']} ply {t['ply']}" for t in timeouts[:6])
            return False, (f"the clock played {len(timeouts)} of the bot's moves ({plies}"
                           f"{f'; {allowed} of them caused by check-bot' if allowed else ''})"
                           f"; its answers applied: {applied}")
        if not run.finished:
            if "bot_exited" in run.marks:
                return False, f"the bot's process exited (status {run.marks['bot_exited']})"
            if "gave_up" in run.marks:
                return False, (f"the clock played {run.marks['gave_up']} of the bot's moves; "
                               "check-bot stopped waiting for the game")
            return False, f"the game was not over after {GAME_CAP[run.name]:.0f} s"
        if not applied:
            return False, "no answer of the bot was applied in this game"
        return True, (f"finished, {len(run.record.get('actions') or [])} actions, {applied} "
                      f"of them the bot's answers, scores {run.record.get('scores')}")

    def explain(self, results: list[Result]) -> list[Result]:
        """Each failure's cause and what real play would do to such a bot."""
        for r in results:
            if not r.passed:
                r.cause = r.cause or CAUSE.get(r.situation, "other")
                r.real_play = r.real_play or REAL_PLAY.get(r.situation, REAL_PLAY["*"])
        return results

    def judge_verification(self) -> tuple[bool, str, str]:
        return self.verified[0], self.verified[1], "echo the verify request's challenge"

    def judge_two_player(self) -> tuple[bool, str, str]:
        ok, what = self._game_ok(self.runs["duel"])
        return ok, f"2 players, target 7, move limit {DUEL_LIMIT} s: {what}", (
            'answer each "turn" request 200 with {"action": one of view.legal_actions}, '
            "well within the move limit")

    def judge_four_player_two_seats(self) -> tuple[bool, str, str]:
        run = self.runs["team"]
        ok, what = self._game_ok(run)
        seats = sorted({d.get("seat") for d in self._applied(run) if "seat" in d})
        if ok and seats and set(seats) != {0, 2}:
            ok, what = False, f"{what}; answers applied only for seat(s) {seats}"
        return ok, f"4 players, the bot in seats 0 and 2: {what}", (
            "answer every turn request whatever its seat: both seats of a team are yours")

    def judge_house_rules(self) -> tuple[bool, str, str]:
        ok, what = self._game_ok(self.runs["clock"])
        return ok, f"variants {HOUSE_RULES}: {what}", (
            "choose only from view.legal_actions (the house rules change what is legal)")

    def judge_move_limit(self) -> tuple[bool, str, str]:
        run = self.runs["clock"]
        ok, what = self._game_ok(run)
        slow = [e for e in _turn_calls(self.proxy, run.game_id) if e.end and e.status == 200
                and e.end - e.start > CLOCK_LIMIT - 0.15] if self.proxy else []
        return ok, f"move limit {CLOCK_LIMIT} s: {what}" + (
            f"; {len(slow)} answer(s) took longer than the call's budget" if slow else ""), (
            "answer within the time left before view.deadline (less 0.15 s): decide fast")

    def judge_decisions(self) -> tuple[bool, str, str]:
        kinds = {"stand_or_beg": 0, "give_one_or_run": 0, "play": 0}
        clock = dict.fromkeys(kinds, 0)
        for run in self.runs.values():
            for d in self._applied(run):
                kinds[decision_kind(d.get("action"))] += 1
            for t in run.bot_timeouts()[run.allowed_timeouts():]:
                clock[decision_kind(t["action"])] += 1
        missed = [k for k, n in clock.items() if n]
        unseen = [k for k in kinds if not kinds[k] and not clock[k]]
        what = f"decided by the bot: {kinds}" + (
            f"; played by the clock: {clock}" if missed else "") + (
            f"; never met in these games: {', '.join(unseen)}" if unseen else "")
        return not missed and bool(kinds["play"]), what, (
            f"the clock decided {', '.join(missed) or 'every move'} for the bot: answer every "
            "decision kind (stand/beg, give_one/run_pack, a card) with one of legal_actions")

    def judge_signature(self) -> tuple[bool, str, str]:
        names = ("forged", "stale_timestamp", "replayed")
        if not all(n in self.probes for n in names):
            return False, "the duel delivered no turn to replay", "play the game"
        got = {n: self.probes[n][0] for n in names}
        accepted = [n for n, status in got.items() if status is None or not 400 <= status < 500]
        what = ("check-bot's own requests: a forged signature answered "
                f"{got['forged']}, a timestamp 10 minutes old {got['stale_timestamp']}, a "
                f"replayed delivery id {got['replayed']}")
        return not accepted, what, (
            f"refuse ({', '.join(accepted)}) with a 4xx: check Arena-Signature (HMAC-SHA256 of "
            '"<Arena-Timestamp>." + body, in constant time), refuse a timestamp more than a '
            "minute off, and a delivery id already seen")

    def judge_stale_version(self) -> tuple[bool, str, str]:
        if "stale_turn" not in self.probes:
            return False, "the duel delivered no turn to send again", "play the game"
        status, answer = self.probes["stale_turn"]
        legal = self.probes["stale_legal"][1] or []
        action = answer.get("action") if isinstance(answer, dict) else None
        what = (f"a signed turn for the duel's first position (its version long gone), new "
                f"delivery id: answered {status}" + (f" with {action!r}" if action else ""))
        ok = status is not None and (
            (200 <= status < 300 and action in legal) or 400 <= status < 500)
        return ok, what, (
            "answer every signed turn request at once, from its own view (the service refuses "
            "an answer to a position that has passed by its version; a second call for one "
            "turn can happen), or refuse it with a 4xx; never fail with a 5xx or no answer")

    def judge_late_call(self) -> tuple[bool, str, str]:
        run = self.runs["duel"]
        rule = run.rules.get("late_call")
        held = rule.fired if rule else None
        if held is None:
            return False, "the duel had too few turns to hold one", "play the game"
        after = [e for e in _turn_calls(self.proxy, run.game_id)  # type: ignore[arg-type]
                 if e.seq > held.seq and e.status == 200]
        ok, what = self._game_ok(run)
        what = (f"held one call until the clock played that move (v{run.marks.get('late_from')}"
                f"→v{run.marks.get('late_to')}), then delivered it: the bot answered "
                f"{held.service_status}; calls answered after it: {len(after)}; {what}")
        return ok and bool(after), what, (
            "a call may reach you after its deadline (the service's answer is then unused): "
            "answer it anyway, and keep answering the next turns")

    def judge_retries(self) -> tuple[bool, str, str]:
        run = self.runs["duel"]
        cut, lost = run.rules["cut"].fired, run.rules["unavailable"].fired
        if cut is None or lost is None:
            return False, "the duel had too few turns to inject into", "play the game"
        calls = _turn_calls(self.proxy, run.game_id)  # type: ignore[arg-type]
        retry = next((e for e in calls if e.seq > cut.seq and isinstance(e.body, dict)
                      and e.body.get("version") == cut.body.get("version")), None)
        after = next((e for e in calls if e.seq > lost.seq and e.status == 200), None)
        carried = bool(after and isinstance(after.body, dict) and after.body.get("last_failure"))
        retried_ok = retry is not None and retry.status == 200 and \
            retry.body.get("delivery") != cut.body.get("delivery")
        what = (f"a call cut before the bot saw it: the service's retry (new delivery id) "
                f"answered {retry.status if retry else 'never sent'}; a call answered 503 on "
                f"the way: the next turn (last_failure: {'set' if carried else 'unset'}) "
                f"answered {after.status if after else 'never'}")
        return retried_ok and after is not None, what, (
            "answer a retried call (same turn, new delivery id) like any other; accept "
            "last_failure in a turn request")

    def judge_illegal_action(self) -> tuple[bool, str, str]:
        bad = [f"{d.get('action')!r} in {run.name}: {d.get('outcome')} {d.get('problem') or ''}"
               .rstrip()
               for run in self.runs.values() for d in run.deliveries
               if d.get("event") == "turn" and d.get("outcome") in ("refused", "bad-answer")]
        return not bad, (f"{len(bad)} answer(s) refused" + (f": {bad[:4]}" if bad else "")), (
            'answer {"action": one of view.legal_actions} and nothing else (optionally '
            '"version" and "seat" as delivered)')

    def judge_restart(self) -> tuple[bool, str, str]:
        run = self.runs["duel"]
        at = run.marks.get("restart_done")
        if at is None:
            return False, "the game ended before the restart", "play the game"
        after = [e for e in _turn_calls(self.proxy, run.game_id)  # type: ignore[arg-type]
                 if e.start > at and e.status == 200]
        ok, what = self._game_ok(run)
        return ok and bool(after), (f"the service was away {run.marks['restart_took']} s; "
                                    f"calls answered after it: {len(after)}; {what}"), (
            "keep your server up: after a restart the service calls again")


def run_webhook(url: str, command: list[str] | str, only: set[str] | None, quiet: bool,
                json_path: str | None) -> int:
    """The webhook check as the command runs it: the report, the JSON, the exit status."""
    if check_unknown(only, SITUATIONS, " for --webhook"):
        return 2
    return run_command(lambda: WebhookCheck(url, command, only, quiet=quiet), json_path,
                       {"webhook": url})
