"""The WSGI entry point gunicorn serves: ``gunicorn service.http.wsgi:app``.

Configuration comes from the environment (see ``service.http.app.DEFAULTS``).
"""

from __future__ import annotations

from service.http.app import create_app

app = create_app()
