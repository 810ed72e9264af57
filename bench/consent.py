"""What consent costs (issue 23): creating a game that invites another owner's bot, a turn
poll (``GET /bots/me/turns?timeout=0``) with no and with many pending invitations, and an
acceptance — through the real app (Flask's test client: no sockets, so the figures are the
service's own work and its Redis round trips) on a real Redis, under a prefix of its own
that it deletes at the end. Prints one JSON line (milliseconds per request, medians).

    python3 bench/consent.py [--redis redis://127.0.0.1:6379/0] [--invitations 100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # not bench/: its http.py would shadow the standard library's

from service.http.app import create_app  # noqa: E402


def timed(fn: Any, n: int) -> float:
    """Median milliseconds of ``n`` calls of ``fn``."""
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(out), 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--redis", default=os.environ.get("REDIS_URL",
                                                          "redis://127.0.0.1:6379/0"))
    parser.add_argument("--invitations", type=int, default=100)
    args = parser.parse_args()
    prefix = f"bench-consent-{uuid.uuid4().hex[:8]}:"
    app = create_app({"REDIS_URL": args.redis, "ARENA_KEY_PREFIX": prefix,
                      "ARENA_RATE_LIMIT": 0, "ARENA_OWNERS_PER_NETWORK": 0,
                      "ARENA_INVITATIONS_PER_BOT": args.invitations + 10})
    c = app.test_client()
    r = app.extensions["arena"].store.r
    try:
        a = c.post("/bots", json={"name": "a"}).json
        v = c.post("/bots", json={"name": "v"}).json
        a_auth = {"Authorization": f"Bearer {a['token']}"}
        v_auth = {"Authorization": f"Bearer {v['token']}"}
        body = {"players": 2, "seats": [a["id"], v["id"]]}
        poll = {"timeout": 0}
        empty = timed(lambda: c.get("/bots/me/turns", query_string=poll, headers=v_auth), 200)
        create = timed(lambda: c.post("/games", json=body, headers=a_auth), args.invitations)
        full = timed(lambda: c.get("/bots/me/turns", query_string=poll, headers=v_auth), 50)
        pending = c.get("/bots/me/invitations", headers=v_auth).json["invitations"]
        ids = iter(i["id"] for i in pending)
        accept = timed(lambda: c.post(f"/invitations/{next(ids)}/accept", headers=v_auth),
                       min(50, len(pending)))
        print(json.dumps({"bench": "consent", "invitations": len(pending),
                          "create_invite_ms": create, "turns_poll_no_invitations_ms": empty,
                          f"turns_poll_{len(pending)}_invitations_ms": full,
                          "accept_ms": accept}))
    finally:
        keys = list(r.scan_iter(match=f"{prefix}*", count=1000))
        for i in range(0, len(keys), 500):
            r.delete(*keys[i:i + 500])
    return 0


if __name__ == "__main__":
    sys.exit(main())
