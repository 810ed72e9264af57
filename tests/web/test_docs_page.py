"""The API page (``/docs``, swagger-ui) works under its Content-Security-Policy: every
operation is listed and nothing is blocked (a CSP violation is a console error, which the
``page`` fixture turns into a failure), and no page of the service can be framed."""

from __future__ import annotations

from tests.contract import load_yaml


def test_docs_page_renders_every_operation_under_its_policy(page, api):
    resp = page.goto("/docs/")
    assert resp.status == 200
    csp = resp.headers["content-security-policy"]
    assert "'unsafe-inline'" not in csp and "frame-ancestors 'none'" in csp
    page.wait_for_selector(".opblock-summary", timeout=20_000)
    spec = load_yaml(api.s.get(api.base + "/openapi.yaml").text)
    # the operations, and the requests the service sends to webhook bots (OpenAPI 3.1
    # ``webhooks``), which the page renders the same way
    operations = sum(len(methods) for part in ("paths", "webhooks")
                     for methods in spec.get(part, {}).values())
    assert page.locator(".opblock").count() == operations
    # expanding an operation (React renders its parameters and models) breaks nothing
    page.locator(".opblock-summary").first.click()
    page.wait_for_selector(".opblock-body", timeout=10_000)


def test_no_page_can_be_framed(page, service):
    """``frame-ancestors 'none'`` (and ``X-Frame-Options: DENY``): the API page, a page
    for people and a JSON answer all refuse to load inside a frame of another page."""
    paths = ("/docs/", "/", "/games")
    page.set_content("".join(f"<iframe src='{service.base}{p}'></iframe>" for p in paths))
    page.wait_for_timeout(1000)
    frames = page.frames[1:]
    assert len(frames) == len(paths)
    for frame in frames:
        assert frame.url.startswith("chrome-error:"), frame.url  # refused, not shown
    page.problems.clear()  # the refusals are logged as console errors, as they should be
