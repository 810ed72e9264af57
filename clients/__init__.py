"""Clients and bots for All Fours Arena."""
