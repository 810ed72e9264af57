"""All Fours Arena: the rules engine (``service.engine``) and the game service around it."""
