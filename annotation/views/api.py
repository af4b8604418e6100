"""The researcher API (token or session auth) over the studies a researcher owns or is on the team of: read every
study, its items and judgments (also exported in the formats of docs/interfaces.md#judgment-format); create a study
from a file, change its settings and manage its team (README.md#api). What each role may do is decided by
``annotation/access.py``: someone outside a study gets 404, a member whose role does not allow a change 403."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict, cast

from django import forms
from django.conf import settings
from django.contrib.auth.models import User
from django.core import validators
from django.db import models, transaction
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.response import Response

from annotation import access, setting_ranges, study_settings
from annotation.access import studies_for
from annotation.crowd import sites
from annotation.endpoint_runs import EndpointRun
from annotation.endpoints import EndpointError
from annotation.errors import FieldErrors, ServiceError
from annotation.exchange import exports, judgment_files, ranking_files
from annotation.exchange.exports import export_response
from annotation.exchange.rules import FormatError, check_size
from annotation.generating import runner as generating_runner
from annotation.generating.runner import GenerationRun
from annotation.judges import runner as judge_runner
from annotation.judges.runner import JudgeRun
from annotation.models import (
    AuditEntry,
    ExternalLink,
    Generation,
    Item,
    Job,
    Judge,
    Judgment,
    Membership,
    Role,
    Study,
    System,
    SystemEndpoint,
)
from annotation.rating import rankings
from annotation.studies import creation, enrolment, lifecycle, team
from annotation.views.forms import (
    JudgeForm,
    SystemEndpointForm,
    form_from_json,
    settings_as_json,
    settings_form_from_json,
    settings_names,
)
from annotation.views.runs import KINDS as RUN_KINDS


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()


ERROR_RESPONSES = {
    "400": OpenApiResponse(OpenApiTypes.OBJECT, "Invalid query parameter: {parameter: [what is wrong]}."),
    "401": OpenApiResponse(ErrorSerializer, "Missing or invalid token."),
    "403": OpenApiResponse(ErrorSerializer, "Your role in the study does not allow this change (it names the role)."),
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
        fields = ["id", "input", "messages", "reference", "metadata", "excluded", "review_requested", "generations"]
        read_only_fields = ["messages", "excluded", "review_requested"]


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


class RankingSerializer(serializers.Serializer):
    """One answer on several outputs in the ranking format (docs/interfaces.md#ranking-format). An output is a
    system's name (its first sample) or {"system": name, "sample": k}."""

    id = serializers.CharField()
    item = serializers.CharField()
    rater = serializers.CharField()
    rater_kind = serializers.ChoiceField(choices=judgment_files.RATER_KINDS)
    kind = serializers.ChoiceField(choices=list(ranking_files.KINDS))
    shown = serializers.ListField(child=serializers.JSONField(), help_text="The outputs in display order, top first.")
    ranking = serializers.ListField(
        child=serializers.JSONField(), required=False, help_text="A ranking's outputs, best first."
    )
    best = serializers.JSONField(required=False, help_text="Best-worst: the best output shown.")
    worst = serializers.JSONField(required=False, help_text="Best-worst: the worst output shown.")
    created = serializers.CharField()
    comment = serializers.CharField(allow_null=True)
    time_on_task_ms = serializers.IntegerField(allow_null=True)
    excluded = serializers.BooleanField()


class RankingsFileSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="A rankings file: JSONL, docs/interfaces.md#ranking-format.")


class StudyCreateSerializer(serializers.Serializer):
    """A new study from a study file, as on the New study page (docs/interfaces.md#study-file)."""

    name = serializers.CharField(max_length=200)
    file = serializers.FileField(help_text="The study file: JSONL or CSV, as on the New study page.")
    description = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)


class JobStateSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField()


class StudyCreatedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    status = serializers.CharField(help_text="'importing' while the worker imports a large file, then 'active'.")
    job = JobStateSerializer(allow_null=True, help_text="The background import of a large file, or null.")
    warnings = serializers.ListField(child=serializers.CharField(), help_text="Empty outputs imported, and such.")


class MemberSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username")
    role = serializers.ChoiceField(choices=Role.choices)

    class Meta:
        model = Membership
        fields = ["id", "username", "role", "added"]
        read_only_fields = ["id", "added"]


class MemberRoleSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=Role.choices)


class AuditEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEntry
        fields = ["at", "username", "action", "summary", "detail"]


def _setting_field(name: str) -> serializers.Field:
    """A setting as the API's schema types it, from its declaration (``annotation/study_settings.py``) and column."""
    if name == "explicit_pairs":
        pair = serializers.ListField(child=serializers.CharField(), min_length=2, max_length=2)
        return serializers.ListField(
            child=pair,
            required=False,
            help_text="The system pairs compared, by name (in any pair mode); sent, they are the pairs ticked for "
            "pair_mode explicit.",
        )
    if name == "baseline":
        return serializers.CharField(required=False, allow_null=True, help_text="The baseline system's name.")
    setting, column = study_settings.SETTINGS[name], setting_ranges.model_field(name)
    common: dict = {"required": False, "help_text": setting.help, "allow_null": column.null}
    offered = setting_ranges.choices(name)
    if offered is not None:
        return serializers.ChoiceField(choices=[key for key, _ in offered], **common)
    if isinstance(column, models.BooleanField):
        return serializers.BooleanField(**common)
    if isinstance(column, models.IntegerField):
        return serializers.IntegerField(**cast(dict[str, Any], setting_ranges.bounds(name)), **common)
    if isinstance(column, models.FloatField | models.DecimalField):
        return serializers.FloatField(**cast(dict[str, Any], setting_ranges.bounds(name)), **common)
    return serializers.CharField(max_length=setting_ranges.max_chars(name), allow_blank=column.blank, **common)


def _settings_serializer() -> type[serializers.Serializer]:
    return type(
        "StudySettingsSerializer",
        (serializers.Serializer,),
        {
            "__doc__": "A study's settings by name, as the settings page edits them.",
            "__module__": __name__,
            **{name: _setting_field(name) for name in settings_names()},
        },
    )


StudySettingsSerializer = _settings_serializer()


def _form_field(field: forms.Field) -> serializers.Field:
    """A page form's field as the API's schema types it (its JSON type, bounds and choices)."""
    common: dict[str, Any] = {"required": field.required, "help_text": str(field.help_text or "") or None}
    if isinstance(field, forms.BooleanField):
        return serializers.BooleanField(required=False, help_text=common["help_text"])
    if isinstance(field, forms.TypedChoiceField | forms.ChoiceField):
        choices = [value for value, _ in cast(list, field.choices) if value != ""]
        return serializers.ChoiceField(choices=choices, allow_blank=not field.required, **common)
    bounds: dict[str, Any] = {}
    for validator in field.validators:
        if isinstance(validator, validators.MinValueValidator | validators.MaxValueValidator):
            key = "min_value" if isinstance(validator, validators.MinValueValidator) else "max_value"
            bounds[key] = validator.limit_value
    if isinstance(field, forms.FloatField | forms.DecimalField):  # before IntegerField: Django's FloatField is one
        return serializers.FloatField(allow_null=not field.required, **bounds, **common)
    if isinstance(field, forms.IntegerField):
        return serializers.IntegerField(allow_null=not field.required, **bounds, **common)
    length: dict[str, Any] = {"max_length": field.max_length} if isinstance(field, forms.CharField) else {}
    return serializers.CharField(allow_blank=not field.required, allow_null=True, **length, **common)


def _form_serializer(name: str, form: forms.BaseForm) -> type[serializers.Serializer]:
    return type(
        name, (serializers.Serializer,), {"__module__": __name__, **{n: _form_field(f) for n, f in form.fields.items()}}
    )


JudgeCreateSerializer = _form_serializer("JudgeCreate", JudgeForm())
SystemCreateSerializer = _form_serializer("SystemCreate", SystemEndpointForm())


class EndpointRunSerializer(serializers.Serializer):
    """A judge or a generated system, and its run."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    model = serializers.CharField()
    base_url = serializers.CharField()
    run = serializers.ChoiceField(choices=["none", *Job.Status.values], help_text="Its latest run's state.")
    message = serializers.CharField(allow_blank=True)


def _endpoint_row(run: EndpointRun, name: str) -> dict:
    """A judge's or a generated system's row: what it asks and its latest run."""
    endpoint, job = run.endpoint, run.current_job()
    return {
        "id": endpoint.pk,
        "name": name,
        "model": endpoint.model,
        "base_url": endpoint.base_url,
        "run": job.status if job is not None else "none",
        "message": job.message if job is not None else "",
    }


class CrowdLinkSerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    platform = serializers.ChoiceField(choices=ExternalLink.Platform.values)
    site_study_id = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=100, help_text="Prolific: its study's id."
    )
    url = serializers.CharField(read_only=True, help_text="The URL to paste on the site.")


class OpenLinkSerializer(serializers.Serializer):
    enabled = serializers.BooleanField()
    url = serializers.CharField(read_only=True, allow_null=True, help_text="The open link, while it is open.")
    stopped = serializers.IntegerField(read_only=True, help_text="Raters who joined through it and were stopped.")


class RaterLinkSerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    name = serializers.CharField(max_length=200)
    url = serializers.CharField(read_only=True, help_text="The rater's personal link, to send them.")


class StudyViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = StudySerializer
    lookup_value_regex = "[0-9]+"
    parser_classes = [JSONParser, MultiPartParser, FormParser]

    def study(self, need: str) -> Study:
        """The study of the URL (404 outside its team), when the caller's role allows ``need`` (403 otherwise)."""
        study = self.get_object()
        access.check_may(cast(User, self.request.user), study, need)  # IsAuthenticated: never anonymous
        return study

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

    @extend_schema(methods=["GET"], responses=RankingSerializer(many=True))
    @extend_schema(
        methods=["POST"],
        request={"multipart/form-data": RankingsFileSerializer},
        responses={
            201: OpenApiResponse(OpenApiTypes.OBJECT, "{created, skipped}: imported at once."),
            202: OpenApiResponse(OpenApiTypes.OBJECT, "{job: {id, status}}: a large file, imported by the worker."),
            400: OpenApiResponse(OpenApiTypes.OBJECT, "{file: [every problem, by line and field]}: nothing stored."),
        },
        description="GET: the study's rankings and best-worst answers, oldest first. POST (an editor's or the "
        "owner's role): import a rankings file, all or nothing, each answer stored with the pairwise judgments it "
        "implies (in the judgments, with its id in their `ranking` field); answers already present are skipped.",
    )
    @action(detail=True, methods=["get", "post"], parser_classes=[MultiPartParser, FormParser])
    def rankings(self, request, pk=None):
        if request.method == "GET":
            study = self.get_object()
            ids = self.paginate_queryset(exports.ranking_ids(study))
            lines = list(exports.ranking_lines(study, ids or []))
            return self.get_paginated_response(RankingSerializer(lines, many=True).data)
        study = self.study(access.CHANGE)
        given = RankingsFileSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        upload = given.validated_data["file"]
        try:
            check_size(upload.size, settings.SEPLAB_MAX_IMPORT_BYTES)
            summary, job = rankings.do_start_rankings_import(study, upload.read(), upload.name)
        except FormatError as exc:
            raise ValidationError({"file": [str(p) for p in exc.problems]}) from None
        except ServiceError as exc:  # as many imports queued as one researcher may have (jobs.JobLimit)
            raise ValidationError({"non_field_errors": [str(exc)]}) from None
        if job is not None:
            team.do_audit(study, request.user, "rankings_import", f"started importing {job.total:,} rankings")
            return Response({"job": {"id": job.pk, "status": job.status}}, status=status.HTTP_202_ACCEPTED)
        if summary is None:  # a file gives a summary or a job, never neither
            raise ServiceError("the import gave neither a summary nor a job")
        team.do_audit(study, request.user, "rankings_import", f"imported {summary.created:,} rankings")
        return Response({"created": summary.created, "skipped": summary.skipped}, status=status.HTTP_201_CREATED)

    @extend_schema(
        request={"multipart/form-data": StudyCreateSerializer},
        responses={201: StudyCreatedSerializer},
        description="Create a study of your own from a study file. The file is checked whole first: every problem "
        "is listed (by line) under `file`, and nothing is created. A large file is imported by the worker: the "
        "study's `status` is `importing` and `job` is its import until it is done.",
    )
    def create(self, request, *args, **kwargs):
        given = StudyCreateSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        upload = given.validated_data["file"]
        try:
            check_size(upload.size, settings.SEPLAB_MAX_IMPORT_BYTES)
            study, job = creation.do_start_study_import(
                request.user,
                given.validated_data["name"],
                upload.read(),
                upload.name,
                given.validated_data["description"],
            )
        except FormatError as exc:
            errors: dict[str, list[str]] = {}
            for problem in exc.problems:
                field = "name" if problem.field == "name" else "file"
                errors.setdefault(field, []).append(str(problem))
            raise ValidationError(errors) from None
        except ServiceError as exc:  # as many imports queued as one researcher may have (jobs.JobLimit)
            raise ValidationError({"non_field_errors": [str(exc)]}) from None
        body = {
            "id": study.pk,
            "name": study.name,
            "status": Study.objects.values_list("status", flat=True).get(pk=study.pk),
            "job": None if job is None else {"id": job.pk, "status": job.status},
            "warnings": [str(w) for w in study.import_warnings],
        }
        return Response(body, status=status.HTTP_201_CREATED, headers={"Location": f"/api/studies/{study.pk}/"})

    @extend_schema(
        methods=["GET"],
        responses={200: StudySettingsSerializer},
        description="Every setting the settings page edits, by name.",
    )
    @extend_schema(
        methods=["PATCH"],
        request=StudySettingsSerializer,
        responses={
            200: StudySettingsSerializer,
            400: OpenApiResponse(OpenApiTypes.OBJECT, "{setting: [what is wrong]}."),
        },
        description="Change settings by name (an editor's or the owner's role). All or nothing: every refused "
        "setting is named, and nothing changes. The plan and what an answer is freeze once raters start.",
    )
    @action(detail=True, methods=["get", "patch"], url_path="settings", parser_classes=[JSONParser])
    def study_settings(self, request, pk=None):
        if request.method == "GET":
            return Response(settings_as_json(self.study(access.VIEW)))
        study = self.study(access.CHANGE)
        started = study.has_started()
        try:
            form = settings_form_from_json(study, request.data, frozen=started)
            changes = {f: form.cleaned_data[f] for f in form.setting_names()}
            study.refresh_from_db()  # the ModelForm already wrote the values onto the instance
            with transaction.atomic():
                lifecycle.do_update_settings(study, changes, form.explicit(), background=True, by=request.user)
        except FieldErrors as exc:
            raise ValidationError(exc.errors) from None
        except ServiceError as exc:  # a setting's range, or the plan frozen once raters started
            raise ValidationError({"non_field_errors": [str(exc)]}) from None
        return Response(settings_as_json(study))

    @extend_schema(methods=["GET"], responses=MemberSerializer(many=True), description="The study's team.")
    @extend_schema(
        methods=["POST"],
        request=MemberSerializer,
        responses={201: MemberSerializer},
        description="Add an account to the study's team as a viewer, reviewer or editor (the owner's role).",
    )
    @action(detail=True, methods=["get", "post"], parser_classes=[JSONParser])
    def members(self, request, pk=None):
        if request.method == "GET":
            study = self.study(access.VIEW)
            page = self.paginate_queryset(study.memberships.select_related("user"))
            return self.get_paginated_response(MemberSerializer(page, many=True).data)
        study = self.study(access.MANAGE)
        data = request.data if isinstance(request.data, dict) else {}
        try:
            membership = team.do_add_member(study, data.get("username"), data.get("role"), request.user)
        except FieldErrors as exc:
            raise ValidationError(exc.errors) from None
        return Response(MemberSerializer(membership).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        methods=["PATCH"],
        request=MemberRoleSerializer,
        responses={200: MemberSerializer},
        description="Change a member's role (the owner's role).",
    )
    @extend_schema(methods=["DELETE"], responses={204: None}, description="Remove a member (the owner's role).")
    @action(
        detail=True,
        methods=["patch", "delete"],
        url_path=r"members/(?P<member_id>[0-9]+)",
        parser_classes=[JSONParser],
    )
    def member(self, request, pk=None, member_id=None):
        _, membership = access.access_member(request, int(pk), int(member_id))
        if request.method == "DELETE":
            team.do_remove_member(membership, request.user)
            return Response(status=status.HTTP_204_NO_CONTENT)
        given = MemberRoleSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        team.do_set_role(membership, given.validated_data["role"], request.user)
        return Response(MemberSerializer(membership).data)

    @extend_schema(responses=AuditEntrySerializer(many=True))
    @action(detail=True)
    def audit(self, request, pk=None):
        """Who changed what in the study, newest first: settings, rulings, exclusions, status and team."""
        study = self.study(access.VIEW)
        page = self.paginate_queryset(study.audit_entries.all())
        return self.get_paginated_response(AuditEntrySerializer(page, many=True).data)

    # --- judges and generated systems, and their runs ------------------------------------------------------------

    def _endpoint_create(self, request, form_class, create, kind: str):
        study = self.study(access.CHANGE)
        try:
            form = form_from_json(lambda data=None: form_class(data), request.data)
            fields = (
                form.endpoint_fields()
                if kind == GenerationRun.kind
                else {n: form.cleaned_data[n] for n in JudgeForm.Meta.fields}
            )
            endpoint = create(study, form.cleaned_data["name"], **fields)
        except FieldErrors as exc:
            raise ValidationError(exc.errors) from None
        except EndpointError as exc:
            raise ValidationError({"non_field_errors": [str(exc)]}) from None
        team.do_audit(study, request.user, f"{kind}_added", f"added {form.cleaned_data['name']} ({endpoint.model})")
        return study, endpoint

    @extend_schema(methods=["GET"], responses=EndpointRunSerializer(many=True), description="The study's LLM judges.")
    @extend_schema(
        methods=["POST"],
        request=JudgeCreateSerializer,
        responses={201: EndpointRunSerializer},
        description="Add an LLM judge (the Judges page's form, by field name); start its run with `.../start/`. The "
        "API key, if sent, is stored encrypted and never shown again.",
    )
    @action(detail=True, methods=["get", "post"], parser_classes=[JSONParser])
    def judges(self, request, pk=None):
        if request.method == "GET":
            study = self.study(access.VIEW)
            judges = self.paginate_queryset(study.judges.select_related("rater", "study").order_by("pk"))
            rows = [_endpoint_row(JudgeRun(j), j.rater.external_id) for j in judges]
            return self.get_paginated_response(EndpointRunSerializer(rows, many=True).data)
        study, judge = self._endpoint_create(request, JudgeForm, judge_runner.do_create_judge, JudgeRun.kind)
        judge.study = study
        return Response(_endpoint_row(JudgeRun(judge), judge.rater.external_id), status=status.HTTP_201_CREATED)

    @extend_schema(
        methods=["GET"], responses=EndpointRunSerializer(many=True), description="The systems generated from endpoints."
    )
    @extend_schema(
        methods=["POST"],
        request=SystemCreateSerializer,
        responses={201: EndpointRunSerializer},
        description="Add a system whose outputs an endpoint generates (the Systems page's form, by field name); start "
        "its run with `.../start/`. Refused once raters have started.",
    )
    @action(detail=True, methods=["get", "post"], url_path="systems", parser_classes=[JSONParser])
    def generated_systems(self, request, pk=None):
        if request.method == "GET":
            study = self.study(access.VIEW)
            endpoints = SystemEndpoint.objects.filter(system__study=study).select_related("system").order_by("pk")
            rows = [_endpoint_row(GenerationRun(e), e.system.name) for e in self.paginate_queryset(endpoints)]
            return self.get_paginated_response(EndpointRunSerializer(rows, many=True).data)
        study, endpoint = self._endpoint_create(
            request, SystemEndpointForm, generating_runner.do_add_endpoint_system, GenerationRun.kind
        )
        return Response(_endpoint_row(GenerationRun(endpoint), endpoint.system.name), status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[
            OpenApiParameter("kind", OpenApiTypes.STR, OpenApiParameter.PATH, enum=["judges", "systems"]),
            OpenApiParameter("endpoint_id", OpenApiTypes.INT, OpenApiParameter.PATH),
            OpenApiParameter("verb", OpenApiTypes.STR, OpenApiParameter.PATH, enum=["start", "stop"]),
        ],
        operation_id="studies_run",
        request=None,
        responses={202: EndpointRunSerializer},
        description="Start (or resume) a judge's or a generated system's run, or stop it. The worker runs it; poll "
        "the list for its state.",
    )
    @action(
        detail=True,
        methods=["post"],
        url_path=r"(?P<kind>judges|systems)/(?P<endpoint_id>[0-9]+)/(?P<verb>start|stop)",
    )
    def run(self, request, pk=None, kind=None, endpoint_id=None, verb=None):
        page = RUN_KINDS[JudgeRun.kind if kind == "judges" else GenerationRun.kind]
        endpoint = page.access(request, int(pk), int(endpoint_id))
        run = page.run(endpoint)
        try:
            if verb == "start":
                run.do_start()
            else:
                run.do_stop()
        except (EndpointError, ServiceError) as exc:
            raise ValidationError({"non_field_errors": [str(exc)]}) from None
        name = endpoint.rater.external_id if isinstance(endpoint, Judge) else endpoint.system.name
        team.do_audit(run.study, request.user, f"run_{verb}", f"{verb.replace('stop', 'stopp')}ed the run of {name}")
        return Response(_endpoint_row(run, name), status=status.HTTP_202_ACCEPTED)

    # --- raters' links (the review queue's rulings: analytics/review_views.py) ---------------------------------

    @extend_schema(
        request=RaterLinkSerializer,
        responses={201: RaterLinkSerializer},
        description="A personal rating link for a rater, by name (unique in the study).",
    )
    @action(detail=True, methods=["post"], parser_classes=[JSONParser])
    def raters(self, request, pk=None):
        study = self.study(access.CHANGE)
        given = RaterLinkSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            rater = enrolment.do_create_rater_link(study, given.validated_data["name"])
        except ServiceError as exc:
            raise ValidationError({"name": [str(exc)]}) from None
        url = enrolment.public_base_url(study, request) + rater.link_path()
        return Response({"id": rater.pk, "name": rater.external_id, "url": url}, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=CrowdLinkSerializer,
        responses={201: CrowdLinkSerializer},
        description="A crowd link (MTurk-style, Prolific or generic), as on the crowd page: the URL to paste on the "
        "site.",
    )
    @action(detail=True, methods=["post"], url_path="crowd-links", parser_classes=[JSONParser])
    def crowd_links(self, request, pk=None):
        study = self.study(access.CHANGE)
        given = CrowdLinkSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        try:
            link = sites.do_create_external_link(study, data["platform"], data["site_study_id"])
        except ServiceError as exc:
            raise ValidationError({"site_study_id": [str(exc)]}) from None
        team.do_audit(study, request.user, "crowd_link_added", f"added a {link.platform} link")
        url = sites.link_url(link, enrolment.public_base_url(study, request))
        body = {"id": link.pk, "platform": link.platform, "site_study_id": link.site_study_id, "url": url}
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=OpenLinkSerializer,
        responses={200: OpenLinkSerializer},
        description="Open or close the study's open link for anonymous raters (closing stops those who joined "
        "through it at once).",
    )
    @action(detail=True, methods=["post"], url_path="open-link", parser_classes=[JSONParser])
    def open_link(self, request, pk=None):
        study = self.study(access.CHANGE)
        given = OpenLinkSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        enabled = given.validated_data["enabled"]
        stopped = enrolment.do_set_open_link(study, enabled)
        team.do_audit(study, request.user, "open_link", f"{'opened' if enabled else 'closed'} the open link")
        url = enrolment.public_base_url(study, request) + study.open_link_path() if enabled else None
        return Response({"enabled": enabled, "url": url, "stopped": stopped})
