"""The ladder: bots queue for rated games with no organizer; a matchmaker seats them; a
bot's first entry plays an unrated validation game against the house."""
