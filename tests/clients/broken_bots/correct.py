"""The starter as base.py has it, with no fault: the control for the broken bots."""

from base import main

main()
