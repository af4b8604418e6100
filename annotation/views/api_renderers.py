"""The API's page for browsers (Django REST framework's browsable API), accessible: in its own module, as DRF imports
the renderer classes named in its settings while it loads its own views (so this imports none of SepLab's views).

DRF's template gives ``<html>`` no language and its format drop-down button no name, and cannot be told either
without copying the template; the page's own HTML forms label none of their fields. So the page is served as a
reader of the API (what a GET answers, with its links), its forms left out -- the API is written to by clients with a
token (README.md#api), whose requests the OpenAPI schema at /api/schema/ describes -- and the two missing attributes
are set on the rendered page. ``templates/rest_framework/api.html`` (DRF's documented place to restyle the page) adds
the colours that meet WCAG AA contrast. ``tests/browser/test_accessibility.py`` runs axe on it at both sizes."""

from __future__ import annotations

from django.conf import settings
from django.utils import translation
from rest_framework.renderers import BrowsableAPIRenderer

FORMAT_BUTTON = '<button class="btn btn-primary dropdown-toggle js-tooltip" data-toggle="dropdown"'


class AccessibleBrowsableAPIRenderer(BrowsableAPIRenderer):
    def show_form_for_method(self, view, method, request, obj) -> bool:
        return False  # DRF's forms label no field: the page reads, clients with a token write

    def render(self, data, accepted_media_type=None, renderer_context=None):
        page = super().render(data, accepted_media_type, renderer_context)
        language = translation.get_language() or settings.LANGUAGE_CODE
        page = page.replace("<html>", f'<html lang="{language}">', 1)
        return page.replace(FORMAT_BUTTON, f'{FORMAT_BUTTON} aria-label="Choose the format of the GET request"', 1)
