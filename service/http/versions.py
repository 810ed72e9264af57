"""The API's version: a dated header, optional on requests and echoed on every answer.

A path prefix (``/v1/``) would move every URL a bot has written down; a header moves
nothing. A request that names no version gets the newest; one that names a version this
service does not serve is refused (400 ``unknown-api-version``), never guessed at. The
promise that goes with it is docs/versions.md: what may change within a version, what
needs a new one, and how long an old one is served (answers to a version that is going
away carry ``Deprecation`` and ``Sunset``).
"""

from __future__ import annotations

from datetime import UTC, datetime

from flask import Flask, Response, request

from service.arena.core.problems import Problem

HEADER = "Arena-Api-Version"
CURRENT = "2026-12-01"
# every version served -> (deprecated since, sunset), None while it is not going away; the
# newest is CURRENT
SERVED: dict[str, tuple[datetime, datetime] | None] = {CURRENT: None}
VERSION_RE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
# What is going away within a version: (deprecated since, sunset). ``export?format=csv``
# (the 307 to ``export.csv``) is kept for older clients until its sunset.
CSV_BY_FORMAT = (datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 12, 1, tzinfo=UTC))
DEPRECATION_HEADERS = {
    "Deprecation": {"description": "RFC 9745: this is deprecated since this moment "
                    "(`@` and unix seconds)", "schema": {"type": "string",
                                                          "pattern": "^@[0-9]+$"}},
    "Sunset": {"description": "RFC 8594: after this date it may be gone (an HTTP date)",
               "schema": {"type": "string"}},
}


def http_date(when: datetime) -> str:
    """RFC 9110's IMF-fixdate, as ``Sunset`` (RFC 8594) takes it."""
    return when.astimezone(UTC).strftime("%a, %d %b %Y %H:%M:%S GMT")


def deprecation(since: datetime, sunset: datetime) -> dict[str, str]:
    """The headers of something going away: ``Deprecation`` (RFC 9745, a structured date:
    ``@`` and unix seconds) since when, and ``Sunset`` (RFC 8594) after which it may stop."""
    return {"Deprecation": f"@{int(since.timestamp())}", "Sunset": http_date(sunset)}


def check() -> None:
    """Refuse a version this service does not serve: called by every operation after its
    token is read (``service.http.api``), so a request without its token still hears 401
    first, as for any other invalid header."""
    asked = request.headers.get(HEADER)
    if asked is not None and asked.strip() not in SERVED:  # an empty one names none
        raise Problem("unknown-api-version",
                      f"{HEADER}: {asked[:40]!r} is not served here; served: "
                      f"{', '.join(sorted(SERVED))} (omit the header for the newest)")


def install(app: Flask) -> None:
    """Echo the version an answer was made under on every answer, problems included: the
    one the request named when it is served, else the newest."""

    @app.after_request
    def _echo_version(resp: Response) -> Response:
        asked = (request.headers.get(HEADER) or "").strip()
        version = asked if asked in SERVED else CURRENT
        resp.headers[HEADER] = version
        going = SERVED.get(version)
        if going is not None:
            resp.headers.update(deprecation(*going))
        return resp
