"""The `allfours` command line: serve, simulate, the tournament command (a client-side
program that drives bots over HTTP).
"""
