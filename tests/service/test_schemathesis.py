"""schemathesis against the app, generated from the served openapi.yaml, with all checks.

Bounded: a few examples per operation so the whole service suite stays quick. Waiting
endpoints get their timeout clamped so a generated ``timeout=30`` does not stall the run.
"""

from __future__ import annotations

import uuid

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from service import house
from service.app import create_app
from tests.conftest import REDIS_URL


@pytest.fixture
def api_schema(key_prefix):
    app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                      "ARENA_RATE_LIMIT": 0, "ARENA_SSE_KEEPALIVE": 0.1})
    c = app.test_client()
    bot = c.post("/bots", json={"name": "fuzz"}).json
    c.post("/games", json={"players": 2}, headers={"Authorization": f"Bearer {bot['token']}"})
    # House bots "running" (their accounts and alive key, as service.house leaves them),
    # so POST /house/games answers 201, not 503.
    house.ensure_accounts(app.extensions["arena"].store)
    house.beat(app.extensions["arena"].store)
    schema = schemathesis.openapi.from_wsgi("/openapi.yaml", app)
    TOKEN["value"] = bot["token"]
    return schema


TOKEN: dict[str, str] = {}  # the fixture's bot token, for authenticated calls
schema = schemathesis.pytest.from_fixture("api_schema")
WAITING = ("/games/{game_id}/turn", "/bots/me/turns")


@schemathesis.auth()
class BotToken:
    """The fixture bot's token, given the way schemathesis can also leave it out (to
    check that operations needing it answer 401)."""

    def get(self, case, ctx):
        return TOKEN["value"]

    def set(self, case, data, ctx):
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


@schema.parametrize()
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms(case):
    if case.operation.path in WAITING:
        query = case.query if isinstance(case.query, dict) else {}
        try:
            float(query.get("timeout", 0))
        except (TypeError, ValueError):
            pass  # an invalid timeout: left for the service to reject
        else:
            case.query = {**query, "timeout": 0.05}
    if case.headers and "Idempotency-Key" in case.headers:
        case.headers = {**case.headers, "Idempotency-Key": uuid.uuid4().hex}
    case.call_and_validate()
