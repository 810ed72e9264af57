"""How long ``allfours check-bot`` takes per bot and per situation, and how many requests
each bot sends.

    python bench/check_bot.py [--bots project,python,javascript,typescript,go,ruby,java,cpp,webhook]

(``project`` is the project's runner with the random strategy; ``heuristic`` and
``search`` are its other strategies; ``webhook`` and ``webhook-node`` are the example
webhook bots, clients/examples/webhook_bot.py and .mjs, checked with ``--webhook``.)

Runs the whole check (every situation) once per bot, one after another, on this machine,
and prints one JSON line: per bot, the seconds the check took (service start, the bot's
own start — a Go, Java or C++ build or a TypeScript compile included —, the games, the
stop), the seconds of each situation (the span of its games: games run side by side, so
these overlap), whether it passed, and its requests per move as check-bot counted them. A
bot whose toolchain is missing is left out (``"skipped"``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)  # the project, not bench/ (its http.py would shadow the stdlib's)
STARTERS = ROOT / "clients" / "starters"
TOOLS = {"python": "python3", "javascript": "node", "typescript": "npm", "go": "go",
         "ruby": "ruby", "java": "javac", "cpp": "g++"}
PROJECT = (f"{sys.executable} -m service.cli.main bot --strategy random "
           '--server "$ARENA_URL" --token "$ARENA_TOKEN" --log-level warning '
           "--accept-from '*'")


STRATEGIES = {"project": "random", "heuristic": "heuristic", "search": "search"}
EXAMPLES = ROOT / "clients" / "examples"


def _command(bot: str) -> list[str]:
    if bot in STRATEGIES:
        return ["--command", PROJECT.replace("--strategy random",
                                             f"--strategy {STRATEGIES[bot]}")]
    if bot in ("webhook", "webhook-node"):
        from service.storage.embedded import free_port

        port = free_port()
        run = ([sys.executable, str(EXAMPLES / "webhook_bot.py"), "--port", str(port)]
               if bot == "webhook" else ["node", str(EXAMPLES / "webhook_bot.mjs")])
        return ["--webhook", f"http://127.0.0.1:{port}/", "--", *run]
    return ["--", str(STARTERS / bot / "run")]


def check(bot: str) -> dict[str, object]:
    tool = {"webhook-node": "node"}.get(bot, TOOLS.get(bot))
    if tool and not shutil.which(tool):
        return {"skipped": f"no {tool}"}
    command = _command(bot)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        began = time.monotonic()
        subprocess.run([sys.executable, "-m", "service.cli.main", "check-bot", "--quiet",
                        "--json", str(report), *command], cwd=ROOT, capture_output=True,
                       timeout=600, check=False)
        seconds = time.monotonic() - began
        data = json.loads(report.read_text()) if report.exists() else {}
    per_move = next((s["what"].split(": ")[1].split(" per move")[0]
                     for s in data.get("situations", [])
                     if s["situation"] == "requests_per_move"), None)
    return {"seconds": round(seconds, 1), "passed": data.get("passed", False),
            "failed": [s["situation"] for s in data.get("situations", []) if not s["passed"]],
            "cause": (data.get("cause") or {}).get("situation"),
            "situations": {s["situation"]: s.get("seconds") for s in data.get("situations", [])},
            "requests_per_move": per_move}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bots", default="project,heuristic,search," + ",".join(TOOLS)
                        + ",webhook,webhook-node")
    args = parser.parse_args()
    result = {bot: check(bot) for bot in args.bots.split(",")}
    print(json.dumps({"bench": "check_bot", "bots": result}))


if __name__ == "__main__":
    main()
