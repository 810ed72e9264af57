"""One-time rewrites of what is stored, run at start-up or by ``allfours migrate``: the
published ratings recomputed under the current rules."""
