"""Who plays: bots' owners, how a deployment admits them and suspends a cheat, consent to
play (invitations and policies), and the house bots' accounts and process."""
