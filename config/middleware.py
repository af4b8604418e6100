from django.conf import settings


class ContentSecurityPolicyMiddleware:
    """Every response gets the site's CSP; pages that set their own frame-ancestors (rater pages,
    framed by crowdsourcing sites) keep it, and the rest may not be framed at all."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        own = response.get("Content-Security-Policy", "")
        frame = own if own.startswith("frame-ancestors") else "frame-ancestors 'none'"
        form_action = " ".join(["'self'", *settings.SEPLAB_TURK_SUBMIT_HOSTS])
        response["Content-Security-Policy"] = f"{settings.SEPLAB_CSP}; form-action {form_action}; {frame}"
        return response


class DatabaseUnavailableMiddleware:
    """When the database is briefly unavailable (down, restarting, or a SQLite write lock held past its
    timeout), every request gets a 503 that says to try again -- a rater the retry page on every rater URL
    (their answers so far are stored), the API JSON -- with Retry-After, never a bare 500."""

    RATER_PREFIXES = ("/r/", "/x/", "/join/")

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        from django.db import InterfaceError, OperationalError

        if not isinstance(exception, OperationalError | InterfaceError):
            return None
        import logging

        from django.http import HttpResponse, JsonResponse
        from django.template.loader import render_to_string

        logging.getLogger("seplab.database").warning("database unavailable on %s: %s", request.path, exception)
        if request.path.startswith("/api/"):
            response = JsonResponse(
                {"detail": "The database is briefly unavailable; retry in a few seconds."}, status=503
            )
        else:
            # rendered without the request: its context processors (session, messages) would need the database;
            # a rater's page in the language their browser asks for (the study's own cannot be read now)
            from django.utils import translation
            from django.utils.cache import patch_vary_headers
            from django.utils.translation import gettext

            rater = request.path.startswith(self.RATER_PREFIXES)
            with translation.override(
                translation.get_language_from_request(request) if rater else translation.get_language()
            ):
                message = (
                    gettext(
                        "The server is briefly busy. Nothing you answered is lost: reload this page in a "
                        "few seconds to continue."
                    )
                    if rater
                    else "The server is briefly busy; reload this page in a few seconds."
                )
                response = HttpResponse(render_to_string("unavailable.html", {"message": message}), status=503)
            if rater:
                patch_vary_headers(response, ["Accept-Language"])
        response["Retry-After"] = "2"
        return response
