"""The wake-up listener as it runs in the gevent worker (``service.storage.wakeups``): it
reads its messages itself (``redis_client.next_message``), so it must still hand each message to its
waiters, time a quiet wait out, and wake every waiter with a reset when the server closes
its connection (and a new listener must then hear again)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_GREEN_LISTENER = '''
from gevent import monkey
monkey.patch_all()
import os, time, uuid
import redis
from service.storage import redis_client as rc
from service.storage.wakeups import Wakeups
url = os.environ["REDIS_URL"]
name = "wk" + uuid.uuid4().hex[:10]
prefix = name + ":"
hub = Wakeups(redis.Redis.from_url(url, client_name=name, **rc.PARSER), [prefix + "*"])
publisher = redis.Redis.from_url(url)
with hub.waiter(prefix + "g1") as w:
    w.wait(0)  # (whether the listener had started before the waiter is no matter here)
    publisher.publish(prefix + "g1", b"7:1")
    assert w.wait(30) == [b"7:1"]
    began = time.monotonic()
    assert w.wait(0.3) == []  # nothing more: a quiet wait times out
    assert time.monotonic() - began >= 0.25
    listener = [c["id"] for c in publisher.client_list() if c.get("name") == name]
    assert len(listener) == 1, listener
    publisher.client_kill_filter(_id=listener[0])
    assert w.wait(30) == [None]  # the connection is gone: re-read
    assert w.wait(5) == [None]  # a new listener started: re-read once more
    publisher.publish(prefix + "g1", b"8:2")
    assert w.wait(30) == [b"8:2"]
print("ok")
'''


def test_the_green_listener_hears_times_out_and_resets(redis_client):  # fixture: Redis is up
    if os.environ.get("ARENA_TEST_REDIS") == "cluster":
        import pytest

        pytest.skip("one node's listener: the cluster's own tests cover its failover")
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, "-c", _GREEN_LISTENER], cwd=root,
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(root)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
