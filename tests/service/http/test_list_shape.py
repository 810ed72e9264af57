"""One list shape: every list answers ``items`` and ``next_cursor`` and, when there is a
next page, a ``Link: <...>; rel="next"`` header; the old list keys stay as deprecated
aliases for the bots that read them."""

from __future__ import annotations

import json

from tests.contract import CONTRACT
from tests.service.conftest import ADMIN_TOKEN


def _resolve(doc, schema):
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def test_every_list_in_the_contract_has_the_one_shape():
    doc = CONTRACT.doc
    lists = []
    for path, item in doc["paths"].items():
        op = item.get("get")
        if not op:
            continue
        ok = op["responses"].get("200", {})
        media = (ok.get("content") or {}).get("application/json")
        if not media:
            continue
        schema = _resolve(doc, media["schema"])
        props = schema.get("properties") or {}
        if "items" not in props:
            continue
        lists.append(path)
        assert "next_cursor" in props, path
        assert "next_cursor" in schema.get("required", []), path
        names = {p.get("name") for p in op.get("parameters", [])}
        assert {"limit", "cursor"} <= names, path
        assert "Link" in (ok.get("headers") or {}), path
    for must in ("/games", "/tournaments", "/leaderboard", "/ladders/{name}/standings",
                 "/admin/suspensions", "/bots/me/invitations", "/bots/me/callback/deliveries",
                 "/bots/{bot_id}/games"):
        assert must in lists, must
    for name, key in (("InvitationList", "invitations"), ("SuspensionLog", "entries"),
                      ("DeliveryList", "deliveries")):
        assert doc["components"]["schemas"][name]["properties"][key]["deprecated"] is True


def _follow(api, url, headers=None):
    pages, items = 0, []
    while url:
        r = api.c.get(url, headers=headers or {})
        assert r.status_code == 200, r.json
        pages += 1
        items += r.json["items"]
        link = r.headers.get("Link")
        assert (link is None) == (r.json["next_cursor"] is None)
        url = link[1:link.index(">")] if link else None
        if link:
            assert link.endswith('>; rel="next"')
    return pages, items


def test_the_leaderboard_is_paginated(app, api):
    store = app.extensions["arena"].store
    lb = app.extensions["tournaments"].lb_key
    bots = [api.bot(f"r{i}")[0] for i in range(5)]
    for i, b in enumerate(bots):
        store.r.hset(lb, b, json.dumps({"mu": 25 + i, "sigma": 1.0, "games": 20,
                                        "wins": 10, "owners": ["a", "b", "c", "d"]}))
    pages, items = _follow(api, "/leaderboard?limit=2")
    assert pages == 3 and [x["bot_id"] for x in items] == list(reversed(bots))
    assert [x["rank"] for x in items] == [1, 2, 3, 4, 5]
    whole = api.c.get("/leaderboard").json
    assert whole["items"] == items and whole["next_cursor"] is None
    tag = api.c.get("/leaderboard").headers["ETag"]
    assert api.c.get("/leaderboard", headers={"If-None-Match": tag}).status_code == 304


def test_suspensions_pages_and_the_old_key(app, api):
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    bots = [api.bot(f"s{i}")[0] for i in range(3)]
    for b in bots:
        r = api.c.post(f"/admin/bots/{b}/suspension", json={"reason": "test"}, headers=admin)
        assert r.status_code == 200
    pages, items = _follow(api, "/admin/suspensions?limit=2", admin)
    assert pages == 2 and [x["bot"] for x in items] == list(reversed(bots))
    whole = api.c.get("/admin/suspensions", headers=admin).json
    assert whole["entries"] == whole["items"] == items


def test_invitations_pages_and_the_old_key(api):
    victim, v_token = api.bot("victim", new_owner=True)
    made = []
    for i in range(3):
        inviter, token = api.bot(f"inv{i}", new_owner=True)
        r = api.c.post("/games", json={"players": 2, "seats": [inviter, victim]},
                       headers=api.auth(token))
        assert r.status_code == 201, r.json
        made.append(r.json["id"])
    pages, items = _follow(api, "/bots/me/invitations?limit=2", api.auth(v_token))
    assert pages == 2 and [i["game_id"] for i in items] == made
    first = api.c.get("/bots/me/invitations?limit=1", headers=api.auth(v_token)).json
    assert len(first["items"]) == 1 and len(first["invitations"]) == 3  # the old meaning
    bad = api.c.get("/bots/me/invitations?cursor=-1", headers=api.auth(v_token))
    assert bad.status_code == 422 and bad.mimetype == "application/problem+json"
