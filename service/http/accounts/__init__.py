"""The HTTP side of bots, their owners, consent to play (invitations, policy), suspension:
its routes (one blueprint) and wire schemas."""
