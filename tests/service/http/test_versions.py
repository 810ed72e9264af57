"""The API's version (issue 39, docs/versions.md): the `Arena-Api-Version` header is
optional, echoed on every answer, and a version the service does not serve is refused
with a stable problem type; what is going away says so (`Deprecation`, `Sunset`)."""

from __future__ import annotations

from email.utils import parsedate_to_datetime

from service.http import versions
from tests.service.http.test_errors import problem

HEADER = "Arena-Api-Version"


def test_every_answer_says_its_version_with_or_without_one_asked(api):
    assert api.c.get("/healthz").headers[HEADER] == versions.CURRENT
    r = api.c.get("/healthz", headers={HEADER: versions.CURRENT})
    assert r.status_code == 200 and r.headers[HEADER] == versions.CURRENT
    # problems too
    assert api.c.get("/games/0123456789ab").headers[HEADER] == versions.CURRENT


def test_an_unknown_version_is_a_400_with_its_own_type_and_changes_nothing(api):
    for asked in ("1999-01-01", "latest", ""):
        r = api.c.post("/bots", json={"name": "v"}, headers={HEADER: asked})
        got = problem(r, 400, "unknown-api-version")
        assert versions.CURRENT in got["detail"]
        assert r.headers[HEADER] == versions.CURRENT
    assert api.c.get("/games").json["items"] == []  # nothing created on the way
    # the token comes first: a required token missing is 401 whatever the version says
    problem(api.c.get("/bots/me", headers={HEADER: "1999-01-01"}), 401, "unauthorized")


def test_the_contract_declares_the_header_on_requests_and_answers(client):
    from tests.contract import load_yaml

    doc = load_yaml(client.get("/openapi.yaml").get_data(as_text=True))
    assert doc["info"]["version"] == versions.CURRENT
    param = doc["components"]["parameters"]["ArenaApiVersion"]
    assert param["name"] == HEADER and param["required"] is False
    assert param["schema"]["enum"] == sorted(versions.SERVED)
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            assert {"$ref": "#/components/parameters/ArenaApiVersion"} in op["parameters"], \
                (method, path)
            ok = next(v for k, v in op["responses"].items() if k.startswith("2"))
            assert HEADER in ok["headers"], (method, path)


def test_the_old_csv_export_route_is_deprecated_with_its_sunset(client):
    r = client.get("/tournaments/0123456789ab/export?format=csv&table=games")
    assert r.status_code == 307
    since, sunset = versions.CSV_BY_FORMAT
    assert r.headers["Deprecation"] == f"@{int(since.timestamp())}"
    assert parsedate_to_datetime(r.headers["Sunset"]) == sunset
    from tests.contract import load_yaml

    doc = load_yaml(client.get("/openapi.yaml").get_data(as_text=True))
    op = doc["paths"]["/tournaments/{tournament_id}/export"]["get"]
    fmt = next(p for p in op["parameters"] if p.get("name") == "format")
    assert fmt["deprecated"] is True
    assert {"Deprecation", "Sunset"} <= set(op["responses"]["307"]["headers"])
