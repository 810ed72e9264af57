"""The service's Redis client (``service.storage.redis_client``): its cheaper readiness check
must still see a reply waiting on the connection."""

from __future__ import annotations

import time

from service.storage import redis_client as client_module
from tests.conftest import REDIS_URL


def test_the_quick_check_sees_an_unread_reply(redis_client):  # fixture: Redis is up
    r = redis_client_for_test()
    conn = r.connection_pool.get_connection()
    try:
        assert isinstance(conn._parser, client_module.FastCheckParser)
        assert conn.can_read(timeout=0) is False  # idle and clean
        conn.send_command("ECHO", "left-behind")
        # the reply is on its way: a check that does not wait (timeout 0) must report it
        # once it has come, however soon it is asked; the server answers when it is
        # scheduled, which on a busy machine can take a while, so the checks go on until
        # a generous deadline (a parser that never sees the reply fails at it)
        end = time.monotonic() + 30
        while not conn.can_read(timeout=0):
            assert time.monotonic() < end, "an unread reply was not seen"
            time.sleep(0.001)
        assert conn.read_response() == b"left-behind"
        assert conn.can_read(timeout=0) is False
    finally:
        r.connection_pool.release(conn)
    r.close()


def redis_client_for_test():
    """The service's client; in a cluster, one node's (the parser is the same)."""
    client = client_module.connect(REDIS_URL)
    nodes = getattr(client, "get_nodes", None)
    return nodes()[0].redis_connection if nodes else client
