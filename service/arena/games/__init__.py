"""A game from creation to its end: the commands (``commands.Arena``), waiting for a move
(long-polls and event streams), the per-process fan-out to viewers, and the deadlines
that play a late seat's default action."""
