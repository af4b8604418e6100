"""Paying the crowd from the browser: approve, reject, bonus and block on MTurk (through botocore's own Stubber, which
checks every request against the service model) and Prolific (a local server that checks every request body against
the shapes Prolific documents), queued from the crowd page and sent by the worker's job, with the money summed and
every action in the ledger and the audit trail."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import jsonschema
import pytest
from botocore.stub import Stubber

from annotation.crowd import mturk, payments, prolific, sites
from annotation.jobs import run_job
from annotation.models import AuditEntry, BlockedWorker, CrowdPayment, ExternalLink, Job, MTurkHIT, WorkerSession

TOKEN = "prolific-test-token"
REASON_100 = (
    "The attention checks in this task were answered incorrectly, so the answers cannot be used for the study; "
    "thank you for your time."
)
# Prolific's request bodies as its API reference documents them (docs.prolific.com/api-reference)
TRANSITION = {
    "oneOf": [
        {
            "type": "object",
            "properties": {"action": {"const": "APPROVE"}},
            "required": ["action"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {
                "action": {"const": "REJECT"},
                "message": {"type": "string", "minLength": 100},
                "rejection_category": {"enum": list(prolific.REJECTION_CATEGORIES)},
            },
            "required": ["action", "message", "rejection_category"],
            "additionalProperties": False,
        },
    ]
}
BONUS_SET_UP = {
    "type": "object",
    "properties": {
        "study_id": {"type": "string", "minLength": 1},
        # <participant or submission id>,<amount as a decimal in the study's currency>\n per line
        "csv_bonuses": {"type": "string", "pattern": r"^([A-Za-z0-9]+,[0-9]+(\.[0-9]{1,2})?\n)+$"},
    },
    "required": ["study_id", "csv_bonuses"],
    "additionalProperties": False,
}


@pytest.fixture
def prolific_site(settings) -> Iterator[dict]:
    """Prolific's submission transitions and bonus payments: a body that breaks the documented shape is a 400 (and
    recorded as a violation), a bonus is paid at most once, anything else is a 404."""
    state: dict = {
        "calls": [],
        "violations": [],
        "paid": [],
        "bonuses": {},
        "submissions": {  # what Prolific knows of each submission
            "SUB1": {"id": "SUB1", "study_id": "PS1", "participant": "PPART1", "status": "AWAITING REVIEW"},
            "SUB2": {"id": "SUB2", "study_id": "PS1", "participant": "PPART2", "status": "AWAITING REVIEW"},
        },
        "fail_pay": False,
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            state["calls"].append((self.path, None))
            key = self.path.removeprefix("/api/v1/submissions/").rstrip("/")
            found = state["submissions"].get(key) if self.headers.get("Authorization") == f"Token {TOKEN}" else None
            data = json.dumps(found or {"error": {"detail": "Not found"}}).encode()
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):  # noqa: N802
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length)) if length else None
            state["calls"].append((self.path, body))
            status, answer = 404, {"error": {"detail": "Not found"}}
            schema = None
            if self.headers.get("Authorization") != f"Token {TOKEN}":
                status, answer = 401, {"error": {"detail": "Invalid token"}}
            elif self.path.startswith("/api/v1/submissions/") and self.path.endswith("/transition/"):
                schema, status, answer = (
                    TRANSITION,
                    200,
                    {"status": "APPROVED" if body["action"] == "APPROVE" else "REJECTED"},
                )
            elif self.path == "/api/v1/submissions/bonus-payments/":
                bulk = f"BULK{len(state['bonuses']) + 1}"
                schema, status = BONUS_SET_UP, 201
                state["bonuses"][bulk] = body
                answer = {
                    "id": bulk,
                    "study": body.get("study_id"),
                    "amount": 50.0,
                    "fees": 16.67,
                    "total_amount": 66.67,
                }
            elif self.path.startswith("/api/v1/bulk-bonus-payments/") and self.path.endswith("/pay/"):
                bulk = self.path.split("/")[4]
                if state["fail_pay"]:
                    status, answer = 502, {"error": {"detail": "Bad gateway"}}
                elif bulk in state["bonuses"]:
                    state["paid"].append(bulk)
                    status, answer = 202, {}
            if schema is not None:
                try:
                    jsonschema.validate(body, schema)
                except jsonschema.ValidationError as exc:
                    state["violations"].append((self.path, exc.message))
                    status, answer = 400, {"error": {"detail": exc.message}}
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings.PROLIFIC_API_URL = f"http://127.0.0.1:{server.server_address[1]}"
    settings.PROLIFIC_TOKEN = TOKEN
    try:
        yield state
    finally:
        server.shutdown()


@pytest.fixture
def stubbed(monkeypatch):
    client = boto3.client(
        "mturk",
        region_name="us-east-1",
        endpoint_url=mturk.LIVE_ENDPOINT,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    monkeypatch.setattr(mturk, "make_client", lambda sandbox=True: client)
    with Stubber(client) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


@pytest.fixture
def mturk_session(study) -> WorkerSession:
    link = ExternalLink.objects.create(study=study, platform=ExternalLink.Platform.MTURK)
    MTurkHIT.objects.create(study=study, hit_id="HIT1", sandbox=False, max_assignments=3, reward="1.20")
    return sites.do_accept(link, sites.Arrival("mturk", "AWORKER1", "ASSIGN1", "HIT1"))


@pytest.fixture
def prolific_session(study) -> WorkerSession:
    link = ExternalLink.objects.create(study=study, platform=ExternalLink.Platform.PROLIFIC, site_study_id="PS1")
    study.crowd_settings.pay_per_assignment = Decimal("2.50")
    study.crowd_settings.save()
    return sites.do_accept(link, sites.Arrival("prolific", "PPART1", "SUB1", "PS1"))


def mturk_knows(stubbed, hit_id: str = "HIT1", worker_id: str = "AWORKER1") -> None:
    """MTurk's answer to the ownership check made before each action: the assignment, its HIT and its worker."""
    stubbed.add_response(
        "get_assignment",
        {
            "Assignment": {
                "AssignmentId": "ASSIGN1",
                "WorkerId": worker_id,
                "HITId": hit_id,
                "AssignmentStatus": "Submitted",
            }
        },
        {"AssignmentId": "ASSIGN1"},
    )


def run_pay_jobs() -> int:
    queued = list(Job.objects.filter(kind=payments.KIND, status=Job.Status.QUEUED).values_list("pk", flat=True))
    for pk in queued:
        run_job.call(pk)
    return len(queued)


def queue(client, study, session, **fields):
    return client.post(f"/studies/{study.pk}/external/pay/", {"session": session.pk, **fields})


def test_mturk_approve_bonus_and_block_go_through_the_worker(
    researcher_client, study, mturk_session, stubbed, researcher
):
    for kind, extra in (
        ("approve", {}),
        ("bonus", {"amount": "0.50", "reason": "Careful work"}),
        ("block", {"reason": "spam"}),
    ):
        assert queue(researcher_client, study, mturk_session, kind=kind, **extra).status_code == 302
    assert CrowdPayment.objects.filter(status="queued").count() == 3
    bonus = CrowdPayment.objects.get(kind="bonus")
    mturk_knows(stubbed)
    stubbed.add_response("approve_assignment", {}, {"AssignmentId": "ASSIGN1"})
    mturk_knows(stubbed)
    stubbed.add_response(
        "send_bonus",
        {},
        {
            "WorkerId": "AWORKER1",
            "AssignmentId": "ASSIGN1",
            "BonusAmount": "0.50",
            "Reason": "Careful work",
            "UniqueRequestToken": bonus.token,  # the row's own token: MTurk pays one bonus per token
        },
    )
    mturk_knows(stubbed)
    stubbed.add_response("create_worker_block", {}, {"WorkerId": "AWORKER1", "Reason": "spam"})
    assert run_pay_jobs() == 1  # one job sends the study's three queued actions
    assert set(CrowdPayment.objects.values_list("status", flat=True)) == {"done"}
    assert WorkerSession.objects.get(pk=mturk_session.pk).platform_status == "Approved"
    assert BlockedWorker.objects.filter(owner=researcher, worker_id="AWORKER1").exists()
    [money] = payments.totals(study)
    assert (money["paid_approve"], money["paid_bonus"], money["paid"], money["to_send"]) == (
        Decimal("1.20"),
        Decimal("0.50"),
        Decimal("1.70"),
        Decimal("0"),
    )
    page = researcher_client.get(f"/studies/{study.pk}/external/")
    assert b"paid 1.70 (approvals 1.20, bonuses 0.50)" in page.content
    assert list(AuditEntry.objects.filter(action__startswith="crowd_").values_list("action", flat=True)) == [
        "crowd_block",
        "crowd_bonus",
        "crowd_approve",
    ]


def test_a_refusal_from_mturk_is_kept_in_its_words_and_the_rest_still_sent(
    researcher_client, study, mturk_session, stubbed
):
    queue(researcher_client, study, mturk_session, kind="reject", reason="Answers were random")
    mturk_knows(stubbed)
    stubbed.add_client_error(
        "reject_assignment",
        service_error_code="RequestError",
        service_message="This operation can be called with a status of: Submitted",
    )
    run_pay_jobs()
    payment = CrowdPayment.objects.get()
    assert payment.status == "failed" and "status of: Submitted" in payment.problem
    assert WorkerSession.objects.get(pk=mturk_session.pk).platform_status == ""
    page = researcher_client.get(f"/studies/{study.pk}/external/")
    assert b"status of: Submitted" in page.content
    # a failed reject may be asked again; a queued or done one may not
    assert (
        queue(researcher_client, study, mturk_session, kind="reject", reason="Answers were random").status_code == 302
    )
    assert queue(researcher_client, study, mturk_session, kind="approve").status_code == 302
    assert CrowdPayment.objects.count() == 2  # the approve was refused: the reject is queued
    mturk_knows(stubbed)
    stubbed.add_response(
        "reject_assignment", {}, {"AssignmentId": "ASSIGN1", "RequesterFeedback": "Answers were random"}
    )
    run_pay_jobs()
    assert CrowdPayment.objects.filter(status="done").count() == 1


def test_prolific_approve_reject_and_a_bonus_paid_once(client, researcher, study, prolific_session, prolific_site):
    client.force_login(researcher)
    assert queue(client, study, prolific_session, kind="approve").status_code == 302
    run_pay_jobs()
    second = sites.do_accept(prolific_session.link, sites.Arrival("prolific", "PPART2", "SUB2", "PS1"))
    queue(client, study, second, kind="reject", reason=REASON_100, category="FAILED_CHECK")
    queue(client, study, second, kind="bonus", amount="0.5", reason="For the long comments")
    run_pay_jobs()
    assert prolific_site["violations"] == []
    assert [path for path, _ in prolific_site["calls"]] == [
        "/api/v1/submissions/SUB1/",  # each action checks the submission is this study's first
        "/api/v1/submissions/SUB1/transition/",
        "/api/v1/submissions/SUB2/",
        "/api/v1/submissions/SUB2/transition/",
        "/api/v1/submissions/SUB2/",
        "/api/v1/submissions/bonus-payments/",
        "/api/v1/bulk-bonus-payments/BULK1/pay/",
    ]
    assert prolific_site["bonuses"]["BULK1"] == {"study_id": "PS1", "csv_bonuses": "SUB2,0.50\n"}
    assert prolific_site["paid"] == ["BULK1"]
    assert CrowdPayment.objects.get(kind="bonus").site_reference == "BULK1"
    assert set(CrowdPayment.objects.values_list("status", flat=True)) == {"done"}
    assert dict(WorkerSession.objects.values_list("session_key", "platform_status")) == {
        "SUB1": "APPROVED",
        "SUB2": "REJECTED",
    }
    [money] = payments.totals(study)
    assert (money["platform"], money["paid_approve"], money["paid_bonus"]) == (
        "prolific",
        Decimal("2.50"),
        Decimal("0.50"),
    )


def test_a_bonus_left_half_sent_by_a_dead_worker_is_never_paid_again(
    researcher, study, prolific_session, prolific_site
):
    payment = payments.do_queue(study, prolific_session, "bonus", "1.00", "Thanks", "", researcher)
    CrowdPayment.objects.filter(pk=payment.pk).update(status="sending", site_reference="BULK9")  # died mid-call
    run_pay_jobs()
    payment.refresh_from_db()
    assert payment.status == "failed" and "check the submission on Prolific" in payment.problem
    assert prolific_site["calls"] == []


@pytest.mark.parametrize(
    ("platform", "fields", "refused"),
    [
        ("mturk", {"kind": "bonus", "amount": "-1", "reason": "x"}, "amount"),
        ("mturk", {"kind": "bonus", "amount": "abc", "reason": "x"}, "amount"),
        ("mturk", {"kind": "bonus", "amount": "250", "reason": "x"}, "amount"),
        ("mturk", {"kind": "bonus", "amount": "1"}, "reason"),
        ("mturk", {"kind": "reject"}, "reason"),
        ("mturk", {"kind": "pay-everyone"}, "kind"),
        ("prolific", {"kind": "reject", "reason": "too short", "category": "LOW_EFFORT"}, "reason"),
        ("prolific", {"kind": "reject", "reason": REASON_100, "category": "NOT_A_CATEGORY"}, "category"),
        ("prolific", {"kind": "block", "reason": "spam"}, "kind"),
    ],
)
def test_an_action_is_refused_by_field_and_nothing_is_queued(
    researcher_client, study, mturk_session, prolific_session, platform, fields, refused
):
    session = mturk_session if platform == "mturk" else prolific_session
    response = queue(researcher_client, study, session, **fields)
    assert response.status_code == 302
    shown = [str(m) for m in response.wsgi_request._messages]
    assert len(shown) == 1 and shown[0].startswith(f"Not queued, {session.worker_id}: {refused}:"), shown
    assert not CrowdPayment.objects.exists() and not Job.objects.filter(kind=payments.KIND).exists()


def test_an_mturk_hit_seplab_did_not_create_is_not_paid_from_the_browser(researcher_client, study, mturk_session):
    MTurkHIT.objects.all().delete()
    response = queue(researcher_client, study, mturk_session, kind="approve")
    assert "was not created by SepLab" in str(list(response.wsgi_request._messages)[0])
    assert not CrowdPayment.objects.exists()


def test_only_an_editor_pays_and_another_studys_worker_is_404(
    client, study, mturk_session, other_researcher, researcher
):
    from annotation.studies import creation, team
    from tests.conftest import study_jsonl

    team.do_add_member(study, other_researcher.username, "viewer", researcher)
    client.force_login(other_researcher)
    assert queue(client, study, mturk_session, kind="approve").status_code == 403
    theirs = creation.do_create_study(other_researcher, "theirs", study_jsonl(), "t.jsonl")
    assert (
        client.post(f"/studies/{theirs.pk}/external/pay/", {"session": mturk_session.pk, "kind": "approve"}).status_code
        == 404
    )
    assert not CrowdPayment.objects.exists()


def test_a_row_another_running_job_is_sending_is_left_to_it(researcher, study, prolific_session, prolific_site):
    running = Job.objects.create(study=study, kind=payments.KIND, status=Job.Status.RUNNING)
    payment = payments.do_queue(study, prolific_session, "bonus", "1.00", "Thanks", "", researcher)
    CrowdPayment.objects.filter(pk=payment.pk).update(status="sending")  # the running job is sending it
    run_pay_jobs()
    payment.refresh_from_db()
    assert payment.status == "sending" and payment.problem == ""
    assert prolific_site["calls"] == []
    assert Job.objects.get(pk=running.pk).status == "running"  # the queued job ran beside it and left it be
    assert Job.objects.filter(kind=payments.KIND, status="done").count() == 1


def test_a_submission_the_site_says_is_another_studys_is_never_paid(
    researcher_client, study, mturk_session, prolific_session, stubbed, prolific_site
):
    """Ids in a crowd link come from the worker's address bar, and the site's account is the server's: before any
    action, the site is asked whose submission it is."""
    queue(researcher_client, study, mturk_session, kind="bonus", amount="5", reason="thanks")
    mturk_knows(stubbed, hit_id="SOMEONE-ELSES-HIT")
    prolific_site["submissions"]["SUB1"]["study_id"] = "ANOTHER-STUDY"
    queue(researcher_client, study, prolific_session, kind="approve")
    run_pay_jobs()
    problems = dict(CrowdPayment.objects.values_list("kind", "problem"))
    assert set(CrowdPayment.objects.values_list("status", flat=True)) == {"failed"}
    assert "not one of this study's HITs" in problems["bonus"] and "nothing was sent" in problems["bonus"]
    assert "not in study PS1" in problems["approve"]
    assert [path for path, _ in prolific_site["calls"]] == ["/api/v1/submissions/SUB1/"]


def test_the_same_form_sent_twice_queues_one_bonus(researcher_client, study, mturk_session):
    for _ in range(2):
        queue(researcher_client, study, mturk_session, kind="bonus", amount="1", reason="thanks", token="f" * 32)
    assert CrowdPayment.objects.filter(kind="bonus").count() == 1
    assert CrowdPayment.objects.get().token == "f" * 32  # sent to MTurk as its UniqueRequestToken


def test_a_bonus_whose_payment_the_site_left_unknown_says_so(researcher, study, prolific_session, prolific_site):
    prolific_site["fail_pay"] = True
    payment = payments.do_queue(study, prolific_session, "bonus", "1.00", "Thanks", "", researcher)
    run_pay_jobs()
    payment.refresh_from_db()
    assert payment.status == "failed" and payment.problem.startswith("Outcome unknown")
    assert "Check the submission on the site" in payment.problem and payment.site_reference == "BULK1"


def test_a_generic_links_session_is_not_payable_and_a_study_with_a_ledger_is_deleted(
    researcher_client, study, mturk_session, researcher
):
    generic = ExternalLink.objects.create(study=study, platform=ExternalLink.Platform.GENERIC)
    session = sites.do_accept(generic, sites.Arrival("generic", "G1", "GS1"))
    assert queue(researcher_client, study, session, kind="approve").status_code == 404
    payments.do_queue(study, mturk_session, "approve", "", "", "", researcher)
    response = researcher_client.post(f"/studies/{study.pk}/delete/", {"confirm": study.name})
    assert response.status_code == 302 and not CrowdPayment.objects.exists()


def test_a_retried_or_server_side_mturk_error_is_an_unknown_outcome_and_a_refusal_is_not(
    researcher, study, mturk_session
):
    from botocore.exceptions import ClientError

    def error(code: str, status: int, retries: int = 0) -> ClientError:
        # as botocore builds it from MTurk's answer (the service model's shape)
        answer: Any = {
            "Error": {"Code": code, "Message": "m"},
            "ResponseMetadata": {"HTTPStatusCode": status, "RetryAttempts": retries},
        }
        return ClientError(answer, "SendBonus")

    assert payments._site_words(error("RequestError", 400), sent=True).startswith("MTurk refused")
    for maybe_done in (error("ServiceFault", 500), error("RequestError", 400, retries=1)):
        assert payments._site_words(maybe_done, sent=True).startswith("Outcome unknown")
    assert payments._site_words(TimeoutError("read"), sent=False).endswith("(nothing was sent)")
    assert payments._site_words(prolific.ProlificError("answered 502", 502), sent=True).startswith("Outcome unknown")
    assert payments._site_words(prolific.ProlificError("answered 400", 400), sent=True).startswith("answered 400")


def test_a_token_that_is_not_a_forms_is_refused(researcher_client, study, mturk_session):
    response = queue(researcher_client, study, mturk_session, kind="approve", token="x" * 300)
    assert "Not a form's token" in str(list(response.wsgi_request._messages)[0])
    assert not CrowdPayment.objects.exists()
