# The All Fours Arena service: gunicorn (gevent workers) over Redis.
# Games live in Redis only, so this image holds no state: set REDIS_URL to a Redis with
# append-only persistence (docker-compose.yml does). Same gunicorn config as `allfours serve`.
FROM python:3.11-slim AS build
# The rules engine compiles with mypyc (setup.py): build the wheels where a C compiler is.
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
COPY . /src
RUN pip wheel --no-cache-dir --wheel-dir /wheels /src

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PORT=8000

WORKDIR /app
COPY --from=build /wheels /wheels
RUN pip install --no-index --find-links /wheels allfours-arena \
    && rm -rf /wheels \
    && useradd --create-home --uid 10001 arena

USER arena
EXPOSE 8000

# slim has no curl: probe /healthz with the Python that is already there.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('PORT', '8000') + '/healthz', timeout=2)"]

CMD ["gunicorn", "-c", "python:service.http.gunicorn_conf", "service.http.wsgi:app"]
