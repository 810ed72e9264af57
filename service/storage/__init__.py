"""Where everything is kept: the Redis key layout and scripts (store), the connection, the
wake-up listener, the embedded server.
"""
