"""The OpenAPI contract: ``spec`` builds it from the routes and schemas; ``python -m
service.http.openapi`` (``__main__``) prints it, from an app it builds."""
