"""A broken webhook bot for check-bot's tests: it believes every request (see
webhook_base.py)."""

from webhook_base import FAULTS, main

FAULTS["no_signature"] = True
main()
