"""``python -m service.http.openapi``: print the spec. Apart from ``service.http.openapi_spec``
because it builds the app (``create_app``), and the app serves the spec: so the app imports
the spec's module, and only this entry point imports the app."""

from __future__ import annotations

import sys

from service.http.app import create_app
from service.http.openapi_spec import spec_yaml


def main() -> int:
    """Print the spec (the app is built without Redis I/O)."""
    sys.stdout.write(spec_yaml(create_app({"ARENA_RATINGS_MIGRATE": "0"})))  # reads only
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
