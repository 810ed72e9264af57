"""The HTTP side of post-game analysis: its routes (one blueprint) and wire schemas."""
