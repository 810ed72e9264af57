"""The service's Redis client (``service.storage.redis_client``): its cheaper readiness check
must still see a reply waiting on the connection."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

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


# Under gevent (the worker), a check that may wait (the pub/sub listener's) waits through
# the hub on the one descriptor and then peeks: it must still say False after its timeout,
# True for a reply, and raise for a connection the server closed, as redis-py's check does.
_GREEN_CHECK = '''
from gevent import monkey
monkey.patch_all()
import sys, time
import redis
from service.storage import redis_client as rc
from tests.service.storage.test_redis_client import redis_client_for_test
assert rc._green()
r = redis_client_for_test()
conn = r.connection_pool.get_connection()
conn.send_command("CLIENT", "ID")
cid = conn.read_response()
began = time.monotonic()
assert conn.can_read(timeout=0.2) is False
assert time.monotonic() - began >= 0.15
conn.send_command("ECHO", "waited-for")
assert conn.can_read(timeout=30) is True
assert conn.read_response() == b"waited-for"
other = redis_client_for_test()
other.client_kill_filter(_id=cid)
try:
    conn.can_read(timeout=30)
except redis.ConnectionError:
    print("closed seen")
'''


def test_the_waiting_check_under_gevent(redis_client):  # fixture: Redis is up
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, "-c", _GREEN_CHECK], cwd=root, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(root)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "closed seen"


def test_a_script_run_lean_answers_as_redis_py_does(redis_client):  # fixture: Redis is up
    """``run_script`` sends EVALSHA itself: the same answer and errors as the script object,
    a NOSCRIPT reply loads the script and runs it, and a client it cannot serve (a
    pinned connection) goes through redis-py."""
    import redis

    r = redis_client_for_test()
    text = "if ARGV[1] == 'fail' then return redis.error_reply('ERR told to') end " \
           "return {#KEYS, ARGV[1], ARGV[4], #ARGV, '" + str(time.time_ns()) + "'}"
    script = r.register_script(text)
    # no keys: in a cluster, any node runs it
    keys, args = [], ["é", 3, "", 1.5, b"\x00"]
    assert client_module.run_script(script, keys, args) == script(keys=keys, args=args)
    # a script the server has not seen (a new text: nobody else's scripts are flushed)
    fresh = r.register_script(text + " -- " + str(time.time_ns()))
    assert client_module.run_script(fresh, keys, args) == script(keys=keys, args=args)
    try:
        client_module.run_script(script, keys, ["fail"])
    except redis.ResponseError as exc:
        assert "told to" in str(exc)
    else:
        raise AssertionError("the script's error was not raised")
    pinned = redis.Redis.from_url(REDIS_URL, single_connection_client=True)
    assert not client_module._lean(pinned)
    assert client_module.run_script(script, keys, args, pinned) == script(keys=keys, args=args)
    pinned.close()
    r.close()
