"""Tournaments: the service that schedules games as earlier ones finish, pairing and
deals, knockout brackets, standings and ratings, stopping and leaving, reading and
export."""
