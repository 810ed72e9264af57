"""schemathesis against the app, from the served openapi.yaml, with every check
(``--checks all``) and credentials: a bot token, and the admin token where the contract
asks for it (``POST /tournaments``).

Two runs, both bounded so the pair stays well under a minute:

* stateless: a few generated requests per operation (valid and invalid ones);
* stateful: ``schema.as_state_machine()`` follows the contract's OpenAPI links —
  ``POST /bots`` → the bot, ``POST /games`` → the game, its seats, actions, turn and
  record, ``POST /tournaments`` → the tournament and its standings — so requests reach
  real games and tournaments, not only 404s for made-up ids.

Waiting endpoints get their timeout clamped (a generated ``timeout=30`` or ``wait=30``
would stall the run); the event stream, which stays open until its game ends, is left
to the stateless run (made-up ids) and to the tests that read streams properly.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis.errors import FlakyStrategyDefinition
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.config import SchemathesisConfig
from schemathesis.generation.meta import GenerationMode

from service.arena.accounts import house
from service.http.app import create_app
from tests.conftest import REDIS_URL
from tests.contract import ROOT, load_yaml
from tests.service.conftest import ADMIN_TOKEN

# a few long tests: pytest-xdist may run them on different workers (tests/conftest.py)
SPREAD_OVER_WORKERS = True
EXPECTED_S = 110  # seconds, the whole module: the order workers take it in (tests/conftest.py)

load_all_checks()
ALL_CHECKS = list(CHECKS.get_all())  # --checks all
# Long-polls: seconds a generated request may wait at most (a valid one still waits).
WAIT_S = 0.05
WAITING = {("GET", "/games/{game_id}/turn"): "timeout", ("GET", "/bots/me/turns"): "timeout",
           ("POST", "/games/{game_id}/actions"): "wait"}
CREATE_TOURNAMENT = ("POST", "/tournaments")
# the organizer's operations, sent with the admin token (which organizes for the service)
ADMIN_ONLY = {CREATE_TOURNAMENT, *(("POST", f"/tournaments/{{tournament_id}}/{verb}")
                                   for verb in ("cancel", "pause", "resume", "start")),
              ("POST", "/tournaments/{tournament_id}/entrants/{entrant_id}/exclude")}
# A schema-valid action may be refused by the game as it is now: 409 (the rules, the
# turn) is schemathesis's default; 412 (a stale If-Match) is the same kind of answer.
CHECKS_CONFIG = {"positive_data_acceptance": {
    "expected-statuses": ["2xx", "3xx", "401", "403", "404", "409", "412", "429", "5xx"]}}
CONFIG = SchemathesisConfig.from_dict({"checks": CHECKS_CONFIG})
# The stateful run walks chains of valid requests (invalid ones end a chain at once;
# the stateless run sends those).
STATEFUL_CONFIG = SchemathesisConfig.from_dict({"checks": CHECKS_CONFIG,
                                                "generation": {"mode": "positive"}})


class Arena:
    """The app under test, with a bot (its token for calls that need one) and three more
    bots to enter tournaments."""

    def __init__(self, key_prefix: str) -> None:
        self.app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                               "ARENA_RATE_LIMIT": 0, "ARENA_SSE_KEEPALIVE": 0.1,
                               # the auth checks send many bad tokens from one address:
                               # they must hear 401/403, not the guessing limit's 429
                               # (tests/service/http/test_rate_limits.py checks that limit)
                               "ARENA_AUTH_FAILURE_LIMIT": 0, "ARENA_ADMIN_FAILURE_LIMIT": 0,
                               "ARENA_AUTH_FAILURE_NETWORK_LIMIT": 0,
                               "ARENA_ADMIN_FAILURE_NETWORK_LIMIT": 0,
                               # the stateful walk registers bots and creates games at
                               # many of its steps from one address: the creation quotas
                               # would answer them 429 (tests/service/http/test_quotas.py
                               # checks the quotas)
                               "ARENA_QUOTA_BOTS": 0, "ARENA_QUOTA_GAMES": 0,
                               "ARENA_QUOTA_CLIENT_GAMES": 0, "ARENA_QUOTA_HOUSE_GAMES": 0,
                               "ARENA_NEW_ACCOUNTS_PER_MINUTE": 0,
                               "ARENA_NEW_GAMES_PER_MINUTE": 0,
                               # the walk's WSGI calls never close their responses, so
                               # a long-poll's slot would never be given back (under a
                               # server it is, at the answer's end): the caps are tested
                               # with real sockets (tests/test_connections.py)
                               "ARENA_POLLS_PER_BOT": 0, "ARENA_POLLS_PER_CLIENT": 0,
                               "ARENA_STREAMS_PER_BOT": 0, "ARENA_STREAMS_PER_CLIENT": 0,
                               "ARENA_ADMIN_TOKEN": ADMIN_TOKEN})
        # schemathesis calls the app through WSGI with no client address; every server
        # passes the peer's (a request without one is refused: tests/service/http/
        # test_limit_keys.py)
        served = self.app.wsgi_app

        def with_address(environ: dict[str, Any], start_response: Any) -> Any:
            environ.setdefault("REMOTE_ADDR", "127.0.0.1")
            if not environ["REMOTE_ADDR"]:
                environ["REMOTE_ADDR"] = "127.0.0.1"
            return served(environ, start_response)

        self.app.wsgi_app = with_address  # type: ignore[method-assign]
        c = self.app.test_client()
        bot = c.post("/bots", json={"name": "fuzz"}).json
        self.token = bot["token"]
        self.entrants = [bot["id"]] + [c.post("/bots", json={"name": f"e{i}"}).json["id"]
                                       for i in range(3)]
        c.post("/games", json={"players": 2}, headers={"Authorization": f"Bearer {self.token}"})
        # House bots "running" (their accounts and alive key, as
        # service.arena.accounts.house leaves them), so POST /house/games answers 201, not 503.
        house.ensure_accounts(self.app.extensions["arena"].store)
        house.beat(self.app.extensions["arena"].store)

    def schema(self, config: SchemathesisConfig = CONFIG) -> Any:
        schema = schemathesis.openapi.from_wsgi("/openapi.yaml", self.app, config=config)
        arena = self

        @schema.auth()
        class Tokens:
            """The bot's token, or the admin token where only that will do; given the way
            schemathesis can also leave it out or spoil it (the auth checks)."""

            def get(self, case: Any, ctx: Any) -> dict[str, str]:
                return {"bot": arena.token, "admin": ADMIN_TOKEN}

            def set(self, case: Any, data: dict[str, str], ctx: Any) -> None:
                key = (case.operation.method.upper(), case.operation.path)
                token = data["admin"] if key in ADMIN_ONLY else data["bot"]
                case.headers = {**(case.headers or {}), "Authorization": f"Bearer {token}"}

        return schema

    def prepare(self, case: Any) -> None:
        """Clamp waits, keep Idempotency-Keys fresh, and let valid tournament requests
        name bots that exist (random ids are only ever 404)."""
        key = (case.operation.method.upper(), case.operation.path)
        if key == ("POST", "/house/games"):
            # a running house process beats every BEAT_S; the run may outlast one beat's
            # ALIVE_TTL_S (30 s) before it reaches this operation
            house.beat(self.app.extensions["arena"].store)
        if key in WAITING:
            name = WAITING[key]
            query = case.query if isinstance(case.query, dict) else {}
            try:
                float(query.get(name, 0))
            except (TypeError, ValueError):
                pass  # an invalid value: left for the service to reject
            else:
                case.query = {**query, name: WAIT_S}
        if case.headers and "Idempotency-Key" in case.headers:
            case.headers = {**case.headers, "Idempotency-Key": uuid.uuid4().hex}
        if (key == CREATE_TOURNAMENT and isinstance(case.body, dict)
                and case.meta is not None
                and case.meta.generation.mode == GenerationMode.POSITIVE):
            # null is "not sent" for an optional member: the rules below read what is sent
            case.body = {k: v for k, v in case.body.items() if v is not None}
            players = case.body.get("players", 2)
            need = 4 if players == 2 else 2  # with 4 players, an entrant holds a team
            if case.body.get("duplicate") is True and case.body.get("trusted") is not True:
                need = 4  # deals shared across tables: two tables a round
            body = {**case.body, "entrants": self.entrants[:need]}
            # the cap on games in all (stated in prose: a product JSON Schema cannot say)
            if "games_per_pairing" in body:
                body["games_per_pairing"] = 2
            if "rounds" in body:
                body["rounds"] = min(body["rounds"], 3)
            # a registration's cross-field and time rules (stated in prose): a start to
            # come, a minimum within the maximum, room for the entrants named, two tables
            # for shared deals
            if body.get("starts_at") is not None:
                body["starts_at"] = time.time() + 3600
            if "max_entrants" in body:
                body["max_entrants"] = max(body["max_entrants"], need)
            if "min_entrants" in body:
                body["min_entrants"] = min(body["min_entrants"],
                                           body.get("max_entrants", 64))
            if body.get("duplicate") is True and body.get("trusted") is not True and \
                    body.get("min_entrants", 2) < 4:
                body["min_entrants"] = 4
                body["max_entrants"] = max(body.get("max_entrants", 64), 4)
            case.body = body
        if (key == ("PUT", "/bots/me/callback") and isinstance(case.body, dict)
                and case.meta is not None
                and case.meta.generation.mode == GenerationMode.POSITIVE):
            # a URL of the right shape may still name an address the service never calls
            # (10.1 is 10.0.0.1): a 422 that a JSON Schema cannot foresee
            case.body = {**case.body, "url": "https://bots.example.org/allfours?x=1"}


@pytest.fixture
def arena(key_prefix: str) -> Arena:
    return Arena(key_prefix)


@pytest.fixture
def api_schema(arena: Arena) -> Any:
    ARENA["value"] = arena
    return arena.schema()


ARENA: dict[str, Arena] = {}
schema = schemathesis.pytest.from_fixture("api_schema")


# The session's timeout guards a test against hanging, not against a slow machine: this
# one test runs every operation's examples in turn, and takes several times its quiet
# length on a loaded machine.
@pytest.mark.timeout(1200)
@schema.parametrize()
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms(case):
    ARENA["value"].prepare(case)
    case.call_and_validate(checks=ALL_CHECKS)


def linked_operations() -> set[str]:
    """The operationIds of the contract's link graph: each operation that answers with
    links, and each operation a link leads to."""
    spec = load_yaml((ROOT / "openapi.yaml").read_text())
    ids: set[str] = set()
    for item in spec["paths"].values():
        for op in item.values():
            if not isinstance(op, dict) or "responses" not in op:
                continue
            targets = {link["operationId"] for answer in op["responses"].values()
                       for link in (answer.get("links") or {}).values()}
            if targets:
                ids |= targets | {op["operationId"]}
    return ids


def test_stateful_runs_follow_the_links(arena: Arena) -> None:
    """The state machine from the contract's links reaches games (seats, actions, turns,
    records) and tournaments (standings), and every answer passes every check."""
    reached: set[tuple[str, str, int]] = set()

    # The event stream is left out here: a walk would wait on a stream that does not end;
    # each event it sends is checked against the contract's typed events wherever a test
    # reads the stream (tests/contract.py, installed for every test by tests/conftest.py)
    # Only the operations the links join are walked: the other operations (the stateless
    # run sends each of them) would spread every walk thinner as the contract grows, and
    # whether a walk reached the standings would come down to chance.
    walked = (arena.schema(STATEFUL_CONFIG).include(operation_id=sorted(linked_operations()))
              .exclude(path="/games/{game_id}/events"))
    machine = walked.as_state_machine()

    class Machine(machine):  # type: ignore[misc,valid-type]
        def before_call(self, case: Any) -> None:
            arena.prepare(case)

        def after_call(self, response: Any, case: Any) -> None:
            reached.add((case.operation.method.upper(), case.operation.path,
                         response.status_code))

        def validate_response(self, response: Any, case: Any,
                              additional_checks: Any = None, **kwargs: Any) -> None:
            case.validate_response(response, checks=ALL_CHECKS, transport_kwargs=kwargs)

    needed = [("POST", "/bots"), ("GET", "/bots/{bot_id}"), ("POST", "/games"),
              ("GET", "/games/{game_id}"), ("POST", "/games/{game_id}/seats/{seat}"),
              ("GET", "/games/{game_id}/record"), ("GET", "/games/{game_id}/turn"),
              ("POST", "/tournaments"), ("GET", "/tournaments/{tournament_id}"),
              ("GET", "/tournaments/{tournament_id}/standings")]

    def acted() -> bool:
        return any((method, path) == ("POST", "/games/{game_id}/actions")
                   and status in (200, 409) for method, path, status in reached)

    def ok() -> set[tuple[str, str]]:
        """Operations answered for a real resource: a 2xx, or for a game's view the 403
        of a `seat` the bot does not hold (the game exists; the link led to it)."""
        return {(method, path) for method, path, status in reached
                if status < 300 or (path == "/games/{game_id}" and status == 403)}

    # random walks: another (bounded) run when one happened not to reach everything
    # (a view asked with a random `seat` is mostly 403 forbidden-seat, so the plain 200
    # view can take several walks to come up; the more operations the contract has, the
    # thinner a walk is spread, so the cap stays well above what a run usually needs)
    walks = 0
    for _ in range(20):
        # no example database and no replay or shrinking: each walk is a fresh one against
        # a store that earlier walks (and tests) changed
        try:
            # derandomize off: under CI (Hypothesis's "ci" profile) every walk would be
            # the same walk, and walking again would add nothing
            Machine.run(settings=settings(max_examples=60, stateful_step_count=8,
                                          deadline=None, database=None, derandomize=False,
                                          phases=[Phase.generate],
                                          suppress_health_check=list(HealthCheck)))
        except FlakyStrategyDefinition:
            # Hypothesis's own bookkeeping, not a verdict on the service: the links feed
            # generation with answers from a store that changes under it, so a walk can
            # draw differently down a path it has seen. Any failed check still fails.
            continue
        walks += 1
        if set(needed) <= ok() and acted():
            break
    assert walks, "no walk ran to the end"
    for need in needed:
        assert need in ok(), (need, sorted(reached))
    # actions reach a real game: answered by the rules (200 or 409), not 404
    assert acted(), sorted(reached)
