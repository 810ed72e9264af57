"""The HTTP face of the service: routes, schemas, problems, the OpenAPI document, pages,
and the gunicorn/gevent process that serves them.
"""
