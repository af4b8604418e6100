"""The write floor for bench/load_raters.py --compare-bare: what a Django view costs that does the least any stored,
checked judgment needs, one read and one write in one transaction on the run's database (``DATABASE_URL``), with
the same middleware as the bare view (bench/bare_django.py) and no template. Served like it:

    DATABASE_URL=... gunicorn -c config/gunicorn.conf.py bench.floor_django:application

Its requests/s bound what any design of the rating path can reach on this machine and database: a request that
stores a judgment must at least read what it checks and write the judgment. The table is made (emptied) when the
module loads: in gunicorn's master, before the workers fork (preload_app).
"""

from __future__ import annotations

import os

import dj_database_url

from bench.startproject import configure

configure(__name__, {"default": dj_database_url.parse(os.environ["DATABASE_URL"], conn_max_age=60)})

from django.core.wsgi import get_wsgi_application  # noqa: E402  (after settings.configure)
from django.db import connection, transaction  # noqa: E402
from django.http import HttpRequest, HttpResponse  # noqa: E402
from django.urls import re_path  # noqa: E402

TABLE = "bench_write_floor"


def create_table() -> None:
    """The floor's own table (a row per request), in the run's database."""
    with connection.cursor() as cursor:
        key = "bigserial PRIMARY KEY" if connection.vendor == "postgresql" else "integer PRIMARY KEY"  # numbered
        cursor.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (id {key}, path varchar(200) NOT NULL)")
        cursor.execute(f"DELETE FROM {TABLE}")
        cursor.execute(f"INSERT INTO {TABLE} (path) VALUES ('seed')")
    connection.close()  # the forked workers open their own


def one_read_one_write(request: HttpRequest) -> HttpResponse:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SELECT path FROM {TABLE} WHERE id = %s", [1])
        cursor.fetchone()
        cursor.execute(f"INSERT INTO {TABLE} (path) VALUES (%s)", [request.path[:200]])
    return HttpResponse(b"ok", content_type="text/plain")


urlpatterns = [re_path(r"", one_read_one_write)]
application = get_wsgi_application()
create_table()
