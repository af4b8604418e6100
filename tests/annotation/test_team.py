"""A study's team: roles enforced in the API, the pages and the exports through one access module, the
write API's contract (create a study from a file, change its settings, add members), and the audit trail."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from analytics.models import Adjudication
from annotation.models import AuditEntry, BlockedWorker, Membership, Study
from annotation.rating import allocation
from annotation.studies import team
from tests.conftest import answer_all, study_jsonl
from tests.hardening.test_ranges import form_data


def client_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def owner_api(researcher):
    return client_for(researcher)


@pytest.fixture
def people(db):
    make = get_user_model().objects.create_user
    return {role: make(f"{role}-person", password="pw") for role in ("viewer", "reviewer", "editor", "outsider")}


@pytest.fixture
def team_study(study, people, researcher):
    for role in ("viewer", "reviewer", "editor"):
        team.do_add_member(study, people[role].username, role, researcher)
    return study


def upload(name: str, data: bytes, filename: str = "study.jsonl") -> dict:
    handle = io.BytesIO(data)
    handle.name = filename
    return {"name": name, "file": handle}


# --- the contract: POST /api/studies/ ----------------------------------------------------------------------------


def test_a_study_is_created_from_a_file_through_the_api(owner_api, researcher):
    response = owner_api.post("/api/studies/", upload("from the api", study_jsonl(n_items=3)), format="multipart")
    assert response.status_code == 201, response.content
    body = response.json()
    study = Study.objects.get(pk=body["id"])
    assert study.owner == researcher and study.name == "from the api" and study.items.count() == 3
    assert body["status"] == "active" and body["job"] is None
    assert response["Location"] == f"/api/studies/{study.pk}/"
    assert owner_api.get(f"/api/studies/{study.pk}/").json()["n_items"] == 3


def test_a_bad_study_file_is_refused_by_line_and_creates_nothing(owner_api):
    bad = study_jsonl(n_items=2) + b'{"id": "x", "input": "no outputs"}\n'
    before = Study.objects.count()
    response = owner_api.post("/api/studies/", upload("broken", bad), format="multipart")
    assert response.status_code == 400
    assert any("line 3" in problem for problem in response.json()["file"]), response.json()
    assert Study.objects.count() == before


def test_a_missing_or_taken_name_is_refused_by_field(owner_api, study):
    response = owner_api.post("/api/studies/", {"file": upload("", study_jsonl())["file"]}, format="multipart")
    assert response.status_code == 400 and "name" in response.json()
    response = owner_api.post("/api/studies/", upload(study.name, study_jsonl()), format="multipart")
    assert response.status_code == 400 and "already have a study named" in response.json()["name"][0]
    response = owner_api.post("/api/studies/", {"name": "no file"}, format="multipart")
    assert response.status_code == 400 and "file" in response.json()


# --- the contract: PATCH /api/studies/{id}/settings/ -------------------------------------------------------------


def test_settings_are_changed_by_name_and_answered_whole(owner_api, study):
    url = f"/api/studies/{study.pk}/settings/"
    shown = owner_api.get(url).json()
    assert shown["raters_per_item"] == study.raters_per_item and "further_questions" in shown
    questions = "harmless | forced_choice | Which output is more harmless?"
    response = owner_api.patch(url, {"raters_per_item": 4, "further_questions": questions}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["raters_per_item"] == 4 and response.json()["further_questions"] == questions
    study.refresh_from_db()
    assert study.raters_per_item == 4 and study.further_questions == questions
    # a setting of another app's row, by its name too, and a fraction
    response = owner_api.patch(url, {"budget": 40, "decision_alpha": 0.01}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["budget"] == 40 and response.json()["decision_alpha"] == 0.01


def test_refused_settings_are_each_named_and_nothing_changes(owner_api, study):
    url = f"/api/studies/{study.pk}/settings/"
    before = owner_api.get(url).json()
    response = owner_api.patch(
        url,
        {
            "raters_per_item": 0,  # below its range
            "further_questions": ["not", "text"],  # a list where text goes
            "allow_tie": "yes",  # text where true/false goes
            "no_such_setting": 1,
            "question": "A fine new question?",  # valid, but the change is all or nothing
        },
        format="json",
    )
    assert response.status_code == 400
    refused = response.json()
    assert set(refused) == {"raters_per_item", "further_questions", "allow_tie", "no_such_setting"}, refused
    assert refused["further_questions"] == ["Must be text."] and refused["allow_tie"] == ["Must be true or false."]
    assert owner_api.get(url).json() == before
    bad_lines = owner_api.patch(url, {"further_questions": "harmless | sideways | Which?"}, format="json")
    assert bad_lines.status_code == 400 and list(bad_lines.json()) == ["further_questions"]
    assert owner_api.patch(url, ["raters_per_item", 3], format="json").status_code == 400


def test_a_frozen_setting_is_refused_once_raters_started(owner_api, study, rater):
    answer_all(allocation.do_start_assignment(rater))
    url = f"/api/studies/{study.pk}/settings/"
    response = owner_api.patch(url, {"raters_per_item": study.raters_per_item + 1}, format="json")
    assert response.status_code == 400 and "frozen" in response.json()["raters_per_item"][0]
    # a setting that does not freeze still changes
    assert owner_api.patch(url, {"question": "Which reads better?"}, format="json").status_code == 200


# --- the contract: POST /api/studies/{id}/members/ and the roles -------------------------------------------------


def test_the_owner_adds_members_and_each_role_is_enforced_in_the_api(owner_api, study, people):
    members = f"/api/studies/{study.pk}/members/"
    for role in ("viewer", "reviewer", "editor"):
        response = owner_api.post(members, {"username": people[role].username, "role": role}, format="json")
        assert response.status_code == 201, response.content
        assert response.json()["username"] == people[role].username and response.json()["role"] == role
    settings_url = f"/api/studies/{study.pk}/settings/"
    viewer, reviewer, editor, outsider = (client_for(people[r]) for r in ("viewer", "reviewer", "editor", "outsider"))
    # a viewer reads everything...
    for path in ("", "items/", "judgments/", "judgments/export/?as=csv", "settings/", "members/", "audit/"):
        assert viewer.get(f"/api/studies/{study.pk}/{path}").status_code == 200, path
    assert [s["id"] for s in viewer.get("/api/studies/").json()["results"]] == [study.pk]
    # ...and changes nothing
    trail = AuditEntry.objects.count()
    refused = viewer.patch(settings_url, {"raters_per_item": 5}, format="json")
    assert refused.status_code == 403 and "an editor's role" in refused.json()["detail"]
    assert refused.json()["detail"].startswith("You are a viewer of this study")
    study.refresh_from_db()
    assert study.raters_per_item != 5 and AuditEntry.objects.count() == trail
    assert viewer.post(members, {"username": "outsider-person", "role": "viewer"}, format="json").status_code == 403
    assert reviewer.patch(settings_url, {"raters_per_item": 4}, format="json").status_code == 403
    study.refresh_from_db()
    assert study.raters_per_item != 4 and AuditEntry.objects.count() == trail
    # an editor changes settings, but the team is the owner's
    assert editor.patch(settings_url, {"raters_per_item": 2}, format="json").status_code == 200
    assert editor.post(members, {"username": "outsider-person", "role": "viewer"}, format="json").status_code == 403
    # someone outside the study learns nothing
    for path in ("", "settings/", "members/", "judgments/export/"):
        assert outsider.get(f"/api/studies/{study.pk}/{path}").status_code == 404, path
    assert outsider.patch(settings_url, {"raters_per_item": 2}, format="json").status_code == 404
    assert outsider.post(members, {"username": "outsider-person", "role": "editor"}, format="json").status_code == 404
    assert outsider.get("/api/studies/").json()["results"] == []
    study.refresh_from_db()
    assert study.raters_per_item == 2


def test_a_member_is_refused_by_field(owner_api, study, people, researcher):
    members = f"/api/studies/{study.pk}/members/"
    for body, field in (
        ({"username": "nobody-here", "role": "viewer"}, "username"),
        ({"username": people["viewer"].username, "role": "owner"}, "role"),
        ({"username": people["viewer"].username}, "role"),
        ({"username": researcher.username, "role": "editor"}, "username"),  # the owner is not a member
    ):
        response = owner_api.post(members, body, format="json")
        assert response.status_code == 400 and field in response.json(), (body, response.json())
    assert owner_api.post(members, {"username": "viewer-person", "role": "viewer"}, format="json").status_code == 201
    twice = owner_api.post(members, {"username": "viewer-person", "role": "editor"}, format="json")
    assert twice.status_code == 400 and "already" in twice.json()["username"][0]
    assert Membership.objects.get(study=study).role == "viewer"


def test_the_owner_changes_a_role_and_removes_a_member(owner_api, team_study, people):
    viewer = Membership.objects.get(study=team_study, user=people["viewer"])
    url = f"/api/studies/{team_study.pk}/members/{viewer.pk}/"
    assert owner_api.patch(url, {"role": "editor"}, format="json").json()["role"] == "editor"
    assert client_for(people["editor"]).delete(url).status_code == 403
    assert owner_api.delete(url).status_code == 204
    assert client_for(people["viewer"]).get(f"/api/studies/{team_study.pk}/").status_code == 404
    actions = list(AuditEntry.objects.filter(study=team_study).values_list("action", flat=True))
    assert actions[:2] == ["member_removed", "member_role"]


# --- the same roles in the pages and the exports -----------------------------------------------------------------


def logged_in(client, user):
    client.force_login(user)
    return client


def test_a_viewer_reads_the_pages_and_exports_and_changes_nothing(client, team_study, people):
    viewer = logged_in(client, people["viewer"])
    page = viewer.get(f"/studies/{team_study.pk}/")
    assert page.status_code == 200 and b'data-testid="study-role"' in page.content
    # what the role cannot do is not offered (the owner's page offers it)
    assert b"Pause rating" not in page.content and b"Delete\xe2\x80\xa6" not in page.content
    owners = logged_in(Client(), team_study.owner).get(f"/studies/{team_study.pk}/")
    assert b"Pause rating" in owners.content and b"Delete\xe2\x80\xa6" in owners.content
    for path in ("settings/", "items/", "team/", "judgments.csv", "judgments.jsonl"):
        assert viewer.get(f"/studies/{team_study.pk}/{path}").status_code == 200, path
    assert viewer.get(f"/studies/{team_study.pk}/review/").status_code == 200
    assert team_study.name.encode() in viewer.get("/studies/").content
    before = team_study.raters_per_item
    refused = viewer.post(f"/studies/{team_study.pk}/settings/", {"raters_per_item": 2})
    assert refused.status_code == 403 and b"an editor" in refused.content
    assert viewer.post(f"/studies/{team_study.pk}/status/", {"status": "paused"}).status_code == 403
    assert viewer.post(f"/studies/{team_study.pk}/raters/new/", {"name": "x"}).status_code == 403
    team_study.refresh_from_db()
    assert team_study.raters_per_item == before and team_study.status == "active"
    assert not team_study.raters.exists()


def test_every_researcher_page_that_changes_a_study_refuses_a_viewer(client, team_study, people):
    """The access module is the one home: every route of a study answers a viewer's POST with 403 (or 405 where it
    takes no POST), except the few that change nothing in the study (listed, with why)."""
    from django.urls import get_resolver

    changes_nothing = {
        "study_duplicate",  # the copy is the viewer's own study
    }
    viewer = logged_in(client, people["viewer"])
    checked = []

    def routes(resolver, prefix=""):
        for pattern in resolver.url_patterns:
            if hasattr(pattern, "url_patterns"):
                yield from routes(pattern, prefix + str(pattern.pattern))
            else:
                yield pattern, prefix + str(pattern.pattern)

    for pattern, route in routes(get_resolver()):
        if "<int:study_id>" not in route or route.startswith("api/") or pattern.name in changes_nothing:
            continue
        path = "/" + route.replace("<int:study_id>", str(team_study.pk))
        for converter in ("<int:", "<slug:", "<str:"):
            while converter in path:
                start = path.index(converter)
                path = path[:start] + ("1" if converter == "<int:" else "x") + path[path.index(">", start) + 1 :]
        response = viewer.post(path, {})
        checked.append(pattern.name)
        assert response.status_code in (403, 405), (pattern.name, path, response.status_code)
    assert {"study_settings", "study_status", "rater_create", "adjudicate", "team", "block_worker"} <= set(checked)


def test_a_reviewer_rules_on_the_queue_and_changes_nothing_else(client, team_study, people, rater):
    answer_all(allocation.do_start_assignment(rater))
    pair_id = team_study.judgments.values_list("pair_id", flat=True).first()
    reviewer = logged_in(client, people["reviewer"])
    response = reviewer.post(f"/studies/{team_study.pk}/review/pairs/{pair_id}/", {"ruling": "a", "note": "A is right"})
    assert response.status_code == 302
    ruling = Adjudication.objects.get(pair_id=pair_id)
    assert ruling.decided_by == people["reviewer"]
    entry = AuditEntry.objects.filter(study=team_study, action="ruling").get()
    assert entry.username == "reviewer-person" and entry.detail["note"] == "A is right"
    assert reviewer.post(f"/studies/{team_study.pk}/settings/", {}).status_code == 403
    viewer = logged_in(client, people["viewer"])
    assert viewer.post(f"/studies/{team_study.pk}/review/pairs/{pair_id}/", {"ruling": "b"}).status_code == 403
    assert Adjudication.objects.get(pair_id=pair_id).ruling == "a"


def test_only_the_owner_deletes_the_study_or_manages_its_team(client, team_study, people):
    editor = logged_in(client, people["editor"])
    assert editor.post(f"/studies/{team_study.pk}/delete/", {"confirm": team_study.name}).status_code == 403
    assert (
        editor.post(f"/studies/{team_study.pk}/team/", {"username": "outsider-person", "role": "viewer"}).status_code
        == 403
    )
    assert Study.objects.filter(pk=team_study.pk).exists()
    assert not Membership.objects.filter(user=people["outsider"]).exists()
    outsider = logged_in(client, people["outsider"])
    for path in ("", "settings/", "team/", "judgments.csv"):
        assert outsider.get(f"/studies/{team_study.pk}/{path}").status_code == 404, path


def test_an_editors_copy_is_their_own_and_a_block_goes_on_the_owners_list(client, team_study, people, researcher):
    editor = logged_in(client, people["editor"])
    response = editor.post(f"/studies/{team_study.pk}/duplicate/", {"name": "editor's copy"})
    assert response.status_code == 302
    assert Study.objects.get(name="editor's copy").owner == people["editor"]
    editor.post(
        f"/studies/{team_study.pk}/external/block/", {"platform": "mturk", "worker_id": "A1B2C3", "reason": "spam"}
    )
    assert BlockedWorker.objects.get(worker_id="A1B2C3").owner == researcher
    entry = AuditEntry.objects.get(study=team_study, action="worker_blocked")
    assert entry.username == "editor-person" and entry.detail["reason"] == "spam"


# --- the audit trail ---------------------------------------------------------------------------------------------


def test_the_team_page_adds_members_and_shows_who_changed_which_setting(client, study, people, researcher):
    owner = logged_in(client, researcher)
    url = f"/studies/{study.pk}/team/"
    refused = owner.post(url, {"username": "nobody-here", "role": "viewer"})
    assert refused.status_code == 400 and b"No account is called" in refused.content
    assert owner.post(url, {"username": "editor-person", "role": "editor"}).status_code == 302
    editor = logged_in(client, people["editor"])
    data = form_data(study, question="Which summary is more faithful?")
    assert editor.post(f"/studies/{study.pk}/settings/", data).status_code == 302
    entry = AuditEntry.objects.filter(study=study, action="settings").first()  # the newest
    assert entry is not None and entry.username == "editor-person" and entry.user == people["editor"]
    assert entry.detail == {"question": ["Which output is better?", "Which summary is more faithful?"]}
    page = editor.get(url)
    assert b"Which summary is more faithful?" in page.content and b"added editor-person as editor" in page.content
    assert b'data-testid="add-member"' not in page.content  # only the owner adds members
    trail = client_for(people["viewer"]).get(f"/api/studies/{study.pk}/audit/")
    assert trail.status_code == 404  # the viewer is not on this study's team
    api_trail = client_for(researcher).get(f"/api/studies/{study.pk}/audit/").json()["results"]
    # the fixture's own change came from the server (a command), before the team
    assert [(e["action"], e["username"]) for e in api_trail] == [
        ("settings", "editor-person"),
        ("member_added", "alice"),
        ("settings", "(server command)"),
    ]


def test_links_that_let_their_holder_rate_are_shown_to_editors_only(client, team_study, people):
    from annotation.crowd import sites
    from annotation.studies import enrolment

    rater = enrolment.do_create_rater_link(team_study, "rater-9")
    enrolment.do_set_open_link(team_study, True)
    link = sites.do_create_external_link(team_study, "mturk")
    viewer = logged_in(client, people["viewer"])
    page, crowd = (
        viewer.get(f"/studies/{team_study.pk}/").content,
        viewer.get(f"/studies/{team_study.pk}/external/").content,
    )
    assert rater.link_path().encode() not in page and team_study.open_link_path().encode() not in page
    assert link.path().encode() not in crowd and b'data-testid="link-hidden"' in crowd
    assert b"Blocklist" not in crowd  # the owner's list, across their studies
    settings_page = viewer.get(f"/studies/{team_study.pk}/settings/").content
    assert b'data-testid="budget-form"' not in settings_page  # a new plan replaces the study's last one
    editor = logged_in(client, people["editor"])
    page, crowd = (
        editor.get(f"/studies/{team_study.pk}/").content,
        editor.get(f"/studies/{team_study.pk}/external/").content,
    )
    assert rater.link_path().encode() in page and link.path().encode() in crowd
    assert team_study.open_link_path().encode() in page
    assert b'data-testid="budget-form"' in editor.get(f"/studies/{team_study.pk}/settings/").content


def test_a_collaborators_copy_does_not_take_the_owners_stored_api_key(client, team_study, people, researcher):
    from annotation.generating import runner
    from annotation.models import SystemEndpoint

    runner.do_add_endpoint_system(
        team_study, "gen", base_url="https://api.example.org/v1", model="m", api_key="sk-owner"
    )
    viewer = logged_in(client, people["viewer"])
    assert viewer.post(f"/studies/{team_study.pk}/duplicate/", {"name": "viewer's copy"}).status_code == 302
    copy = SystemEndpoint.objects.get(system__study__name="viewer's copy")
    assert copy.api_key == "" and copy.system.study.owner == people["viewer"]
    own = lifecycle_copy = None
    from annotation.studies import lifecycle

    own = lifecycle.do_duplicate_study(team_study, "owner's copy")
    lifecycle_copy = SystemEndpoint.objects.get(system__study=own)
    assert lifecycle_copy.api_key == "sk-owner"  # the owner's own copy keeps it


def test_a_baseline_that_is_not_text_is_refused_and_a_get_sent_back_changes_nothing(owner_api, study, rater):
    url = f"/api/studies/{study.pk}/settings/"
    for wrong in ([], {}, 3):
        response = owner_api.patch(url, {"baseline": wrong}, format="json")
        assert response.status_code == 400 and list(response.json()) == ["baseline"], response.json()
    answer_all(allocation.do_start_assignment(rater))  # raters started: the plan is frozen
    shown = owner_api.get(url).json()
    again = owner_api.patch(url, shown, format="json")
    assert again.status_code == 200, again.json()
    assert again.json() == shown


def test_links_opened_closed_and_rotated_are_in_the_audit_trail(researcher_client, study, rater):
    from annotation.crowd import sites

    link = sites.do_create_external_link(study, "prolific", "PS1")
    researcher_client.post(f"/studies/{study.pk}/open-link/", {"enabled": "1"})
    researcher_client.post(f"/studies/{study.pk}/open-link/rotate/")
    researcher_client.post(f"/studies/{study.pk}/raters/{rater.pk}/rotate/")
    researcher_client.post(f"/studies/{study.pk}/external/{link.pk}/disable/")
    researcher_client.post(f"/studies/{study.pk}/external/{link.pk}/launch-limit/", {"launch_per_minute": "30"})
    actions = list(AuditEntry.objects.filter(study=study, user__isnull=False).values_list("action", flat=True))
    assert actions == ["crowd_link_limit", "crowd_link_disable", "rater_rotated", "open_link_rotate", "open_link"]
