"""The API pages: ``/docs``, the API to read, is axe-clean and lists every operation;
swagger-ui (``/docs/try/``, to try requests) works under its Content-Security-Policy: every
operation is listed and nothing is blocked (a CSP violation is a console error, which the
``page`` fixture turns into a failure); no page of the service can be framed."""

from __future__ import annotations

from tests.contract import load_yaml


def test_the_api_page_is_axe_clean_and_lists_every_operation(page, api):
    from tests.web.test_a11y import axe_violations

    resp = page.goto("/docs")
    assert resp.status == 200 and "script-src 'self'" in resp.headers["content-security-policy"]
    spec = load_yaml(api.s.get(api.base + "/openapi.yaml").text)
    operations = sum(len(methods) for part in ("paths", "webhooks")
                     for methods in spec.get(part, {}).values())
    assert page.locator("section.op").count() == operations
    assert page.locator("section.schema").count() == len(spec["components"]["schemas"])
    for size in ({"width": 1366, "height": 768}, {"width": 390, "height": 844}):
        page.set_viewport_size(size)
        bad = axe_violations(page)
        assert not bad, bad
        assert page.evaluate("document.documentElement.scrollWidth") <= size["width"]
    # the way to try requests out is one link away
    page.get_by_role("link", name="interactive console (swagger-ui)").click()
    page.wait_for_url("**/docs/try/")
    page.wait_for_selector(".opblock-summary", timeout=20_000)


def test_docs_page_renders_every_operation_under_its_policy(page, api):
    resp = page.goto("/docs/try/")
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
    paths = ("/docs", "/docs/try/", "/", "/games")
    page.set_content("".join(f"<iframe src='{service.base}{p}'></iframe>" for p in paths))
    page.wait_for_timeout(1000)
    frames = page.frames[1:]
    assert len(frames) == len(paths)
    for frame in frames:
        assert frame.url.startswith("chrome-error:"), frame.url  # refused, not shown
    page.problems.clear()  # the refusals are logged as console errors, as they should be
