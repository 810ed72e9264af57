"""The contract: openapi.yaml is generated from the code and must match the committed file."""

from __future__ import annotations

import re
from pathlib import Path

from service.http.openapi_spec import spec_yaml
from tests.contract import load_yaml

ROOT = Path(__file__).resolve().parents[2]


def test_committed_openapi_matches_the_code(app):
    committed = (ROOT / "openapi.yaml").read_text()
    assert spec_yaml(app) == committed, (
        "openapi.yaml is out of date: run `python -m service.http.openapi > openapi.yaml`"
    )


def test_spec_is_served_and_complete(client):
    r = client.get("/openapi.yaml")
    assert r.status_code == 200
    doc = load_yaml(r.get_data(as_text=True))
    assert doc["openapi"].startswith("3.1")
    assert "bearer" in doc["components"]["securitySchemes"]
    paths = doc["paths"]
    for path in ("/bots", "/games", "/games/{game_id}", "/games/{game_id}/actions",
                 "/games/{game_id}/turn", "/games/{game_id}/events", "/games/{game_id}/record",
                 "/games/{game_id}/seats/{seat}", "/healthz", "/readyz"):
        assert path in paths, path
    for ops in paths.values():
        for op in ops.values():
            assert "503" in op["responses"] and "429" in op["responses"]


def test_docs_page_uses_local_assets(client):
    r = client.get("/docs/")
    assert r.status_code == 200
    html = r.get_data(as_text=True)
    assert "/openapi.yaml" in html and "swagger-ui-bundle.js" in html
    urls = re.findall(r"https?://[^\"' ]+", html)
    assert all(u.startswith("http://localhost/") for u in urls), urls  # no CDN
    assert client.get("/docs/swagger-ui-bundle.js").status_code == 200
