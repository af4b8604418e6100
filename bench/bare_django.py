"""The framework floor for bench/load_raters.py --compare-bare: a bare Django view (a fresh
``startproject``'s middleware, no database, no template) served as a WSGI application, so gunicorn can
run it with exactly the settings the product runs under (config/gunicorn.conf.py):

    gunicorn -c config/gunicorn.conf.py bench.bare_django:application

Every path answers 200 with a short text.
"""

from __future__ import annotations

import secrets

from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY=secrets.token_urlsafe(50),
    ALLOWED_HOSTS=["127.0.0.1"],
    ROOT_URLCONF=__name__,
    INSTALLED_APPS=[
        "django.contrib.auth",
        "django.contrib.contenttypes",
        "django.contrib.sessions",
        "django.contrib.messages",
    ],
    MIDDLEWARE=[  # what `django-admin startproject` writes
        "django.middleware.security.SecurityMiddleware",
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.common.CommonMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
        "django.middleware.clickjacking.XFrameOptionsMiddleware",
    ],
    DATABASES={},
    USE_TZ=True,
)

from django.core.wsgi import get_wsgi_application  # noqa: E402  (after settings.configure)
from django.http import HttpRequest, HttpResponse  # noqa: E402
from django.urls import re_path  # noqa: E402


def bare(request: HttpRequest) -> HttpResponse:
    return HttpResponse(b"ok", content_type="text/plain")


urlpatterns = [re_path(r"", bare)]
application = get_wsgi_application()
