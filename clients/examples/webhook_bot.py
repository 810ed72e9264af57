"""A webhook bot: the service calls it on its turns (no polling). Copy this file.

    pip install flask
    ARENA_WEBHOOK_SECRET=whsec_... python webhook_bot.py --port 8080

Register its URL once (the answer's ``secret`` is shown only then):

    curl -X PUT $ARENA/bots/me/callback -H "Authorization: Bearer $TOKEN" \\
         -H 'Content-Type: application/json' -d '{"url": "https://you.example/allfours"}'

then start this bot with that secret within a minute: the service first sends a signed
``verify`` request (about a second after the registration, then again after 4, 15 and
60 s), which this bot answers by echoing its ``challenge``, and calls nothing else until
the URL has passed. Started later? Ask again:

    curl -X POST $ARENA/bots/me/callback/verify -H "Authorization: Bearer $TOKEN"

Every request is checked before it is believed: the HMAC-SHA256 signature over
``"<Arena-Timestamp>." + body`` with your secret, a timestamp within a minute of this
machine's clock, and a ``delivery`` id not seen before (a replay). Change ``choose``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import random
import time
from collections import deque

from flask import Flask, abort, jsonify, request

TOLERANCE_S = 60


def choose(view: dict, legal: list[str]) -> str:
    return random.choice(legal)  # your strategy: "stand", "beg", ..., or a card "AS"


def create_app(secret: str) -> Flask:
    app = Flask(__name__)
    seen: deque[str] = deque(maxlen=10_000)  # delivery ids of the last minutes

    @app.post("/")
    def called():  # type: ignore[no-untyped-def]
        body, ts = request.get_data(), request.headers.get("Arena-Timestamp", "")
        mac = hmac.new(secret.encode(), ts.encode() + b"." + body, hashlib.sha256)
        if not hmac.compare_digest("sha256=" + mac.hexdigest(),
                                   request.headers.get("Arena-Signature", "")):
            abort(401)  # forged: not signed with our secret
        if not ts.isdigit() or abs(time.time() - int(ts)) > TOLERANCE_S:
            abort(401)  # stale: an old request sent again
        msg = json.loads(body)
        if msg["delivery"] in seen:
            abort(409)  # replayed within the minute
        seen.append(msg["delivery"])
        if msg["event"] == "verify":  # the URL's verification: echo the challenge
            return jsonify(challenge=msg["challenge"])
        if msg["event"] != "turn":  # "start" or "end": nothing to answer
            return "", 204
        view = msg["view"]
        return jsonify(action=choose(view, view["legal_actions"]))

    return app


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args()
    create_app(os.environ["ARENA_WEBHOOK_SECRET"]).run(args.host, args.port)
