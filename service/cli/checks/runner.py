"""What both kinds of check share: the bot's process, the service and the proxy, started
and stopped alike; the verdicts, one per situation wanted, with their seconds; and the
command's own run (the report, the JSON, the exit status, an interrupt).

A kind of check (``pulling.Check`` for a bot that asks for its turns,
``webhook.WebhookCheck`` for one the service calls) subclasses :class:`CheckRun`: it says
which situations it knows (``situations``: ``name: (games, docs anchor, title)``), links
each to the docs (``docs_link``), judges each in a ``judge_<name>`` method returning
``(passed, what, fix)``, and may refine the results (``explain``: causes, what real play
would do, which failure explains which).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from service.cli.bot_process import start_command, stop_bot
from service.cli.checks.proxy import CheckProxy
from service.cli.checks.report import Result, report_json, report_text, write_json
from service.cli.checks.service import CheckError, CheckService
from service.storage.embedded import log_tail

Situations = dict[str, tuple[tuple[str, ...], str, str]]


class CheckRun:
    """The parts every check has; see the module's docstring."""

    situations: Situations
    service: CheckService
    proxy: CheckProxy | None
    bot: subprocess.Popen[bytes] | None
    bot_log: Path
    work: Path
    runs: dict[str, Any]
    only: set[str] | None
    quiet: bool
    stop: threading.Event
    command: list[str] | str

    @staticmethod
    def docs_link(situation: str) -> str:
        raise NotImplementedError

    def say(self, text: str) -> None:
        if not self.quiet:
            print(f"check-bot: {text}", file=sys.stderr, flush=True)

    @property
    def base(self) -> str:
        return self.service.url

    def wanted(self, game: str) -> bool:
        return self.only is None or any(
            game in self.situations[s][0] or "*" in self.situations[s][0] for s in self.only)

    def wanted_any(self, names: tuple[str, ...]) -> bool:
        return self.only is None or bool(self.only.intersection(names))

    def start_bot(self, env: dict[str, str]) -> None:
        self.bot = start_command(self.command, env, self.bot_log)

    def close(self) -> None:
        self.stop.set()
        stop_bot(self.bot)
        if self.proxy is not None:
            self.proxy.stop()
        self.service.stop()

    def bot_log_tail(self) -> str:
        return log_tail(self.bot_log, 15)

    def seconds_of(self, situation: str) -> float:
        """How long a situation took: the span of the games it watches."""
        games = self.situations[situation][0]
        runs = [r for name, r in self.runs.items()
                if "*" in games or name in games or name.split("-")[0] in games]
        starts = [r.started for r in runs if getattr(r, "started", 0.0)]
        ends = [r.ended or time.monotonic() for r in runs if getattr(r, "started", 0.0)]
        return round(max(ends) - min(starts), 1) if starts else 0.0

    def verdicts(self) -> list[Result]:
        out: list[Result] = []
        for name, (games, _anchor, title) in self.situations.items():
            if self.only is not None and name not in self.only:
                continue
            if "*" not in games and not any(g in self.runs or any(
                    r.split("-")[0] == g for r in self.runs) for g in games):
                continue
            passed, what, fix = getattr(self, f"judge_{name}")()
            out.append(Result(name, passed, what, "" if passed else fix,
                              self.docs_link(name), title, self.seconds_of(name)))
        return self.explain(out)

    def explain(self, results: list[Result]) -> list[Result]:
        """Causes, real play and explanations for the failures (a kind of check refines)."""
        for r in results:
            if not r.passed and not r.cause:
                r.cause = "other"
        return results


def check_unknown(only: set[str] | None, situations: Situations, mode: str = "") -> bool:
    """Say so and return True when ``only`` names a situation this check does not know."""
    unknown = (only or set()) - set(situations)
    if unknown:
        print(f"allfours check-bot: unknown situation(s) {sorted(unknown)}{mode}; known: "
              f"{', '.join(situations)}", file=sys.stderr)
    return bool(unknown)


def run_command(make: Callable[[], CheckRun], json_path: str | None,
                extra: dict[str, Any] | None = None) -> int:
    """Run a check as the command does: the report on stdout, the JSON, the exit status
    (0 passed, 1 a situation failed, 2 no check ran, 130 interrupted)."""
    began = time.monotonic()

    def on_term(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt  # stopped from outside: unwind, stopping what was started

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_term)
    try:
        check = make()
    except CheckError as exc:
        print(f"allfours check-bot: {exc}", file=sys.stderr)
        return 2
    try:
        results = check.run()  # type: ignore[attr-defined]
    except KeyboardInterrupt:
        shutil.rmtree(check.work, ignore_errors=True)
        print("allfours check-bot: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # check-bot's own failure: say so, not as a verdict
        shutil.rmtree(check.work, ignore_errors=True)
        print(f"allfours check-bot: could not run the check: {exc}", file=sys.stderr)
        return 2
    seconds = time.monotonic() - began
    print(report_text(results, seconds), flush=True)
    failed = [r for r in results if not r.passed]
    if failed:
        print("the bot's last output lines:\n" + check.bot_log_tail(), flush=True)
    if json_path:
        write_json(json_path, report_json(results, seconds, check.bot_log_tail(), extra))
    shutil.rmtree(check.work, ignore_errors=True)
    return 1 if failed else 0
