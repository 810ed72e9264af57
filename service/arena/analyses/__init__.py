"""Post-game analysis: asked for once, queued in Redis, computed by background workers,
stored with the game."""
