"""check-bot's proxy on real sockets: it forwards and logs, answers 429/503 with
``Retry-After`` itself (nothing reaches the service), holds a request until told, drops the
answer after the service handled the request, and closes a connection unanswered when the
service is away. The upstream is a small real HTTP server counting what reached it."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from service.cli.checks.proxy import CheckProxy, Rule


class Upstream(BaseHTTPRequestHandler):
    seen: list[tuple[str, str, bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Upstream.seen.append(("POST", self.path, body))
        data = json.dumps({"version": len(Upstream.seen)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def proxy() -> Iterator[CheckProxy]:
    Upstream.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    p = CheckProxy(("127.0.0.1", server.server_address[1])).start()
    yield p
    p.stop()
    server.shutdown()
    server.server_close()


def post(proxy: CheckProxy, conn: http.client.HTTPConnection | None = None,
         key: str = "k1") -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    conn = conn or http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    conn.request("POST", "/games/g1/actions", body=json.dumps({"action": "AS", "version": 3}),
                 headers={"Content-Type": "application/json", "Idempotency-Key": key})
    return conn, conn.getresponse()


def test_requests_are_forwarded_on_a_kept_alive_connection_and_logged(proxy) -> None:
    conn, first = post(proxy)
    assert first.status == 200 and json.loads(first.read()) == {"version": 1}
    _, second = post(proxy, conn, key="k2")
    assert json.loads(second.read()) == {"version": 2}
    assert [e.key for e in proxy.log] == ["k1", "k2"]
    assert all(e.game == "g1" and e.is_action and e.service_status == 200 for e in proxy.log)
    assert proxy.log[0].body == {"action": "AS", "version": 3}


def test_an_injected_429_carries_retry_after_and_never_reaches_the_service(proxy) -> None:
    proxy.add(Rule("rate_limited", lambda e: e.is_action, "answer", status=429,
                   retry_after=2))
    conn, resp = post(proxy)
    assert resp.status == 429 and resp.getheader("Retry-After") == "2"
    assert json.loads(resp.read())["type"] == "/problems/rate-limited"
    assert Upstream.seen == []
    _, again = post(proxy, conn)  # one-shot: the retry goes through, same connection
    assert again.status == 200 and len(Upstream.seen) == 1


def test_a_dropped_answer_was_handled_by_the_service_and_never_reaches_the_bot(proxy) -> None:
    proxy.add(Rule("lost_answer", lambda e: e.is_action, "drop"))
    with pytest.raises((http.client.HTTPException, OSError)):
        post(proxy)[1].read()
    assert len(Upstream.seen) == 1  # applied, yet the bot got nothing
    assert proxy.log[0].outcome == "dropped" and proxy.log[0].answer == {"version": 1}


def test_a_held_request_waits_for_its_condition(proxy) -> None:
    asked: list[bool] = []

    def released() -> bool:  # true from its third asking on: the hold looked, and waited
        asked.append(len(asked) >= 2)
        return asked[-1]

    proxy.add(Rule("stale", lambda e: e.is_action, "hold", hold_until=released))
    _, resp = post(proxy)
    assert resp.status == 200 and asked == [False, False, True]  # sent once it held


def test_with_the_service_away_the_connection_closes_unanswered() -> None:
    p = CheckProxy(("127.0.0.1", 1)).start()  # nothing listens on port 1
    try:
        with pytest.raises((http.client.HTTPException, OSError)):
            post(p)[1].read()
        assert p.log[0].outcome == "no-service"
    finally:
        p.stop()
