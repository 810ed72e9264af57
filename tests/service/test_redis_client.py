"""The service's Redis client (``service.storage.redis_client``): its cheaper readiness check
must still see a reply waiting on the connection."""

from __future__ import annotations

from service.storage import redis_client as client_module
from tests.conftest import REDIS_URL


def test_the_quick_check_sees_an_unread_reply(redis_client):  # fixture: Redis is up
    r = redis_client_for_test()
    conn = r.connection_pool.get_connection()
    try:
        assert isinstance(conn._parser, client_module.FastCheckParser)
        assert conn.can_read(timeout=0) is False  # idle and clean
        conn.send_command("ECHO", "left-behind")
        # the reply is on its way: a check must report it, however quick
        for _ in range(200):
            if conn.can_read(timeout=0):
                break
        else:
            raise AssertionError("an unread reply was not seen")
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
