"""The write API beyond the study's settings and team: judges and generated systems added, their runs started and
stopped (a real run against the local OpenAI-compatible server), raters' links created and the review queue ruled on --
each by field name, each in the caller's role."""

from __future__ import annotations

from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from analytics.models import Adjudication
from annotation.jobs import run_job
from annotation.judges import prompts
from annotation.models import AuditEntry, Job, Judge, JudgeCall, SystemEndpoint
from annotation.rating import allocation
from annotation.studies import creation, team
from tests.annotation.test_judge_runner import KEY, study_with
from tests.conftest import answer_all
from tests.judge_server import server_fixture

server = server_fixture(api_key=KEY)


def api_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def judge_body(server, **changes) -> dict:
    return {
        "name": "gpt-local",
        "base_url": server.base_url,
        "model": "m",
        "api_key": KEY,
        "prompt_template": prompts.DEFAULT_TEMPLATE,
        "max_tokens": 100,
        "request_budget": 100,
        "timeout_seconds": 5,
        **changes,
    }


def test_a_judge_is_added_started_run_and_stopped_through_the_api(researcher, server):
    study = study_with(researcher, ["Q0?", "Q1?"])
    api = api_for(researcher)
    refused = api.post(
        f"/api/studies/{study.pk}/judges/",
        judge_body(server, temperature=3, prompt_template="Compare {first} and {second}", max_tokens="100"),
        format="json",
    )
    assert refused.status_code == 400
    assert set(refused.json()) == {"temperature", "prompt_template", "max_tokens"}, refused.json()
    assert refused.json()["max_tokens"] == ["Must be a whole number."]
    assert not Judge.objects.exists()
    created = api.post(f"/api/studies/{study.pk}/judges/", judge_body(server), format="json")
    assert created.status_code == 201, created.content
    row = created.json()
    assert row["name"] == "gpt-local" and row["run"] == "none" and KEY not in created.content.decode()
    judge = Judge.objects.get()
    assert judge.temperature == Judge._meta.get_field("temperature").default  # the form's default where not sent
    started = api.post(f"/api/studies/{study.pk}/judges/{judge.pk}/start/")
    assert started.status_code == 202 and started.json()["run"] == "queued"
    run_job.call(Job.objects.get(kind="judge").pk)
    listed = api.get(f"/api/studies/{study.pk}/judges/").json()["results"]
    assert [(r["name"], r["run"]) for r in listed] == [("gpt-local", "done")]
    assert JudgeCall.objects.filter(judge=judge).exists()
    assert api.post(f"/api/studies/{study.pk}/judges/{judge.pk}/stop/").status_code == 202
    assert list(AuditEntry.objects.filter(study=study).values_list("action", flat=True))[:3] == [
        "run_stop",
        "run_start",
        "judge_added",
    ]


def test_a_generated_system_is_added_through_the_api_and_refused_by_field(researcher, server):
    inputs = b'{"id": "i0", "input": "Write a haiku."}\n{"id": "i1", "input": "Name a colour."}\n'
    study = creation.do_create_study(researcher, "gen", inputs, "inputs.jsonl")
    api = api_for(researcher)
    body = {
        "name": "local-m",
        "base_url": server.base_url,
        "model": "m",
        "api_key": KEY,
        "samples": 1,
        "max_tokens": 50,
    }
    assert api.post(f"/api/studies/{study.pk}/systems/", {**body, "samples": "two"}, format="json").json() == {
        "samples": ["Must be a whole number."]
    }
    created = api.post(f"/api/studies/{study.pk}/systems/", body, format="json")
    assert created.status_code == 201 and created.json()["name"] == "local-m"
    endpoint = SystemEndpoint.objects.get()
    assert api.post(f"/api/studies/{study.pk}/systems/{endpoint.pk}/start/").status_code == 202


def test_rater_links_and_rulings_through_the_api_in_each_role(study, researcher, other_researcher, rater):
    answer_all(allocation.do_start_assignment(rater))
    pair = study.judgments.values_list("pair_id", flat=True).first()
    owner = api_for(researcher)
    link = owner.post(f"/api/studies/{study.pk}/raters/", {"name": "rater-7"}, format="json")
    assert link.status_code == 201 and link.json()["name"] == "rater-7" and "/r/" in link.json()["url"]
    again = owner.post(f"/api/studies/{study.pk}/raters/", {"name": "rater-7"}, format="json")
    assert again.status_code == 400 and "already exists" in again.json()["name"][0]
    team.do_add_member(study, other_researcher.username, "viewer", researcher)
    viewer = api_for(other_researcher)
    assert viewer.post(f"/api/studies/{study.pk}/raters/", {"name": "x"}, format="json").status_code == 403
    assert (
        viewer.post(f"/api/studies/{study.pk}/rulings/", {"pair": pair, "ruling": "a"}, format="json").status_code
        == 403
    )
    team.do_set_role(study.memberships.get(), "reviewer", researcher)
    ruled = viewer.post(
        f"/api/studies/{study.pk}/rulings/", {"pair": pair, "ruling": "tie", "note": " both fine "}, format="json"
    )
    assert ruled.status_code == 200 and ruled.json() == {"pair": pair, "ruling": "tie", "note": "both fine"}
    assert Adjudication.objects.get(pair_id=pair).decided_by == other_researcher
    wrong = viewer.post(f"/api/studies/{study.pk}/rulings/", {"pair": 999999, "ruling": "maybe"}, format="json")
    assert wrong.status_code == 400 and set(wrong.json()) == {"ruling"}
    unknown = viewer.post(f"/api/studies/{study.pk}/rulings/", {"pair": 999999, "ruling": "a"}, format="json")
    assert unknown.status_code == 400 and "no verdicts" in unknown.json()["pair"][0]
    assert viewer.post(f"/api/studies/{study.pk}/judges/", {"name": "j"}, format="json").status_code == 403


def test_crowd_links_and_the_open_link_through_the_api(study, researcher, other_researcher):
    owner = api_for(researcher)
    made = owner.post(
        f"/api/studies/{study.pk}/crowd-links/", {"platform": "prolific", "site_study_id": "PS1"}, format="json"
    )
    assert made.status_code == 201 and made.json()["site_study_id"] == "PS1"
    assert "/x/" in made.json()["url"] and "PROLIFIC_PID=" in made.json()["url"]
    wrong = owner.post(f"/api/studies/{study.pk}/crowd-links/", {"platform": "fiverr"}, format="json")
    assert wrong.status_code == 400 and list(wrong.json()) == ["platform"]
    opened = owner.post(f"/api/studies/{study.pk}/open-link/", {"enabled": True}, format="json")
    assert opened.status_code == 200 and opened.json()["url"].endswith(study.open_link_path())
    study.refresh_from_db()
    assert study.open_link_enabled
    closed = owner.post(f"/api/studies/{study.pk}/open-link/", {"enabled": False}, format="json").json()
    assert closed == {"enabled": False, "url": None, "stopped": 0}
    team.do_add_member(study, other_researcher.username, "viewer", researcher)
    viewer = api_for(other_researcher)
    assert viewer.post(f"/api/studies/{study.pk}/open-link/", {"enabled": True}, format="json").status_code == 403
    assert (
        viewer.post(f"/api/studies/{study.pk}/crowd-links/", {"platform": "generic"}, format="json").status_code == 403
    )
    actions = list(AuditEntry.objects.filter(study=study, user=researcher).values_list("action", flat=True))
    assert actions == ["member_added", "open_link", "open_link", "crowd_link_added"]
