"""The HTTP side of webhook bots' callback URLs and deliveries: its routes (one blueprint)
and wire schemas."""
