"""The starter bot (clients/starters/python/bot.py) with one fault switched on: the
fixtures check-bot must fail, each naming its situation (tests/clients/test_check_bot.py).

Each ``broken_*.py`` next to this file sets exactly one of the switches below and calls
:func:`main`; everything else is the correct starter, so the fault alone decides.
"""

import json
import os
import random
import sys
import time
import urllib.error
import urllib.request
import uuid

URL = os.environ["ARENA_URL"].rstrip("/")
TOKEN = os.environ["ARENA_TOKEN"]

FAULTS = {
    "no_key": False,  # sends actions without an Idempotency-Key
    "ignore_retry_after": False,  # retries a 429/503 at once
    "keyless_retry": False,  # after a lost answer, sends the action again without its key
    "busy_poll": False,  # polls GET /bots/me/turns?timeout=0 with no pause
    "slow": False,  # sleeps past the move limit before each move
    "first_seat_only": False,  # plays only the first seat it saw in a game
}


def call(method, path, body=None, key=None):
    data = None if body is None else json.dumps(body).encode()
    for attempt in range(60):
        req = urllib.request.Request(URL + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + TOKEN)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if key and not FAULTS["no_key"]:
            req.add_header("Idempotency-Key", key)
        try:
            with urllib.request.urlopen(req, timeout=45) as resp:
                return resp.status, json.load(resp)
        except urllib.error.HTTPError as err:
            if err.code in (429, 503):
                if not FAULTS["ignore_retry_after"]:
                    time.sleep(float(err.headers.get("Retry-After") or 1))
                continue
            return err.code, json.load(err)
        except OSError:
            if FAULTS["keyless_retry"]:
                key = None
            time.sleep(min(5, 0.25 * 2 ** attempt))
    sys.exit(f"{method} {path}: no answer")


SEEN = {}  # game -> the first seat seen in it


def play(game):
    query = f"?seat={SEEN[game]}" if FAULTS["first_seat_only"] and game in SEEN else ""
    status, view = call("GET", f"/games/{game}{query}")
    SEEN.setdefault(game, view.get("seat"))
    played = False
    while status == 200 and view["status"] == "active" and view["your_turn"]:
        if FAULTS["slow"]:
            time.sleep((view.get("time_left") or 1) + 0.5)
        body = {"action": random.choice(view["legal_actions"]), "version": view["version"],
                "seat": view["seat"]}
        status, answer = call("POST", f"/games/{game}/actions", body, key=str(uuid.uuid4()))
        played = True
        if status == 200:
            view = answer
        elif status in (409, 412):
            status, view = call("GET", f"/games/{game}{query}")
        else:
            return played
    return played


def main():
    while True:
        timeout = 0 if FAULTS["busy_poll"] else 20
        status, turns = call("GET", f"/bots/me/turns?timeout={timeout}")
        if status != 200:
            sys.exit(f"GET /bots/me/turns: {status} {turns}")
        played = [play(game) for game in turns["games"]]
        if FAULTS["first_seat_only"] and turns["games"] and not any(played):
            time.sleep(0.5)  # its other seat is in turn: it waits, it never plays it
