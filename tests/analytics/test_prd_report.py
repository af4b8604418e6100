"""The PRD judges in the product: `load_prd` builds the study from the real files and the report checks every
judge against the humans with the figures the data's README and the issue state."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from analytics import services
from annotation.models import Study
from tests.analytics.conftest import PRD
from tests.conftest import refresh_reports


@pytest.fixture
def prd_study(researcher):
    if not (PRD / "ratings-gpt4").exists():
        pytest.skip(f"{PRD} has no judge verdicts: the real data lives in ../shared/data (see its README)")
    out = StringIO()
    call_command("load_prd", "--data", str(PRD), "--owner", researcher.username, stdout=out)
    assert "80 questions, 5 systems, 9760 judgments (1760 human votes" in out.getvalue()
    return Study.objects.get(name="prd-vicuna80")


def test_the_report_checks_each_prd_judge_against_the_humans(prd_study):
    judges = services.study_report(prd_study)["indeterminacy"]["judges"]
    # agreement of each of a judge's 1,600 verdicts with the human majority of its pair, a split counted as a
    # tie (shared/data/README.md: 0.643, 0.627, 0.600, 0.549, 0.500)
    expected = {"gpt4": 0.643, "gpt35": 0.627, "claude": 0.600, "bard": 0.549, "vicuna-13b": 0.500}
    for name, value in expected.items():
        assert judges[name]["verdicts"] == 1600 and judges[name]["units"] == 800
        assert judges[name]["agreement"] == pytest.approx(value, abs=5e-4)
    # the issue: gpt4 picks the answer shown first 53 % of the time, claude 33 %
    assert judges["gpt4"]["first_share"] == pytest.approx(0.53, abs=0.005)
    assert judges["claude"]["first_share"] == pytest.approx(0.33, abs=0.005)


def test_the_prd_judges_are_on_the_report_page(researcher_client, prd_study):
    researcher_client.get(reverse("report", args=[prd_study.pk]))
    refresh_reports()
    page = researcher_client.get(reverse("report", args=[prd_study.pk])).content.decode()
    assert "Judges against humans" in page and "<th>agreement</th>" in page and "<th>first_share</th>" in page
    assert "Shared pairs: <strong>bard</strong> 800" in page
