"""The settings of a fresh ``django-admin startproject`` that the framework floors of bench/load_raters.py share
(bench/bare_django.py, no database; bench/floor_django.py, one read and one write on the run's database): one place,
so the two floors differ only in what their view does."""

from __future__ import annotations

import secrets

from django.conf import settings


def configure(urlconf: str, databases: dict) -> None:
    """Configure Django as a fresh project would, answering 127.0.0.1 with ``urlconf``'s views."""
    settings.configure(
        DEBUG=False,
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS=["127.0.0.1"],
        ROOT_URLCONF=urlconf,
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
        DATABASES=databases,
        USE_TZ=True,
    )
