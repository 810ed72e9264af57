"""The WSGI entry point gunicorn serves: ``gunicorn service.wsgi:app``.

Configuration comes from the environment (see ``service.app.DEFAULTS``).
"""

from __future__ import annotations

from .app import create_app

app = create_app()
