"""HTTP routes of a bot's own things (``service.arena.archive``): its finished games to
take home, and its owner's overview."""
