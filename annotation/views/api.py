"""The researcher API (token or session auth). Read-only views over the researcher's own studies;
judgments are also exported in the formats of docs/interfaces.md#judgment-format."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypedDict

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError

from annotation import setting_ranges
from annotation.access import studies_for
from annotation.exchange import exports, judgment_files
from annotation.exchange.exports import export_response
from annotation.models import Generation, Item, Judgment, Study, System


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()


ERROR_RESPONSES = {
    "400": OpenApiResponse(OpenApiTypes.OBJECT, "Invalid query parameter: {parameter: [what is wrong]}."),
    "401": OpenApiResponse(ErrorSerializer, "Missing or invalid token."),
    "404": OpenApiResponse(ErrorSerializer, "No such study (or not yours), or no such page."),
}


class SepLabAutoSchema(AutoSchema):
    """Every operation documents its error answers too, so clients (and schemathesis) know them."""

    def _get_response_bodies(self, direction="response"):
        bodies = super()._get_response_bodies(direction)
        if direction == "response":
            for code, response in ERROR_RESPONSES.items():
                bodies.setdefault(code, self._get_response_for_code(response, code, direction=direction))
        return bodies


class StudySerializer(serializers.ModelSerializer):
    # each system by name (many=True: DRF wraps the field in a ManyRelatedField; the stubs type the call as the field)
    systems: serializers.SlugRelatedField[System] = serializers.SlugRelatedField(
        many=True, read_only=True, slug_field="name"
    )
    selection_method = serializers.CharField(source="selection_settings.selection_method", read_only=True)
    budget = serializers.IntegerField(
        source="selection_settings.budget", read_only=True, allow_null=True, **setting_ranges.whole_bounds("budget")
    )
    n_items = serializers.IntegerField(read_only=True)
    n_judgments = serializers.IntegerField(read_only=True)

    class Meta:
        model = Study
        fields = [
            "id",
            "name",
            "description",
            "created",
            "systems",
            "n_items",
            "n_judgments",
            "elicitation",
            "allow_tie",
            "tie_label",
            "neither_option",
            "neither_label",
            "question",
            "pairs_per_assignment",
            "raters_per_item",
            "pair_mode",
            "scheduling",
            "selection_method",
            "budget",
            "seed",
        ]
        # the settings' ranges as their declarations give them (the settings form and do_update_settings check them)
        extra_kwargs = {
            name: setting_ranges.bounds(name) for name in ("pairs_per_assignment", "raters_per_item", "seed")
        }


class GenerationSerializer(serializers.ModelSerializer):
    system = serializers.CharField(source="system.name")

    class Meta:
        model = Generation
        fields = ["system", "sample_index", "text"]


class ItemSerializer(serializers.ModelSerializer):
    id = serializers.CharField(source="external_id")
    generations = GenerationSerializer(many=True, read_only=True)

    class Meta:
        model = Item
        fields = ["id", "input", "reference", "metadata", "generations"]


class _FieldOptions(TypedDict):
    """What every field of the judgment format says the same way."""

    allow_null: bool
    required: bool


def _judgment_field(field: judgment_files.JudgmentField) -> serializers.Field:
    options: _FieldOptions = {"allow_null": field.nullable, "required": field.exported}
    kinds: dict[str, Callable[[], serializers.Field]] = {
        "text": lambda: serializers.CharField(**options),
        "count": lambda: serializers.IntegerField(min_value=0, **options),
        "rater_kind": lambda: serializers.ChoiceField(choices=judgment_files.RATER_KINDS, **options),
        "systems": lambda: serializers.ListField(child=serializers.CharField(), **options),
        "probability": lambda: serializers.FloatField(min_value=0, max_value=1, **options),
        "timestamp": lambda: serializers.CharField(**options),
        "flag": lambda: serializers.BooleanField(**options),
        "strength": lambda: serializers.ChoiceField(choices=judgment_files.STRENGTHS, **options),
        "answers": lambda: serializers.DictField(child=serializers.DictField(), **options),
    }
    return kinds[field.kind]()


# One judgment in the judgment format (docs/interfaces.md#judgment-format), its fields read off the one schema
# (judgment_files.JUDGMENT_SCHEMA).
JudgmentSerializer = type(
    "JudgmentSerializer",
    (serializers.Serializer,),
    {
        "__doc__": "One judgment in the judgment format (docs/interfaces.md#judgment-format).",
        "__module__": __name__,
        **{f.name: _judgment_field(f) for f in judgment_files.JUDGMENT_SCHEMA},
    },
)


class StudyViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = StudySerializer
    lookup_value_regex = "[0-9]+"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no user, only the model matters
            return Study.objects.none()
        studies = studies_for(self.request.user).order_by("-created")
        if self.action not in ("list", "retrieve"):  # a study's items, judgments or export: the study row alone
            return studies
        # each count in a subquery of its own table: counted in one query together, the items and the judgments
        # of a study were joined, items × judgments rows (minutes at 10⁵ judgments on PostgreSQL)
        return (
            studies.annotate(
                n_items=Study.count_per_study(Item.objects.all()),
                n_judgments=Study.count_per_study(Judgment.objects.all()),
            )
            .select_related("selection_settings")
            .prefetch_related("systems")
        )

    @extend_schema(responses=ItemSerializer(many=True))
    @action(detail=True)
    def items(self, request, pk=None):
        study = self.get_object()
        queryset = Item.objects.filter(study=study).prefetch_related("generations__system")
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(ItemSerializer(page, many=True).data)

    @extend_schema(responses=JudgmentSerializer(many=True))
    @action(detail=True)
    def judgments(self, request, pk=None):
        study = self.get_object()
        # the page's ids first, read off the judgments' own index, then those rows with what a line needs: a deep
        # page skips its offset in the index alone, not through the joins
        ids = self.paginate_queryset(exports.judgment_ids(study))
        lines = [exports.judgment_line(j) for j in exports.judgments_by_ids(study, ids or [])]
        return self.get_paginated_response(JudgmentSerializer(lines, many=True).data)

    @extend_schema(
        parameters=[OpenApiParameter("as", OpenApiTypes.STR, enum=["jsonl", "csv"], description="File format.")],
        responses={(200, "application/x-ndjson"): OpenApiTypes.STR, (200, "text/csv"): OpenApiTypes.STR},
    )
    @action(detail=True, url_path="judgments/export")
    def export(self, request, pk=None):
        fmt = request.query_params.get("as", "jsonl")
        if fmt not in ("jsonl", "csv"):
            raise ValidationError({"as": "must be 'jsonl' or 'csv'"})
        return export_response(self.get_object(), fmt)
