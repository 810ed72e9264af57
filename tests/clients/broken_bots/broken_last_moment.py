"""A broken bot for check-bot's tests: the starter with one fault (see base.py)."""

from base import FAULTS, main

FAULTS["last_moment"] = True
main()
