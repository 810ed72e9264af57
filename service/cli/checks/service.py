"""check-bot's own service, restartable, and check-bot's own plain calls to it.

Why its own: a check must meet the service's real answers (the embedded valkey-server and
gunicorn with the project's worker, as ``allfours serve`` runs them), and it must be able
to stop and start that service on the same port and data mid-game, as a deploy or a crash
does. check-bot's own requests (seating games, the opponent's moves, watching a game) go to
the service directly, never through the proxy the bot talks to, and wait out a restart.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any

from service.cli.embedded_service import EmbeddedService
from service.cli.serve import _STOP_WAIT, gunicorn_command
from service.storage.embedded import stop_process

# gunicorn workers of a check's own service: one serves a single bot's games and the
# injected faults alike (gevent: a worker holds many requests at once), and each worker
# more imports the whole app again at every start and restart.
CHECK_WORKERS = 1


class CheckError(RuntimeError):
    """check-bot itself could not go on (not a verdict on the bot)."""


class CheckService(EmbeddedService):
    """The tournament command's embedded service (valkey + gunicorn on a free port), which
    check-bot also restarts on the same data and port. gunicorn is started here without a
    ``preexec_fn``, because check-bot's threads (the proxy) run by the time it restarts.
    ``extra_env`` is what a kind of check sets for its service (a webhook check lets it call
    loopback addresses)."""

    extra_env: dict[str, str] = {}
    _env: dict[str, str]

    def _spawn(self, env: dict[str, str]) -> None:
        # a check plays a few games and asks for no analysis of them: no analysis workers
        # (two processes, each importing the search, for nothing)
        env = {**env, "ARENA_ANALYSIS_WORKERS": "0", **self.extra_env}
        self._env = env
        self._stop_gunicorn()
        command = gunicorn_command(self.host, self.port or 0, self.workers)
        with self.log_path.open("ab") as log:
            self.gunicorn = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                                             stdout=log, stderr=log, start_new_session=True)

    def restart(self) -> float:
        """Stop gunicorn (its quick stop: live requests are cut, as in a crash or a deploy)
        and start it again on the same port and Redis; the seconds it was away."""
        began = time.monotonic()
        proc, self.gunicorn = self.gunicorn, None
        stop_process(proc, _STOP_WAIT, sig=signal.SIGINT)
        self._spawn(self._env)
        if not self._wait_ready():
            raise RuntimeError("the service did not come back after the restart:\n"
                               + self.log_tail())
        return time.monotonic() - began


def raw_call(base: str, method: str, path: str, token: str | None = None, body: Any = None,
             timeout: float = 40.0) -> tuple[int, Any]:
    """One request, as it went: (status, JSON answer or None). Raises OSError when nothing
    answered."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        with contextlib.suppress(ValueError):
            return exc.code, json.loads(exc.read() or b"null")
        return exc.code, None


def call(base: str, method: str, path: str, token: str | None = None, body: Any = None,
         timeout: float = 40.0, tries: int = 60) -> Any:
    """check-bot's own request, waiting out a restart or a 429/503; the JSON answer."""
    for _ in range(tries):
        try:
            status, answer = raw_call(base, method, path, token, body, timeout)
        except OSError:
            time.sleep(0.5)
            continue
        if status in (429, 502, 503):
            time.sleep(0.5)
            continue
        if status >= 400:
            raise CheckError(f"{method} {path}: {status} {answer}")
        return answer
    raise CheckError(f"{method} {path}: no answer")


def register_bots(base: str, names: list[str]) -> list[dict[str, Any]]:
    """Register the checked bot and its opponents as bots of one owner (the first bot's:
    each later registration names it with that bot's token), so the seating below seats
    them at once: a game that names another owner's bot would wait for its acceptance,
    and the check's opponent is no stranger."""
    first = call(base, "POST", "/bots", body={"name": names[0]})
    return [first, *(call(base, "POST", "/bots", token=first["token"], body={"name": n})
                     for n in names[1:])]


def register_stranger(base: str, name: str) -> dict[str, Any]:
    """A bot of another owner: a game it creates naming the checked bot is an invitation."""
    return call(base, "POST", "/bots", body={"name": name})


def seat_game(base: str, creator_token: str, players: int, seats: list[str],
              settings: dict[str, Any]) -> str:
    """Seat one of the check's games: ``seats`` is a bot id per seat (the checked bot and
    the check's opponent). Every game of the check is seated here, and only here, so this
    is the one place to change when the service's seating rules change."""
    body = {"players": players, "seats": seats, **settings}
    return call(base, "POST", "/games", token=creator_token, body=body)["id"]
