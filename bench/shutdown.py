"""How long Ctrl-C on ``allfours serve`` takes, and how much it prints.

    python bench/shutdown.py [--runs 3] [--workers 2]

Each run starts ``allfours serve`` (its embedded valkey-server, gunicorn, the house bots)
in a session of its own, waits for ``/readyz``, plays a little (a 4-player house game
that the house bots play up to the person's turn, plus a few idle seconds so the house
bots sit in their long-polls), sends SIGINT as a terminal's Ctrl-C does, and measures
the seconds until serve has exited and the stderr lines it printed after the signal —
all of them, those that are not access-log lines, and the warnings, errors and
tracebacks among them. Each line's arrival is timed, so the phases show too (house bots,
gunicorn's drain, valkey). One JSON line: every run and the median.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)  # not bench/: its http.py would stand in for the standard library's

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402

from service.storage.embedded import free_port  # noqa: E402


def _post(url: str, body: dict) -> int:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def one_run(workers: int, idle_s: float) -> dict[str, object]:
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="allfours-shutdown-") as tmp:
        env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "service.cli.main", "serve", "--port", str(port),
             "--workers", str(workers), "--data-dir", str(Path(tmp) / "data")],
            cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True)
        lines: list[tuple[float, str]] = []

        def read() -> None:
            assert proc.stderr is not None
            for raw in proc.stderr:
                lines.append((time.monotonic(), raw.decode(errors="replace").rstrip()))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 90
            while not _ready(base + "/readyz"):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("serve did not start:\n"
                                       + "\n".join(t for _, t in lines[-20:]))
                time.sleep(0.2)
            while _post(base + "/house/games", {"players": 4, "opponent": "random",
                                                "partner": "random"}) != 201:
                if time.monotonic() > deadline:
                    raise RuntimeError("no house game")
                time.sleep(0.3)
            time.sleep(idle_s)
            sent = time.monotonic()
            before = len(lines)
            os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
            status = proc.wait(60)
            exited = time.monotonic() - sent
            reader.join(5)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    after = lines[before:]
    texts = [t for _, t in after]
    not_access = [t for t in texts if '"logger":"allfours.access"' not in t]
    loud = [t for t in texts if '"level":"warning"' in t or '"level":"error"' in t
            or "Traceback" in t or "Max retries" in t]
    marks = {}
    for at, text in after:
        for key, needle in (("house_stopped", "allfours serve: stopping"),
                            ("gunicorn_signalled", "Handling signal: term"),
                            ("gunicorn_down", "Shutting down: Master"),
                            ("valkey_down", "embedded valkey-server stopped")):
            if needle in text and key not in marks:
                marks[key] = round(at - sent, 2)
    return {"exit_status": status, "seconds": round(exited, 2), "lines": len(texts),
            "lines_not_access_log": len(not_access), "warnings_or_tracebacks": len(loud),
            "at": marks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--idle", type=float, default=3.0,
                        help="seconds between the game and the Ctrl-C")
    args = parser.parse_args()
    runs = [one_run(args.workers, args.idle) for _ in range(args.runs)]
    print(json.dumps({"bench": "shutdown", "workers": args.workers, "runs": runs,
                      "median_seconds": statistics.median(r["seconds"] for r in runs),
                      "median_lines": statistics.median(r["lines"] for r in runs),
                      "target_seconds": 3.0}))


if __name__ == "__main__":
    main()
