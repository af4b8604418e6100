"""The MTurk requester API through botocore's own Stubber: request shapes checked, responses and
errors validated against the service model, nothing leaves the machine."""

from __future__ import annotations

import json
from io import StringIO

import boto3
import pytest
from botocore.stub import ANY, Stubber
from django.core.management import CommandError, call_command

from annotation.crowd import mturk, sites
from annotation.models import ExternalLink, MTurkHIT, WorkerSession


@pytest.fixture
def stubbed(monkeypatch):
    client = boto3.client(
        "mturk",
        region_name="us-east-1",
        endpoint_url=mturk.SANDBOX_ENDPOINT,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    created = []

    def make_client(sandbox=True):
        created.append(sandbox)
        return client

    monkeypatch.setattr(mturk, "make_client", make_client)
    with Stubber(client) as stubber:
        yield stubber, created
        stubber.assert_no_pending_responses()


def run(*args) -> str:
    out = StringIO()
    call_command("mturk", *args, stdout=out)
    return out.getvalue()


def test_create_hits_sends_the_external_question(stubbed, study):
    stubber, created = stubbed
    for n in range(2):
        stubber.add_response(
            "create_hit",
            {"HIT": {"HITId": f"HIT{n}", "HITTypeId": "TYPE"}},
            {
                "Title": "Compare two texts",
                "Description": ANY,
                "Keywords": "evaluation, comparison, text",
                "Reward": "1.20",
                "MaxAssignments": 3,
                "LifetimeInSeconds": 604800,
                "AssignmentDurationInSeconds": 3600,
                "Question": ANY,
                "RequesterAnnotation": "seplab:small",
            },
        )
    output = run(
        "create-hits", "--study", "small", "--reward", "1.2", "--hits", "2", "--base-url", "https://seplab.example.org"
    )
    assert created == [True] and "Created sandbox HIT HIT0" in output
    assert list(MTurkHIT.objects.values_list("hit_id", "sandbox", "reward")) == [
        ("HIT0", True, "1.20"),
        ("HIT1", True, "1.20"),
    ]
    assert ExternalLink.objects.filter(platform="mturk").count() == 1  # created once, reused by both HITs


def test_the_question_is_the_links_external_question(monkeypatch, study):
    """Checks the Question parameter exactly (Stubber compares it to the expected XML)."""
    client = boto3.client("mturk", region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t")
    link = ExternalLink.objects.create(study=study, platform="mturk")

    expected = sites.external_question_xml(f"https://s.example{link.path()}")
    with Stubber(client) as stubber:
        stubber.add_response(
            "create_hit",
            {"HIT": {"HITId": "H", "HITTypeId": "T"}},
            {
                "Title": "t",
                "Description": "d",
                "Keywords": "k",
                "Reward": "0.50",
                "MaxAssignments": 1,
                "LifetimeInSeconds": 60,
                "AssignmentDurationInSeconds": 60,
                "Question": expected,
                "RequesterAnnotation": "seplab:small",
            },
        )
        mturk.do_create_hits(
            client, study, "https://s.example", mturk.HitSpec("t", "d", "0.5", 1, "k", 60, 60), 1, True
        )


def test_live_needs_the_flag(stubbed, study):
    stubber, created = stubbed
    stubber.add_response("approve_assignment", {}, {"AssignmentId": "A1"})
    run("--live", "approve", "--assignment-id", "A1")
    assert created == [False]


def test_sync_pages_through_assignments_and_records_their_status(stubbed, study):
    stubber, _ = stubbed
    MTurkHIT.objects.create(study=study, hit_id="HIT0", sandbox=True, max_assignments=3, reward="1.00")

    link = ExternalLink.objects.create(study=study, platform="mturk")
    session = sites.do_accept(link, sites.Arrival("mturk", "W1", "A1", "HIT0"))
    statuses = ["Submitted", "Approved", "Rejected"]
    stubber.add_response(
        "list_assignments_for_hit",
        {
            "Assignments": [
                {
                    "AssignmentId": "A1",
                    "WorkerId": "W1",
                    "HITId": "HIT0",
                    "AssignmentStatus": "Submitted",
                    "Answer": f"<Answer>{session.assignment.completion_code}</Answer>",
                }
            ],
            "NextToken": "page2",
            "NumResults": 1,
        },
        {"HITId": "HIT0", "MaxResults": 100, "AssignmentStatuses": statuses},
    )
    stubber.add_response(
        "list_assignments_for_hit",
        {
            "Assignments": [{"AssignmentId": "A9", "WorkerId": "W9", "HITId": "HIT0", "AssignmentStatus": "Approved"}],
            "NumResults": 1,
        },
        {"HITId": "HIT0", "MaxResults": 100, "AssignmentStatuses": statuses, "NextToken": "page2"},
    )
    rows = json.loads(run("sync", "--study", "small"))
    assert [(r["assignment_id"], r["status"], r["code_matches"]) for r in rows] == [
        ("A1", "Submitted", True),
        ("A9", "Approved", False),
    ]
    assert WorkerSession.objects.get(session_key="A1").platform_status == "Submitted"


def test_reject_needs_a_reason_and_sends_it(stubbed):
    stubber, _ = stubbed
    with pytest.raises(CommandError, match="needs a reason"):
        run("reject", "--assignment-id", "A1", "--reason", "  ")
    stubber.add_response(
        "reject_assignment", {}, {"AssignmentId": "A1", "RequesterFeedback": "Failed the attention checks."}
    )
    assert "Rejected A1" in run("reject", "--assignment-id", "A1", "--reason", "Failed the attention checks.")


def test_bonus_and_qualifications(stubbed):
    stubber, _ = stubbed
    stubber.add_response(
        "send_bonus",
        {},
        {
            "WorkerId": "W1",
            "AssignmentId": "A1",
            "BonusAmount": "0.50",
            "Reason": "Careful work",
            "UniqueRequestToken": ANY,
        },
    )
    stubber.add_response(
        "create_qualification_type",
        {"QualificationType": {"QualificationTypeId": "Q1"}},
        {
            "Name": "SepLab qualified",
            "Description": "Passed our qualification study",
            "QualificationTypeStatus": "Active",
        },
    )
    stubber.add_response(
        "associate_qualification_with_worker",
        {},
        {"QualificationTypeId": "Q1", "WorkerId": "W1", "IntegerValue": 1, "SendNotification": False},
    )
    assert "Paid a $0.50 bonus to W1" in run(
        "bonus", "--worker-id", "W1", "--assignment-id", "A1", "--amount", "0.5", "--reason", "Careful work"
    )
    assert "Created qualification Q1" in run(
        "create-qualification", "--name", "SepLab qualified", "--description", "Passed our qualification study"
    )
    assert "Granted Q1 to W1" in run("grant-qualification", "--qualification-id", "Q1", "--worker-id", "W1")


def test_service_errors_become_clear_command_errors(stubbed):
    stubber, _ = stubbed
    stubber.add_client_error(
        "approve_assignment",
        service_error_code="RequestError",
        service_message="This operation can be called with a status of: Submitted",
        http_status_code=400,
        expected_params={"AssignmentId": "A1"},
    )
    with pytest.raises(CommandError, match="MTurk refused: RequestError: This operation can be called"):
        run("approve", "--assignment-id", "A1")


def test_amounts_are_validated():
    assert mturk.money("1.2") == "1.20"
    from annotation.errors import ServiceError

    for bad in ("-1", "0", "lots"):
        with pytest.raises(ServiceError):
            mturk.money(bad)
