from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView

from config.errors import api_not_found
from config.health import health

urlpatterns = [
    path("r/<str:token>/", include("annotation.views.rater_urls")),  # first: the raters' traffic (see that module)
    path("healthz", health, name="health"),
    # browsers ask for /favicon.ico on every page without a <link rel="icon"> (a JSON response, a file download)
    path("favicon.ico", lambda request: HttpResponsePermanentRedirect(static("favicon.svg"))),  # resolved per request:
    # with hashed static files the name comes from collectstatic's manifest, which loading the URLs must not need
    path("admin/", admin.site.urls),
    # failed logins are limited per username and per client by django-axes (config/settings.py)
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api_schema"),
    path("", include("analytics.urls")),
    path("api/", include("annotation.views.api_urls")),
    path("", include("selection.urls")),
    path("", include("annotation.views.urls")),
    re_path(r"^api/(?P<rest>[\s\S]*)\Z", api_not_found),  # JSON 404 for any other /api/ URL, DEBUG or not
]

handler400 = "config.errors.bad_request"
handler403 = "config.errors.forbidden"
handler404 = "config.errors.not_found"
handler500 = "config.errors.server_error"
