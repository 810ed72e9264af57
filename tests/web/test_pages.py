"""The pages over plain HTTP: content negotiation keeps the JSON API as it was, the static
files are served and shipped with the package, and nothing is fetched from elsewhere."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "service" / "http"
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def web_files() -> list[Path]:
    return sorted(p for d in ("static", "templates") for p in (PKG / d).rglob("*")
                  if p.is_file())


@pytest.fixture
def game_id(api) -> str:
    _, token = api.bot("pages")
    return api.post("/games", {"players": 2}, token)["id"]


def test_the_lobby_is_the_root_page(api):
    r = api.call("GET", "/", headers={"Accept": BROWSER_ACCEPT})
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
    assert "js/lobby.js" in r.text and "Content-Security-Policy" in r.headers


@pytest.mark.parametrize("accept", [None, "*/*", "application/json",
                                    "application/json, text/html;q=0.5"])
def test_api_clients_still_get_json_at_the_game_url(api, game_id, accept):
    headers = {"Accept": accept} if accept else {}
    r = api.call("GET", f"/games/{game_id}", headers=headers)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("application/json")
    assert r.json()["id"] == game_id
    assert "Accept" in r.headers["Vary"]


def test_browsers_get_the_table_page_at_the_game_url(api, game_id):
    r = api.call("GET", f"/games/{game_id}", headers={"Accept": BROWSER_ACCEPT})
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
    assert f'data-game-id="{game_id}"' in r.text and 'data-mode="watch"' in r.text
    assert "Accept" in r.headers["Vary"]
    for mode in ("replay", "play"):
        page = api.call("GET", f"/games/{game_id}/{mode}")
        assert page.status_code == 200 and f'data-mode="{mode}"' in page.text
    t = api.call("GET", "/tournaments/0123456789ab", headers={"Accept": BROWSER_ACCEPT})
    assert t.status_code == 200 and "js/tournament.js" in t.text
    # Other methods and other paths are the API's, whatever the Accept header says.
    r = api.call("POST", f"/games/{game_id}/actions", headers={"Accept": BROWSER_ACCEPT},
                 json={"action": "stand"})
    assert r.status_code == 401
    r = api.call("GET", f"/games/{game_id}/record", headers={"Accept": BROWSER_ACCEPT})
    assert r.headers["Content-Type"].startswith("application/json")


def test_browsers_get_the_ladder_pages_and_api_clients_json(api):
    """``/ladders`` in a browser was raw JSON: now a page for people, as ``/ladders/{name}``;
    every other client keeps the JSON."""
    for path, marker in (("/ladders", 'data-ladder=""'), ("/ladders/2p", 'data-ladder="2p"')):
        page = api.call("GET", path, headers={"Accept": BROWSER_ACCEPT})
        assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
        assert "js/ladder.js" in page.text and marker in page.text
        assert "Accept" in page.headers["Vary"]
        for accept in (None, "*/*", "application/json"):
            r = api.call("GET", path, headers={"Accept": accept} if accept else {})
            assert r.headers["Content-Type"].startswith("application/json"), (path, accept)
    r = api.call("GET", "/ladders/2p/standings", headers={"Accept": BROWSER_ACCEPT})
    assert r.headers["Content-Type"].startswith("application/json")


def test_every_static_file_is_served_with_its_type(api):
    types = {".js": "javascript", ".css": "text/css", ".svg": "image/svg+xml"}
    static = [p for p in web_files() if "static" in p.parts]
    assert {p.suffix for p in static} == set(types)
    for path in static:
        url = "/static/" + path.relative_to(PKG / "static").as_posix()
        r = api.call("GET", url)
        assert r.status_code == 200, url
        assert types[path.suffix] in r.headers["Content-Type"], (url, r.headers["Content-Type"])


def test_pages_fetch_nothing_from_elsewhere():
    """No CDN, no web font, no analytics: every URL in the front end is the service's own
    (SVG's namespace name is a name, not a fetch)."""
    for path in web_files():
        text = path.read_text()
        urls = [u for u in re.findall(r"""(?:https?:)?//[\w.-]+\.[a-z]{2,}[^\s"'`)]*""", text)
                if not u.startswith("http://www.w3.org/2000/svg")]
        assert not urls, (path, urls)


def test_the_package_ships_every_web_file():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["service.http"]
    for path in web_files():
        rel = path.relative_to(PKG).as_posix()
        assert any(fnmatch.fnmatch(rel, g) and rel.count("/") == g.count("/") for g in globs), rel
