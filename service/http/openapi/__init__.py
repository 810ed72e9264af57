"""``python -m service.http.openapi`` (``__main__``): print the contract that
``service.http.openapi_spec`` builds."""
