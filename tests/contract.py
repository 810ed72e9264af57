"""Every answer a test receives is checked against ``openapi.yaml``: status, headers, body.

``tests/conftest.py`` installs the check around every client the tests use: the Flask
test client (``FlaskClient.open``) and ``requests`` (``Session.send``, which every
``requests`` call and ``clients.api.ArenaClient`` go through). A response the contract
does not allow raises ``ContractViolation`` where the test receives it, and is also kept
so the test fails at teardown even if it arrived in a thread that swallowed the error.

What the contract covers, and so what is checked:

* every path and method of ``openapi.yaml``: the status must be documented for that
  operation, documented headers must fit their schemas, and the body must be of a
  documented content type and fit its schema (JSON Schema 2020-12, as OpenAPI 3.1 has it,
  by ``jsonschema_rs``: openapi-core was tried and costs ~15 ms an answer, which made the
  service tests eight times slower);
* ``text/event-stream`` bodies: each event's ``data`` must fit ``Event`` (one schema per
  ``type``), and its ``event:`` field must be that type. The stream is checked as the test
  reads it (streams run until game over, so the check never reads ahead);
* a path or method the contract does not name must be a ``not-found`` or
  ``method-not-allowed`` problem.

Outside the contract, explicitly: pages for people and their files (``OUTSIDE`` paths:
the lobby, replay and play pages, ``/static``, ``/docs``, the problem types' pages at
``/problems/<kind>``; and the HTML page a browser gets
at ``/games/{id}``, ``/tournaments/{id}``, ``/bots/{id}``, ``/ladders`` and
``/ladders/{name}``, ``PAGES``), the spec itself
(``/openapi.yaml``), and the scripted fake servers of the client's tests (``fake``).
A server error (500) from the service is never allowed, wherever it shows up.
"""

from __future__ import annotations

import codecs
import gzip
import json
import re
import threading
from collections.abc import Iterable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema_rs
from werkzeug.datastructures import Headers

ROOT = Path(__file__).resolve().parents[1]
SPEC_PATH = ROOT / "openapi.yaml"

# Paths served by the app that are not API operations (pages, their files, API docs, and
# the operators' Prometheus text at /metrics, documented in the README).
OUTSIDE = re.compile(
    r"^/(?:$|static/|docs(?:/|$)|problems(?:/|$)|openapi\.yaml$|metrics$"
    r"|games/[^/]+/(?:replay|play)/?$)"
)
# Where the JSON API and a page share a URL (service/http/pages.py): a browser gets the page.
PAGES = re.compile(r"^/(?:(?:games|tournaments|bots|ladders)/[^/]+|ladders)/?$")


def load_yaml(text: str) -> Any:
    """YAML as ``yaml.safe_load`` reads it, by libyaml where PyYAML has it: openapi.yaml is
    large, and the pure-Python loader reads it several times slower than libyaml."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


_CONDITIONS = frozenset({"if", "then", "else", "not", "dependentSchemas"})


def close_objects(node: Any, key: str = "") -> Any:
    """Every object schema that lists its ``properties`` and says nothing of others gets
    ``additionalProperties: false`` (not in conditions, which only test members), in place."""
    if isinstance(node, dict):
        if isinstance(node.get("properties"), dict) and "additionalProperties" not in node \
                and key not in _CONDITIONS and not ({"allOf", "anyOf", "oneOf"} & set(node)):
            node["additionalProperties"] = False
        for k, v in node.items():
            close_objects(v, k if k not in ("properties",) else "")
    elif isinstance(node, list):
        for v in node:
            close_objects(v, key)
    return node


class ContractViolation(AssertionError):
    """An answer that ``openapi.yaml`` does not allow."""


class Contract:
    """``openapi.yaml`` as a checker of answers.

    Operations are found by method and path template, and every schema is compiled once
    (``jsonschema_rs``, JSON Schema 2020-12 as OpenAPI 3.1 uses it): checking an answer
    costs microseconds, so every test can afford it on every request.
    """

    def __init__(self, path: Path = SPEC_PATH) -> None:
        self.path = path
        self.violations: list[tuple[threading.Thread, str]] = []
        self._lock = threading.Lock()
        self._validators: dict[str, Any] = {}
        self.fakes: set[str] = set()  # host:port of scripted test servers (``fake``)

    def fake(self, base_url: str) -> None:
        """Exempt a test's own scripted server (it answers what a test of the client
        needs: half views, a 500) from the check."""
        self.fakes.add(urlsplit(base_url).netloc)

    def real(self, base_url: str) -> None:
        self.fakes.discard(urlsplit(base_url).netloc)

    @cached_property
    def doc(self) -> dict[str, Any]:
        """``openapi.yaml`` with every answer's object closed: the contract leaves answers
        open so clients ignore members added later (docs/versions.md), but the service of
        this commit must send only the members it declares, so here an undeclared one is
        still a violation."""
        return close_objects(load_yaml(self.path.read_text()))

    @cached_property
    def event_schema(self) -> dict[str, Any]:
        """One event's data of ``GET /games/{game_id}/events``: its kind's schema (the
        stream's schema has one branch per kind, ``data`` its ``contentSchema``)."""
        stream = self.doc["paths"]["/games/{game_id}/events"]["get"]["responses"]["200"][
            "content"]["text/event-stream"]["schema"]
        return {"oneOf": [b["properties"]["data"]["contentSchema"] for b in stream["oneOf"]]}

    @cached_property
    def _routes(self) -> list[tuple[re.Pattern[str], dict[str, Any]]]:
        """(path regex, path item); concrete paths before templated ones (/bots/me first)."""
        routes = []
        for template, item in self.doc["paths"].items():
            regex = "^" + re.sub(r"\\\{[a-z_]+\\\}", "[^/]+", re.escape(template)) + "$"
            routes.append((template.count("{"), re.compile(regex), item))
        return [(r, item) for _, r, item in sorted(routes, key=lambda t: t[0])]

    def validator(self, schema: dict[str, Any]) -> Any:
        """A compiled validator for ``schema`` (its $refs resolve in the whole document)."""
        key = json.dumps(schema, sort_keys=True)
        found = self._validators.get(key)
        if found is None:
            found = self._validators[key] = jsonschema_rs.validator_for(
                {**self.doc, **schema}, validate_formats=True)
        return found

    def errors(self, schema: dict[str, Any], value: Any) -> list[str]:
        v = self.validator(schema)
        if v.is_valid(value):
            return []
        return [f"{list(e.instance_path)}: {e.message}"[:400]
                for e in list(v.iter_errors(value))[:8]]

    def fail(self, what: str, message: str) -> None:
        """Raise where the answer arrives; keep it too, for answers that arrive in a
        thread whose errors nobody reads (see ``elsewhere``)."""
        text = f"{what}: {message}"
        with self._lock:
            self.violations.append((threading.current_thread(), text))
        raise ContractViolation(text)

    def elsewhere(self, since: int) -> list[str]:
        """Violations since ``since`` that arrived outside the main thread."""
        with self._lock:
            return [t for th, t in self.violations[since:]
                    if th is not threading.main_thread()]

    # --- one answer ------------------------------------------------------------------------

    def check(self, method: str, url: str, status: int, headers: Headers,
              body: bytes | None) -> bool:
        """Check one answer; the body is None for a stream (its events are checked as they
        are read, ``events``). True when the answer is one the contract covers."""
        parts = urlsplit(url)
        if parts.netloc in self.fakes:
            return False
        path = parts.path or "/"
        mimetype = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
        what = f"{method} {path} -> {status} {mimetype}"
        if status >= 500 and status != 503:
            self.fail(what, "a server error is never an answer")
        if OUTSIDE.match(path):
            return False
        if mimetype == "text/html" and PAGES.match(path) and method in ("GET", "HEAD"):
            return False
        if method.upper() == "HEAD":  # a GET without its body (HTTP semantics)
            method, body = "GET", None
        item = next((item for regex, item in self._routes if regex.match(path)), None)
        op = item.get(method.lower()) if item is not None else None
        if op is None:
            self._unrouted(what, status, mimetype, body)
            return True
        response = op["responses"].get(str(status)) or op["responses"].get("default")
        if response is None:
            self.fail(what, f"status {status} is not documented for this operation "
                      f"(documented: {', '.join(op['responses'])})")
        problems: list[str] = []
        for name, header in (response.get("headers") or {}).items():
            value = headers.get(name)
            if value is None:
                if header.get("required"):
                    problems.append(f"header {name} is missing")
                continue
            schema = header.get("schema") or {}
            if schema.get("type") == "integer" and re.fullmatch(r"-?\d+", value):
                value = int(value)
            problems += [f"header {name} {e}" for e in self.errors(schema, value)]
        if body and (headers.get("Content-Encoding") or "").lower() == "gzip" \
                and body[:2] == b"\x1f\x8b":  # the representation, as a client decodes it
            body = gzip.decompress(body)
        content = response.get("content") or {}
        if content and mimetype not in content:
            problems.append(f"Content-Type {mimetype!r} is not one of {sorted(content)}")
        elif not content and body:
            problems.append("a body where none is documented")
        elif content and body is not None and not _sse(mimetype) \
                and mimetype != "application/x-ndjson":  # a stream: per event, per line
            schema = content[mimetype].get("schema") or {}
            if mimetype.endswith("json"):
                try:
                    value = json.loads(body)
                except ValueError:
                    problems.append("the body is not JSON")
                else:
                    problems += self.errors(schema, value)
            else:
                problems += self.errors(schema, body.decode())
        if problems:
            self.fail(what, "\n  ".join(problems) + (f"\nbody: {body[:1500]!r}" if body else ""))
        return True

    def _unrouted(self, what: str, status: int, mimetype: str, body: bytes | None) -> None:
        """A path or method outside the contract: only a not-found or method-not-allowed
        problem may answer it."""
        if status not in (404, 405) or mimetype != "application/problem+json":
            self.fail(what, "not in openapi.yaml (only a 404/405 problem may answer here)")
        if body is None:
            return
        try:
            problem = json.loads(body or b"")
        except ValueError:
            self.fail(what, "the problem is not JSON")
        errors = self.errors({"$ref": "#/components/schemas/Problem"}, problem)
        if errors:
            self.fail(what, "; ".join(errors))

    # --- server-sent events --------------------------------------------------------------------

    def events(self, what: str, chunks: Iterable[bytes | str]) -> Iterator[bytes | str]:
        """Pass ``chunks`` of an event stream through, checking each complete event."""
        buffer = ""
        decode = codecs.getincrementaldecoder("utf-8")().decode  # a chunk may split a char
        for chunk in chunks:
            text = decode(chunk) if isinstance(chunk, bytes) else chunk
            buffer += text.replace("\r\n", "\n")
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                self.event(what, block)
            yield chunk

    def event(self, what: str, block: str) -> None:
        fields_: dict[str, str] = {}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            fields_[name] = value.removeprefix(" ")
        if "data" not in fields_:
            if set(fields_) - {"retry"}:
                self.fail(what, f"an event without data: {block!r}")
            return
        if re.fullmatch(r"GET /tournaments/[^/]+/events", what):
            self.tournament_event(what, block, fields_)
            return
        if not re.fullmatch(r"\d+\.\d+", fields_.get("id", "")):
            self.fail(what, f"an event id must be ply.index: {block!r}")
        try:
            data = json.loads(fields_["data"])
        except ValueError:
            self.fail(what, f"event data is not JSON: {block!r}")
        errors = self.errors(self.event_schema, data)
        if errors:
            self.fail(what, f"event {fields_.get('event')}: " + "; ".join(errors))
        if data.get("type") != fields_.get("event"):
            self.fail(what, f"event: {fields_.get('event')!r} but data type "
                      f"{data.get('type')!r}")


    def tournament_event(self, what: str, block: str, fields_: dict[str, str]) -> None:
        """A tournament's stream (``service.arena.tournaments.stream``): ids count up,
        each event one of its kinds with a JSON object as data."""
        from service.arena.tournaments.stream import EVENTS

        if not re.fullmatch(r"\d+", fields_.get("id", "")):
            self.fail(what, f"a tournament event's id is a count: {block!r}")
        if fields_.get("event") not in EVENTS:
            self.fail(what, f"not a tournament event: {block!r}")
        try:
            data = json.loads(fields_["data"])
        except ValueError:
            self.fail(what, f"event data is not JSON: {block!r}")
        if not isinstance(data, dict):
            self.fail(what, f"event data is not an object: {block!r}")


CONTRACT = Contract()


# --- the clients the tests use ---------------------------------------------------------------


class _Checked:
    """A streamed body, checked event by event as it is read; closing it closes the
    stream underneath (the server's generator lets go of its listener then)."""

    def __init__(self, contract: Contract, what: str, body: Any) -> None:
        self.body = body
        self._it = contract.events(what, body)

    def __iter__(self) -> Iterator[bytes | str]:
        return self._it

    def __next__(self) -> bytes | str:
        return next(self._it)

    def close(self) -> None:
        self._it.close()
        close = getattr(self.body, "close", None)
        if close is not None:
            close()


def _sse(mimetype: str | None) -> bool:
    return (mimetype or "").split(";")[0].strip().lower() == "text/event-stream"


def install(monkeypatch: Any, contract: Contract = CONTRACT) -> None:
    """Check every answer of the Flask test client and of ``requests`` (for this test)."""
    import requests
    from flask.testing import FlaskClient

    flask_open = FlaskClient.open

    def open_checked(self: FlaskClient, *args: Any, **kw: Any) -> Any:
        resp = flask_open(self, *args, **kw)
        req = resp.request
        url = req.url
        what = f"{req.method} {req.path}"
        if _sse(resp.mimetype) and resp.is_streamed and not resp.is_sequence:
            if contract.check(req.method, url, resp.status_code, resp.headers, None):
                resp.response = _Checked(contract, what, resp.response)
        else:
            body = resp.get_data()
            if contract.check(req.method, url, resp.status_code, resp.headers, body) and \
                    _sse(resp.mimetype):
                for _ in contract.events(what, [body]):
                    pass
        return resp

    send = requests.Session.send

    def send_checked(self: requests.Session, request: Any, **kw: Any) -> Any:
        resp = send(self, request, **kw)
        what = f"{request.method} {request.path_url}"
        headers = Headers(dict(resp.headers))
        if _sse(resp.headers.get("Content-Type")) and kw.get("stream"):
            if contract.check(request.method, request.url, resp.status_code, headers, None):
                chunks = resp.iter_content

                def iter_content(chunk_size: int = 1, decode_unicode: bool = False) -> Any:
                    return contract.events(what, chunks(chunk_size, decode_unicode))

                resp.iter_content = iter_content
        else:
            body = resp.content
            if contract.check(request.method, request.url, resp.status_code, headers, body) \
                    and _sse(resp.headers.get("Content-Type")):
                for _ in contract.events(what, [body]):
                    pass
        return resp

    monkeypatch.setattr(FlaskClient, "open", open_checked)
    monkeypatch.setattr(requests.Session, "send", send_checked)
