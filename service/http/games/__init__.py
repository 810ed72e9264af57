"""The HTTP side of games, turns, event streams, records, the house's games for a person:
its routes (one blueprint) and wire schemas."""
