"""No counter shared by strangers.

Every creating or limited operation is driven from two clients in two networks (each
with its own owners and bots), with every limit at its default and the owners new (so
the service-wide budgets count them too); what each run wrote to Redis is read back,
key by key (and member by member in a hash, sorted set or set). The limit keys each run
wrote are listed by family (``LIMITS``: a family no run wrote means a limit this test no
longer drives, and fails it), and no key, and no member of a shared key, is written by
both, except the deliberate ceilings and indexes of ``SHARED`` (each with why, and where
its fairness is tested). A new counter keyed by something both clients share fails it.

Also: a request without a client address is refused rather than counted in one bucket,
and an IPv6 client is its /64 for the request budget."""

from __future__ import annotations

import random
import re
from typing import Any

from service.arena.accounts import house
from service.arena.analyses.queue import Analyses
from service.http.app import create_app
from service.storage.store import Store
from tests.conftest import REDIS_URL
from tests.service.conftest import ADMIN_TOKEN
from tests.service.tournaments.test_tournament_cancel_embargo import play_out

# Every limit family, as a regex over the key after the prefix: the keys a client's own
# run must write (the test drives each).
LIMITS = {
    "request budget per bot": r"rl:b[0-9a-f]+:\d+",
    "request budget per client": r"rl:a[0-9.]+:\d+",
    # (in a cluster, an address's and its network's failure counters share the network's
    # hash tag: ``failure_key``)
    "failed tokens per address": r"rl:(\{[0-9./]+\}:)?fail:[0-9.]+:\d+",
    "failed tokens per network": r"rl:(\{[0-9./]+\}:)?failnet:[0-9./]+:\d+",
    "failed admin tokens per address": r"rl:(\{[0-9./]+\}:)?adminfail:[0-9.]+:\d+",
    "failed admin tokens per network": r"rl:(\{[0-9./]+\}:)?adminfailnet:[0-9./]+:\d+",
    "bots per client": r"quota:bots:a[0-9.]+:\d+",
    "games per bot": r"quota:games:b[0-9a-f]+:\d+",
    "games per client": r"quota:games:a[0-9.]+:\d+",
    "house games per client": r"quota:house:a[0-9.]+:\d+",
    "house games per bot": r"quota:house:b[0-9a-f]+:\d+",
    "new owners per network": r"owners-made:[0-9./]+:\d+",
    "house games per challenging owner": r"house-games:o[0-9a-f]+:\d+",
    "new accounts per network a minute": r"\{budget\}:accounts:[0-9./]+:\d+",
    "new owners' games per network a minute": r"\{budget\}:games:[0-9./]+:\d+",
    "invitations to a bot per inviting owner": r"bot:[0-9a-f]+:invitations:from:o[0-9a-f]+",
    "invitations to a bot per inviting network": r"bot:[0-9a-f]+:invitations:net:[0-9./]+",
    "declines of an owner's invitations": r"bot:[0-9a-f]+:declined:o[0-9a-f]+",
    "analyses waiting per requester": r"\{analysis\}:fq:q:o:o[0-9a-f]+",
    "analysis downloads per client": r"rl:dl:[0-9.]+:\d+",
    "webhook calls per owner and host": r"rl:\{cb:[a-z0-9.-]+:\d+\}:o[0-9a-f]+:\d+",
}

# Keys both clients may write, and why: indexes of every game, the queue's one stream
# and wake-up, the house's own state; and two ceilings that are shared by design, each
# fair to strangers where it is tested.
SHARED = {
    r"games:(all|waiting|active|finished|seq)": "the game indexes and id sequence",
    r"deadlines|invitations:due": "the move deadlines and invitation expiries (indexes)",
    r"\{analysis\}:(queue|fq:wake)": "the analysis stream and its wake-up",
    r"house:alive|house:decisions": "the house process's own state",
    # the service-wide budget a minute: each network keeps a reserve that passes whatever
    # the service's count (test_quotas.py, test_strangers_creations_have_a_service_wide_
    # budget_with_a_reserve_per_network)
    r"\{budget\}:(accounts|games):\d+": "the service-wide creation budget (reserve per network)",
    # one host's calls a second: what the host consented to, shared equally among the
    # owners called there (test_webhooks.py, test_a_hosts_calls_are_counted_by_port_and_
    # shared_among_owners)
    r"rl:\{cb:shared\.example:443\}:(\d+|active)": "a webhook host's rate (an equal share each)",
}


def snapshot(r: Any, prefix: str) -> dict[str, tuple[str, Any]]:
    """Every key under ``prefix``: (type, its content; members for a container)."""
    out: dict[str, tuple[str, Any]] = {}
    for raw in r.scan_iter(match=f"{prefix}*", count=1000):
        key = raw.decode()[len(prefix):]
        kind = r.type(raw).decode()
        if kind == "string":
            value: Any = r.get(raw)
        elif kind == "hash":
            value = r.hgetall(raw)
        elif kind == "zset":
            value = dict(r.zrange(raw, 0, -1, withscores=True))
        elif kind == "set":
            value = {m: 1 for m in r.smembers(raw)}
        elif kind == "list":
            value = r.lrange(raw, 0, -1)
        else:  # a stream: its length and last entry
            info = r.xinfo_stream(raw)
            value = (info["length"], info["last-generated-id"])
        out[key] = (kind, value)
    return out


def writes(before: dict[str, Any], after: dict[str, Any]) -> dict[str, set[Any]]:
    """Keys created or changed between two snapshots, each with the members written (for
    a hash, sorted set or set; an empty set for any other key)."""
    out: dict[str, set[Any]] = {}
    for key in set(before) | set(after):
        old, new = before.get(key), after.get(key)
        if old == new or new is None:  # unchanged, or gone (a counter's expiry is no write)
            continue
        members: set[Any] = set()
        kinds = {x[0] for x in (old, new) if x is not None}
        if kinds <= {"hash", "zset", "set"}:
            o, n = (old or ("", {}))[1], (new or ("", {}))[1]
            members = {m for m in set(o) | set(n) if o.get(m) != n.get(m)}
        out[key] = members
    return out


def drive(app: Any, address: str, tag: str) -> None:
    """Every creating and limited operation, from ``address``: its own owners, bots,
    games, invitations, house games, failed tokens, analyses and downloads, a ladder's
    validation, a webhook call's count."""
    c = app.test_client()
    c.environ_base["REMOTE_ADDR"] = address

    def auth(token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    first = c.post("/bots", json={"name": f"{tag}-a"}).json
    second = c.post("/bots", json={"name": f"{tag}-b"}, headers=auth(first["token"])).json
    stranger = c.post("/bots", json={"name": f"{tag}-c"}).json  # another owner, invited
    assert first["owner"] == second["owner"] != stranger["owner"]
    r = c.post("/games", json={"players": 2, "seats": [first["id"], second["id"]],
                               "variants": {"target": 3}, "seed": 5},
               headers=auth(first["token"]))
    assert r.status_code == 201, r.json
    gid = r.json["id"]
    play_out(c, gid, [first["token"], second["token"]], random.Random(5))
    invited = c.post("/games", json={"players": 2, "seats": [first["id"], stranger["id"]]},
                     headers=auth(first["token"]))
    assert invited.status_code == 201, invited.json
    inv = c.get("/bots/me/invitations", headers=auth(stranger["token"])).json["invitations"]
    assert c.post(f"/invitations/{inv[0]['id']}/decline",
                  headers=auth(stranger["token"])).status_code == 200
    pending = c.post("/games", json={"players": 2, "seats": [first["id"], stranger["id"]]},
                     headers=auth(first["token"]))  # left pending: its counts stay
    assert pending.status_code == 201, pending.json
    assert c.post("/house/games", json={"players": 2}).status_code == 201
    assert c.post("/house/games", json={"players": 2},
                  headers=auth(first["token"])).status_code == 201
    assert c.get("/bots/me", headers=auth("not-a-token")).status_code == 401
    assert c.post("/owner-invitations", headers=auth("not-the-admin")).status_code == 403
    assert c.get("/games").status_code == 200
    assert c.get(f"/games/{gid}/analysis", headers=auth(first["token"])).status_code == 202
    q: Analyses = app.extensions["analyses"]
    assert q.claim(gid, "w") == 1
    assert q.finish(gid, "w", {"version": 1, "quality": {}, "thresholds": {},
                               "decisions": [], "seats": {}, "teams": {}})
    assert c.get(f"/games/{gid}/analysis").status_code == 200
    assert c.post("/ladders/2p/entry", json={}, headers=auth(second["token"])
                  ).status_code == 200
    callbacks = app.extensions["callbacks"]
    assert callbacks._host_refuses(f"https://{tag}.example/", first["id"]) is None
    assert callbacks._host_refuses("https://shared.example/", first["id"]) is None


def test_two_clients_in_different_networks_never_share_a_limit_key(key_prefix,
                                                                    redis_client) -> None:
    app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                      "ARENA_ADMIN_TOKEN": ADMIN_TOKEN, "TESTING": True,
                      # every limit at its default (the test session turns the owners
                      # per network and the service-wide budget off for everyone
                      # else), every owner new
                      "ARENA_OWNERS_PER_NETWORK": 20, "ARENA_ESTABLISHED_AGE": 3600,
                      "ARENA_NEW_ACCOUNTS_PER_MINUTE": 60,
                      "ARENA_NEW_GAMES_PER_MINUTE": 60})
    store = Store(redis_client, key_prefix)
    house.ensure_accounts(store)
    house.beat(store)
    runs = {}
    for tag, address in (("alpha", "10.11.0.5"), ("beta", "10.22.0.5")):
        before = snapshot(redis_client, key_prefix)
        drive(app, address, tag)
        runs[tag] = writes(before, snapshot(redis_client, key_prefix))
    for tag, written in runs.items():
        missing = [name for name, rx in LIMITS.items()
                   if not any(re.fullmatch(rx, k) for k in written)]
        assert missing == [], f"{tag}: limits this run did not write: {missing}"
    alpha, beta = runs["alpha"], runs["beta"]
    shared = []
    for key in set(alpha) & set(beta):
        if any(re.fullmatch(rx, key) for rx in SHARED):
            continue
        both = alpha[key] & beta[key]
        if alpha[key] and beta[key] and not both:
            continue  # one key (a hash, a set, a sorted set), distinct members
        shared.append((key, sorted(map(str, both))[:5]))
    assert shared == [], f"keys (or members) both clients wrote: {sorted(shared)}"


def test_a_request_without_a_client_address_is_refused_not_pooled(key_prefix,
                                                                  redis_client) -> None:
    """Behind a misconfigured proxy (a Unix socket, no address passed on), every client
    would count as one: such a request is 400 ``bad-request`` and counts nowhere."""
    app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                      "TESTING": True})
    c = app.test_client()
    for path, method in (("/bots", "post"), ("/games", "get")):
        r = getattr(c, method)(path, json={"name": "x"} if method == "post" else None,
                               environ_base={"REMOTE_ADDR": ""})
        assert r.status_code == 400 and r.json["type"] == "/problems/bad-request", r.json
        assert "address" in r.json["detail"]
    written = [k.decode()[len(key_prefix):]
               for k in redis_client.scan_iter(match=f"{key_prefix}*")]
    # the app's start (under the tours hash tag in a cluster); the requests wrote nothing
    assert [re.sub(r"^\{tours\}:", "", k) for k in written] == ["ratings:version"]


def test_an_ipv6_client_is_its_64_for_the_request_budget(key_prefix) -> None:
    app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                      "TESTING": True, "ARENA_RATE_LIMIT": 4})
    c = app.test_client()
    codes = [c.get("/games", environ_base={"REMOTE_ADDR": f"2001:db8:5:6::{i:x}"}
                   ).status_code for i in range(1, 7)]
    assert codes == [200] * 4 + [429] * 2  # one /64, one budget, whatever the address
    assert c.get("/games", environ_base={"REMOTE_ADDR": "2001:db8:5:7::1"}).status_code == 200
