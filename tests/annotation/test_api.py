"""The researcher API: token auth, own studies only, items, judgments, exports, OpenAPI schema."""

from __future__ import annotations

import json

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.exchange import exports
from annotation.rating import allocation
from annotation.studies import creation
from tests.conftest import answer_all, study_jsonl


@pytest.fixture
def api(researcher):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=researcher).key}")
    return client


def test_the_api_needs_a_token(db):
    assert APIClient().get("/api/studies/").status_code == 401
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Token nope")
    assert bad.get("/api/studies/").status_code == 401


def test_studies_lists_only_own_studies(api, study, other_researcher):
    creation.do_create_study(other_researcher, "bobs", study_jsonl(), "b.jsonl")
    data = api.get("/api/studies/").json()
    assert [s["name"] for s in data["results"]] == ["small"]
    assert data["results"][0]["systems"] == ["sys-a", "sys-b"] and data["results"][0]["n_items"] == 4


def test_another_researchers_study_is_404(api, other_researcher):
    theirs = creation.do_create_study(other_researcher, "bobs", study_jsonl(), "b.jsonl")
    assert api.get(f"/api/studies/{theirs.pk}/").status_code == 404
    assert api.get(f"/api/studies/{theirs.pk}/judgments/").status_code == 404


def test_items_come_with_their_generations(api, study):
    data = api.get(f"/api/studies/{study.pk}/items/").json()
    assert data["count"] == 4
    first = data["results"][0]
    assert first["id"] == "item-0" and len(first["generations"]) == 10  # 2 systems x K = 5
    assert first["generations"][0] == {"system": "sys-a", "sample_index": 0, "text": "sys-a output 0 for item 0."}


def test_judgments_are_listed_in_the_spec_format(api, study, rater):
    answer_all(allocation.do_start_assignment(rater), choice="first")
    data = api.get(f"/api/studies/{study.pk}/judgments/").json()
    assert data["count"] == 5
    line = data["results"][0]
    assert line["rater"] == "rater-1" and line["rater_kind"] == "human"
    assert line["choice"] == line["shown_first"] and line["system_a"] == "sys-a"


def test_judgments_export_in_both_formats(api, study, rater):
    answer_all(allocation.do_start_assignment(rater))
    jsonl = api.get(f"/api/studies/{study.pk}/judgments/export/")
    lines = [json.loads(x) for x in b"".join(jsonl.streaming_content).decode().splitlines()]
    assert len(lines) == 5
    csv = api.get(f"/api/studies/{study.pk}/judgments/export/", {"as": "csv"})
    assert len(b"".join(csv.streaming_content).decode().splitlines()) == 6
    assert api.get(f"/api/studies/{study.pk}/judgments/export/", {"as": "xml"}).status_code == 400


def test_the_openapi_schema_describes_the_endpoints(api):
    response = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = json.loads(response.content)
    assert schema["info"]["title"] == "SepLab API"
    for path in (
        "/api/studies/",
        "/api/studies/{id}/",
        "/api/studies/{id}/items/",
        "/api/studies/{id}/judgments/",
        "/api/studies/{id}/judgments/export/",
    ):
        assert path in schema["paths"], path


def test_the_api_serializer_the_export_and_the_import_share_one_judgment_schema(api, study, rater):
    from annotation.exchange import judgment_files
    from annotation.views.api import JudgmentSerializer

    assert list(JudgmentSerializer().fields) == list(judgment_files.JUDGMENT_FIELDS)
    assert judgment_files.JUDGMENT_CSV_COLUMNS[:-1] == judgment_files.JUDGMENT_FIELDS
    answer_all(allocation.do_start_assignment(rater))
    lines = list(exports.judgment_lines(study))
    exported = {f.name for f in judgment_files.JUDGMENT_SCHEMA if f.exported}
    assert lines and all(exported <= set(line) <= set(judgment_files.JUDGMENT_FIELDS) for line in lines)
    assert all(JudgmentSerializer(data=line).is_valid() for line in lines)
    api_lines = api.get(f"/api/studies/{study.pk}/judgments/").json()["results"]
    assert [line["id"] for line in api_lines] == [line["id"] for line in lines]
