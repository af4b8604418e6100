"""API pagination, in its own module: DRF imports the pagination class while it defines its generic
views, so this must not import them (annotation.views.api does)."""

from __future__ import annotations

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination


class StrictPageNumberPagination(PageNumberPagination):
    """Page numbers as the schema says: a positive integer, else a 400 that says so (DRF's default
    reads `?page=` as page 1 and `?page=abc` as a 404)."""

    def paginate_queryset(self, queryset, request, view=None):
        raw = request.query_params.getlist(self.page_query_param)
        if raw and (len(raw) > 1 or not raw[0].isascii() or not raw[0].isdigit() or int(raw[0]) < 1):
            raise ValidationError({self.page_query_param: ["A page number is one positive integer."]})
        return super().paginate_queryset(queryset, request, view)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1}
        return parameters
