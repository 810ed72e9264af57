"""What every arena domain shares and that imports no domain: the problems (refusals), a
stored game's status, the seat's clock, fair deals, the background loop, ratings."""
