"""``allfours check-bot``: a bot put through the situations real play brings, before it
competes — on its own machine, against a service of the check's own.

The parts: ``service`` (the restartable embedded service and check-bot's own calls),
``proxy`` (the real TCP proxy that injects each situation and logs every request),
``games`` (a game's run and timeline, the opponent), ``evidence`` (why a move was played
by the clock, read from the log), ``runner`` (what every check shares, and the command's
run), ``report`` (the cause-first report), ``situations`` + ``judges`` + ``pulling`` (a
bot that asks for its turns) and ``webhook`` (a bot the service calls).
"""
