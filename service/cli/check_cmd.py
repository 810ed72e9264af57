"""``allfours check-bot``: its options, and which check runs — a pulling bot's
(``service.cli.checks.pulling``) or a webhook bot's (``service.cli.checks.webhook``); both
share one runner (``service.cli.checks.runner``), so the command that picks one stands
apart from both."""

from __future__ import annotations

import argparse
import logging
import sys

from service.cli.checks.pulling import SITUATIONS, run_pulling
from service.cli.checks.webhook import run_webhook


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--command", default=None,
                   help="the bot's command line, run by the shell (or give it after --)")
    p.add_argument("--json", default=None, metavar="FILE", help="write the report as JSON")
    p.add_argument("--only", default=None, metavar="SITUATION,...",
                   help="check only these situations (and play only the games they need): "
                   + ", ".join(SITUATIONS))
    p.add_argument("--quiet", action="store_true", help="print only the report")
    p.add_argument("--webhook", default=None, metavar="URL",
                   help="check a webhook bot listening on URL (http://127.0.0.1:PORT/...): "
                   "its command is run with ARENA_WEBHOOK_SECRET and PORT "
                   "(service.cli.checks.webhook)")
    p.add_argument("bot", nargs=argparse.REMAINDER, help="-- the bot's command and arguments")


def run(args: argparse.Namespace) -> int:
    argv = list(args.bot)
    if argv and argv[0] == "--":
        argv = argv[1:]
    command: list[str] | str | None = args.command or (argv or None)
    if command is None:
        print("allfours check-bot: give the bot's command: --command '...' or -- CMD ARGS",
              file=sys.stderr)
        return 2
    only = None
    if args.only:
        only = {s.strip() for s in args.only.split(",") if s.strip()}
    if getattr(args, "webhook", None):
        logging.getLogger("clients").setLevel(logging.ERROR)
        return run_webhook(args.webhook, command, only, args.quiet, args.json)
    logging.getLogger("clients").setLevel(logging.ERROR)
    return run_pulling(command, only, args.quiet, args.json)
