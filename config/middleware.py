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
