"""The contract: openapi.yaml is generated from the code and must match the committed file."""

from __future__ import annotations

import re
from pathlib import Path

from service.http.openapi_spec import spec_yaml
from tests.contract import load_yaml

ROOT = Path(__file__).resolve().parents[3]


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
    r = client.get("/docs/try/")  # swagger-ui, to try requests out
    assert r.status_code == 200
    html = r.get_data(as_text=True)
    assert "/openapi.yaml" in html and "swagger-ui-bundle.js" in html
    urls = re.findall(r"https?://[^\"' ]+", html)
    assert all(u.startswith("http://localhost/") for u in urls), urls  # no CDN
    assert client.get("/docs/try/swagger-ui-bundle.js").status_code == 200


def test_the_api_page_reads_every_operation_webhook_and_schema_without_a_script(client):
    """``/docs`` is the spec as a page to read (``service.http.apidoc``): each operation,
    each webhook the service sends and each schema has its section, and the spec's text
    is escaped, never markup; no script runs there."""
    spec = load_yaml(client.get("/openapi.yaml").get_data(as_text=True))
    for path in ("/docs", "/docs/"):
        r = client.get(path)
        assert r.status_code == 200 and r.mimetype == "text/html", path
    html = r.get_data(as_text=True)
    assert "<script" not in html.split("</header>", 1)[1]
    assert "script-src 'self'" in r.headers["Content-Security-Policy"]
    for ops in spec["paths"].values():
        for method, op in ops.items():
            assert f'id="op-{op["operationId"]}"' in html, (method, op["operationId"])
    assert html.count('class="op"') == sum(len(v) for part in ("paths", "webhooks")
                                           for v in spec[part].values())
    for name in spec["components"]["schemas"]:
        assert f'id="schema-{name}"' in html, name
    assert '<a href="/docs/try/">' in html and "<code>POST /bots</code>" in html


def test_the_api_pages_markdown_escapes_what_it_does_not_know():
    from service.http.apidoc import markdown

    text = "**Bold** and `<b>code</b>`, *em* <script>x</script>\n\n- one\n  more\n- two"
    out = str(markdown(text))
    assert out == ("<p><strong>Bold</strong> and <code>&lt;b&gt;code&lt;/b&gt;</code>, <em>em</em> "
                   "&lt;script&gt;x&lt;/script&gt;</p><ul><li>one more</li><li>two</li></ul>")
