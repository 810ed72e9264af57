"""The HTTP side of the ladders: its routes (one blueprint) and wire schemas."""
