"""The smallest complete All Fours Arena bot: Python, standard library only.

It follows docs/bots.md: find turns with GET /bots/me/turns (a long-poll), read the view,
send one of its legal_actions with the view's version and a new Idempotency-Key, and keep
that key for every retry of that action; wait Retry-After on 429/503; a lost connection is
retried with the same key; a 409 means "look again". A bot holding two seats (a 4-player
game) needs nothing more: the game stays in /bots/me/turns while any of its seats is in
turn, and GET /games/{id} shows the seat whose turn it is. Several games at once need
nothing more either: each pass plays the turns due now and goes back to the long-poll.
Invitations (another owner's bot asking for a game) come in the same answer: accepted.
"""

import json
import os
import random
import sys
import time
import urllib.error
import urllib.request
import uuid

URL = os.environ.get("ARENA_URL", "http://127.0.0.1:8000").rstrip("/")
TOKEN = os.environ["ARENA_TOKEN"]


def call(method, path, body=None, key=None):
    """One request, retried the same way (same key) until the service answers it."""
    data = None if body is None else json.dumps(body).encode()
    for attempt in range(60):
        req = urllib.request.Request(URL + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + TOKEN)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if key:
            req.add_header("Idempotency-Key", key)
        try:
            with urllib.request.urlopen(req, timeout=45) as resp:
                return resp.status, json.load(resp)
        except urllib.error.HTTPError as err:
            if err.code in (429, 503):  # nothing was applied: wait as told, send it again
                time.sleep(float(err.headers.get("Retry-After") or 1))
                continue
            return err.code, json.load(err)
        except OSError:  # no answer (refused, reset, timed out): the same request again
            time.sleep(min(5, 0.25 * 2 ** attempt))
    sys.exit(f"{method} {path}: no answer")


def choose(view):
    return random.choice(view["legal_actions"])  # your strategy goes here


def play(game):
    status, view = call("GET", f"/games/{game}")
    while status == 200 and view["status"] == "active" and view["your_turn"]:
        body = {"action": choose(view), "version": view["version"], "seat": view["seat"]}
        status, answer = call("POST", f"/games/{game}/actions", body, key=str(uuid.uuid4()))
        if status == 200:
            view = answer  # this seat's view right after the move
        elif status in (409, 412):  # the game moved on: read it again, decide again
            status, view = call("GET", f"/games/{game}")
        else:
            print(f"game {game}: {status} {answer.get('type')}", file=sys.stderr)
            return


def answer(invitation):
    """Another owner's bot asks for a game: accept it (your policy decides who may ask:
    PUT /bots/me/policy); decline instead with .../decline. Unanswered, it expires and the
    game is cancelled."""
    call("POST", f"/invitations/{invitation['id']}/accept", {}, key=str(uuid.uuid4()))


def main():
    while True:
        status, turns = call("GET", "/bots/me/turns?timeout=20")
        if status != 200:
            sys.exit(f"GET /bots/me/turns: {status} {turns}")
        for invitation in turns.get("invitations") or []:
            answer(invitation)
        for game in turns["games"]:
            play(game)


if __name__ == "__main__":
    main()
