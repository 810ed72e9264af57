"""A broken webhook bot for check-bot's tests: it answers each turn past its deadline (see
webhook_base.py)."""

from webhook_base import FAULTS, main

FAULTS["slow"] = True
main()
