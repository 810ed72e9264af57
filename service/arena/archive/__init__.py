"""A bot's own things: its finished games to take home (``games``)."""
