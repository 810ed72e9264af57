"""What the arena does with games: game commands and waiting (games), tournaments,
deadlines, ratings, house bots, exports, fan-out to spectators.
"""
