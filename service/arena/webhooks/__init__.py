"""Bots that are called: the service POSTs a webhook bot's turns and notifications to
the bot's own server and applies the action in its answer."""
