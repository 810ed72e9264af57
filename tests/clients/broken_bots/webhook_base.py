"""The example webhook bot (clients/examples/webhook_bot.py) with one fault switched on:
the fixtures ``allfours check-bot --webhook`` must fail, each naming its situation
(tests/clients/test_check_webhook.py).

Each ``webhook_*.py`` next to this file sets exactly one of the switches below and calls
:func:`main`; everything else is the example's own handler, so the fault alone decides.
"""

import hashlib
import hmac
import json
import os
import random
import time
from collections import deque

from flask import Flask, abort, jsonify, request

FAULTS = {
    "no_signature": False,  # believes every request: no signature, timestamp or replay check
    "slow": False,  # answers each turn after its deadline has passed
}


def create_app(secret: str) -> Flask:
    app = Flask(__name__)
    seen: deque = deque(maxlen=10_000)

    @app.post("/")
    def called():  # type: ignore[no-untyped-def]
        body, ts = request.get_data(), request.headers.get("Arena-Timestamp", "")
        msg = json.loads(body)
        if not FAULTS["no_signature"]:
            mac = hmac.new(secret.encode(), ts.encode() + b"." + body, hashlib.sha256)
            if not hmac.compare_digest("sha256=" + mac.hexdigest(),
                                       request.headers.get("Arena-Signature", "")):
                abort(401)
            if not ts.isdigit() or abs(time.time() - int(ts)) > 60:
                abort(401)
            if msg["delivery"] in seen:
                abort(409)
            seen.append(msg["delivery"])
        if msg["event"] == "verify":
            return jsonify(challenge=msg["challenge"])
        if msg["event"] != "turn":
            return "", 204
        view = msg["view"]
        if FAULTS["slow"]:
            time.sleep(max(0.0, (msg.get("deadline") or time.time()) - time.time()) + 0.3)
        return jsonify(action=random.choice(view["legal_actions"]))

    return app


def main() -> None:
    create_app(os.environ["ARENA_WEBHOOK_SECRET"]).run("127.0.0.1", int(os.environ["PORT"]),
                                                       threaded=True)
