"""A broken bot for check-bot's tests: the starter with one fault (see base.py)."""

from base import FAULTS, main

FAULTS["one_seat_after_reconnect"] = True
main()
