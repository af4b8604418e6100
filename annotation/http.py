"""What SepLab's middleware and decorators add to a Django request, spelled out for the type checker: a view
annotates its ``request`` with one of these classes. Nothing here is instantiated: at run time every request is
Django's own ``HttpRequest`` (django-htmx's documented pattern, and django-stubs' for ``login_required`` views)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.http import HttpRequest

if TYPE_CHECKING:  # annotations only: this module may be imported before the app registry is ready
    from django.contrib.auth.models import User
    from django_htmx.middleware import HtmxDetails


class HtmxRequest(HttpRequest):
    """Any request: ``django_htmx.middleware.HtmxMiddleware`` (config/settings.py) sets ``htmx`` on every one."""

    htmx: HtmxDetails


class ResearcherRequest(HtmxRequest):
    """A researcher page's request: behind ``login_required``, so its user is a logged-in researcher, never
    ``AnonymousUser``."""

    user: User
    study_role: str  # the researcher's role in the study the page is of (``access.access_study`` sets it)
    study_may: frozenset[str]  # what that role allows (``access.PERMISSIONS``)


class RaterRequest(HtmxRequest):
    """A rater page's request (``access.rater_page``): ``access.speak_to_raters`` records on it whether the page
    speaks the language the browser asked for (then the response varies on Accept-Language)."""

    raters_language_from_browser: bool
