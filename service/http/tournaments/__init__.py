"""The HTTP side of tournaments and the leaderboard: its routes (one blueprint) and wire schemas."""
