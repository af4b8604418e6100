"""Error pages: API clients get JSON errors everywhere under /api/ (also for URLs no route matches,
through the catch-all route at the end of config/urls.py, whatever DEBUG says), people get the HTML
pages."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import translation
from django.utils.cache import patch_vary_headers
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


@csrf_exempt  # a POST to no route is a 404 like a GET, not a CSRF refusal (it changes nothing)
def api_not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    """The last route: an /api/ URL that matched nothing."""
    return JsonResponse({"detail": "Not found."}, status=404)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A page that does not exist, in the language the browser asks for (among settings.LANGUAGES): a rater who
    followed a wrong or withdrawn link reads it in their own language, as their pages speak it."""
    if _is_api(request):
        return JsonResponse({"detail": "Not found."}, status=404)
    with translation.override(translation.get_language_from_request(request)):
        response = render(request, "404.html", status=404)
    patch_vary_headers(response, ["Accept-Language"])
    return response


def forbidden(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A member asking for more than their role allows (annotation/access.py): what the role cannot do, said."""
    message = str(exception) or "You may not do this."
    if _is_api(request):
        return JsonResponse({"detail": message}, status=403)
    return render(request, "403.html", {"message": message}, status=403)


def server_error(request: HttpRequest) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"detail": "Server error; it has been logged."}, status=500)
    return defaults.server_error(request)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"detail": "Bad request."}, status=400)
    return defaults.bad_request(request, exception)
