"""The MTurk requester API (boto3), for requesters who already have an account: create HITs that
open the study's MTurk-style link, sync submitted assignments, approve / reject, bonuses and
qualifications. Sandbox unless asked for live. Credentials come from the standard AWS environment
variables or config files; boto3 finds them itself.
"""

from __future__ import annotations

import dataclasses
import uuid
from decimal import Decimal, InvalidOperation

from annotation.crowd import sites
from annotation.errors import ServiceError
from annotation.models import ExternalLink, MTurkHIT, Study, WorkerSession

SANDBOX_ENDPOINT = "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
LIVE_ENDPOINT = "https://mturk-requester.us-east-1.amazonaws.com"


def make_client(sandbox: bool = True):
    import boto3

    return boto3.client("mturk", region_name="us-east-1", endpoint_url=SANDBOX_ENDPOINT if sandbox else LIVE_ENDPOINT)


def money(amount: str) -> str:
    """A positive USD amount with two decimals, as MTurk expects ("1.20")."""
    try:
        value = Decimal(str(amount))
    except InvalidOperation:
        raise ServiceError(f"{amount!r} is not an amount of money") from None
    if value <= 0:
        raise ServiceError("amounts must be positive")
    return f"{value.quantize(Decimal('0.01'))}"


@dataclasses.dataclass(frozen=True)
class HitSpec:
    title: str
    description: str
    reward: str
    assignments: int
    keywords: str = "evaluation, comparison, text"
    duration_seconds: int = 3600
    lifetime_seconds: int = 7 * 24 * 3600
    frame_height: int = 0


def do_create_hits(client, study: Study, base_url: str, spec: HitSpec, count: int, sandbox: bool) -> list[MTurkHIT]:
    """Create ``count`` HITs whose ExternalQuestion opens the study's MTurk-style link."""
    if spec.assignments < 1 or count < 1:
        raise ServiceError("--assignments and --hits must be at least 1")
    link = study.external_links.filter(platform=ExternalLink.Platform.MTURK, enabled=True).first()
    if link is None:
        link = ExternalLink.objects.create(study=study, platform=ExternalLink.Platform.MTURK)
    question = sites.external_question_xml(sites.link_url(link, base_url), spec.frame_height)
    hits = []
    for _ in range(count):
        response = client.create_hit(
            Title=spec.title,
            Description=spec.description,
            Keywords=spec.keywords,
            Reward=money(spec.reward),
            MaxAssignments=spec.assignments,
            LifetimeInSeconds=spec.lifetime_seconds,
            AssignmentDurationInSeconds=spec.duration_seconds,
            Question=question,
            RequesterAnnotation=f"seplab:{study.name}"[:255],
        )
        hit = response["HIT"]
        hits.append(
            MTurkHIT.objects.create(
                study=study,
                hit_id=hit["HITId"],
                hit_type_id=hit.get("HITTypeId", ""),
                sandbox=sandbox,
                max_assignments=spec.assignments,
                reward=money(spec.reward),
            )
        )
    return hits


def do_sync_assignments(client, study: Study) -> list[dict]:
    """Every assignment of the study's HITs as MTurk sees it, matched to our worker sessions; stores
    the site's status on the session. Rows: assignment_id, worker_id, hit_id, status, answered (our
    assignment completed?), code_matches."""
    rows = []
    for hit in study.mturk_hits.all():
        token = None
        while True:
            kwargs = {
                "HITId": hit.hit_id,
                "MaxResults": 100,
                "AssignmentStatuses": ["Submitted", "Approved", "Rejected"],
            }
            if token:
                kwargs["NextToken"] = token
            page = client.list_assignments_for_hit(**kwargs)
            for a in page.get("Assignments", []):
                session = (
                    WorkerSession.objects.filter(session_key=a["AssignmentId"], link__study=study)
                    .select_related("assignment")
                    .first()
                )
                if session is not None and session.platform_status != a["AssignmentStatus"]:
                    session.platform_status = a["AssignmentStatus"]
                    session.save(update_fields=["platform_status"])
                ours = session.assignment if session else None
                rows.append(
                    {
                        "assignment_id": a["AssignmentId"],
                        "worker_id": a["WorkerId"],
                        "hit_id": hit.hit_id,
                        "status": a["AssignmentStatus"],
                        "answered": bool(ours and ours.status == "completed"),
                        "code_matches": bool(ours and ours.completion_code in a.get("Answer", "")),
                    }
                )
            token = page.get("NextToken")
            if not token:
                break
    return rows


def approve(client, assignment_id: str, feedback: str = "") -> None:
    kwargs = {"AssignmentId": assignment_id}
    if feedback:
        kwargs["RequesterFeedback"] = feedback[:1024]
    client.approve_assignment(**kwargs)


def reject(client, assignment_id: str, reason: str) -> None:
    if not reason.strip():
        raise ServiceError("rejecting needs a reason: the worker sees it")
    client.reject_assignment(AssignmentId=assignment_id, RequesterFeedback=reason[:1024])


def bonus(client, worker_id: str, assignment_id: str, amount: str, reason: str, request_token: str | None = None):
    if not reason.strip():
        raise ServiceError("a bonus needs a reason: the worker sees it")
    client.send_bonus(
        WorkerId=worker_id,
        AssignmentId=assignment_id,
        BonusAmount=money(amount),
        Reason=reason,
        UniqueRequestToken=request_token or uuid.uuid4().hex,
    )


def block(client, worker_id: str, reason: str) -> None:
    """Block a worker from all of the requester's HITs on MTurk (the worker does not see the reason)."""
    if not reason.strip():
        raise ServiceError("blocking needs a reason")
    client.create_worker_block(WorkerId=worker_id, Reason=reason[:1024])


def create_qualification(client, name: str, description: str) -> str:
    response = client.create_qualification_type(Name=name, Description=description, QualificationTypeStatus="Active")
    return response["QualificationType"]["QualificationTypeId"]


def grant_qualification(client, qualification_id: str, worker_id: str, value: int = 1, notify: bool = False) -> None:
    client.associate_qualification_with_worker(
        QualificationTypeId=qualification_id, WorkerId=worker_id, IntegerValue=value, SendNotification=notify
    )
