"""The starter bot (clients/starters/python/bot.py) with one fault switched on: the
fixtures check-bot must fail, each naming its situation (tests/clients/test_check_bot.py).

Each ``broken_*.py`` next to this file sets exactly one of the switches below and calls
:func:`main`; everything else is the correct starter, so the fault alone decides. Each
fault is one a real author ships and real play punishes.
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
    "ignore_invitations": False,  # never answers an invitation (as the README's ten lines)
    "one_seat_after_reconnect": False,  # after a broken connection, keeps to that seat
    "own_rules": False,  # picks its card by its own reading of the rules, not legal_actions
    "one_game_at_a_time": False,  # plays a game to its end before it looks at another
    "last_moment": False,  # waits until 0.3 s before its deadline before each move
    "exit_on_409": False,  # stops the process on a 409
}

SEEN = {}  # game -> the first seat seen in it
CURRENT = {}  # game -> the seat of the last view read in it
PINNED = {}  # game -> the one seat it keeps to after a broken connection


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
            if err.code == 409 and FAULTS["exit_on_409"]:
                sys.exit(f"{method} {path}: 409")
            return err.code, json.load(err)
        except OSError:
            if FAULTS["keyless_retry"]:
                key = None
            game = path.split("/")[2].split("?")[0] if path.startswith("/games/") else None
            if FAULTS["one_seat_after_reconnect"] and game in CURRENT:
                PINNED.setdefault(game, CURRENT[game])
            time.sleep(min(5, 0.25 * 2 ** attempt))
    sys.exit(f"{method} {path}: no answer")


RANKS = "23456789TJQKA"


def own_choice(view):
    """A card by the bot's own reading of the rules (the default ones): when a plain suit
    was led and a trump is in the trick, ruff as cheaply as it can."""
    legal = view["legal_actions"]
    hand = view.get("hand") or []
    cards = (view.get("trick") or {}).get("cards") or []
    trump = view.get("trump")
    if view.get("decision") != "play" or not cards or not trump:
        return random.choice(legal)
    led = cards[0]["card"][1]
    trumps = sorted((c for c in hand if c[1] == trump), key=lambda c: RANKS.index(c[0]))
    if led != trump and trumps and any(c["card"][1] == trump for c in cards):
        return trumps[0]
    return random.choice(legal)


def choose(view):
    return own_choice(view) if FAULTS["own_rules"] else random.choice(view["legal_actions"])


def look(game):
    if FAULTS["first_seat_only"] and game in SEEN:
        query = f"?seat={SEEN[game]}"
    elif game in PINNED:
        query = f"?seat={PINNED[game]}"
    else:
        query = ""
    status, view = call("GET", f"/games/{game}{query}")
    if status == 200:
        SEEN.setdefault(game, view.get("seat"))
        CURRENT[game] = view.get("seat")
    return status, view


def play(game):
    status, view = look(game)
    played = False
    while status == 200 and view["status"] == "active":
        if not view["your_turn"]:
            if not FAULTS["one_game_at_a_time"]:
                return played
            status, answer = call("GET", f"/games/{game}/turn?timeout=20")
            if status == 200:
                status, view = look(game)
            continue
        if FAULTS["slow"]:
            time.sleep((view.get("time_left") or 1) + 0.5)
        if FAULTS["last_moment"]:
            time.sleep(max(0.0, (view.get("time_left") or 1) - 0.3))
        body = {"action": choose(view), "version": view["version"], "seat": view["seat"]}
        status, answer = call("POST", f"/games/{game}/actions", body, key=str(uuid.uuid4()))
        played = True
        if status == 200:
            view = answer
            CURRENT[game] = view.get("seat")
        elif status in (409, 412):
            status, view = look(game)
        else:
            return played
    return played


def main():
    while True:
        timeout = 0 if FAULTS["busy_poll"] else 20
        status, turns = call("GET", f"/bots/me/turns?timeout={timeout}")
        if status != 200:
            sys.exit(f"GET /bots/me/turns: {status} {turns}")
        if not FAULTS["ignore_invitations"]:
            for inv in turns.get("invitations") or []:
                call("POST", f"/invitations/{inv['id']}/accept", {}, key=str(uuid.uuid4()))
        played = [play(game) for game in turns["games"]]
        keeps_one = FAULTS["first_seat_only"] or PINNED
        if keeps_one and turns["games"] and not any(played):
            time.sleep(0.5)  # its other seat is in turn: it waits, it never plays it
