"""The framework floor for bench/load_raters.py --compare-bare: a bare Django view (a fresh
``startproject``'s middleware, no database, no template) served as a WSGI application, so gunicorn can
run it with exactly the settings the product runs under (config/gunicorn.conf.py):

    gunicorn -c config/gunicorn.conf.py bench.bare_django:application

Every path answers 200 with a short text.
"""

from __future__ import annotations

from bench.startproject import configure

configure(__name__, {})

from django.core.wsgi import get_wsgi_application  # noqa: E402  (after settings.configure)
from django.http import HttpRequest, HttpResponse  # noqa: E402
from django.urls import re_path  # noqa: E402


def bare(request: HttpRequest) -> HttpResponse:
    return HttpResponse(b"ok", content_type="text/plain")


urlpatterns = [re_path(r"", bare)]
application = get_wsgi_application()
