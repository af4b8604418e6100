"""Paying a study's crowd from the browser: approve or reject a worker's submission, pay a bonus, block a worker on
the site -- on MTurk (boto3, ``annotation/crowd/mturk.py``) and Prolific (its API, ``annotation/crowd/prolific.py``).

An action is checked and queued in the request (``do_queue``: a ``CrowdPayment`` row, a line of the audit trail and
a ``crowd_pay`` job); the worker sends it (``pay_job``), never the request, so a slow or unreachable site never holds
a page. Each row is marked SENDING before its call and DONE or FAILED (with the site's words) after it, so nothing is
sent twice: a row left SENDING by a worker that died mid-call is failed with words that say to check the site, never
sent again (Prolific's bonus payment is not idempotent; MTurk's bonus carries the row's UniqueRequestToken too).

The money (``totals``) is summed from the ledger: what approvals paid (an MTurk HIT's reward as SepLab created it, or
the study's pay per assignment for Prolific) and bonuses, done and still to send, per site."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from annotation import jobs
from annotation.crowd import mturk, prolific, sites
from annotation.errors import FieldErrors, ServiceError
from annotation.models import CrowdPayment, ExternalLink, Job, MTurkHIT, Study, WorkerSession
from annotation.studies import team

KIND = "crowd_pay"
PLATFORMS = (ExternalLink.Platform.MTURK, ExternalLink.Platform.PROLIFIC)
CENT = Decimal("0.01")
MAX_BONUS = Decimal("100.00")  # a bonus above this is a typo far more often than a wish
DONE_STATUS: dict[
    tuple[str, str], str
] = {  # the site's status a submission has once the action is done (stored as the last sync would)
    (ExternalLink.Platform.MTURK, CrowdPayment.Kind.APPROVE): "Approved",
    (ExternalLink.Platform.MTURK, CrowdPayment.Kind.REJECT): "Rejected",
    (ExternalLink.Platform.PROLIFIC, CrowdPayment.Kind.APPROVE): "APPROVED",
    (ExternalLink.Platform.PROLIFIC, CrowdPayment.Kind.REJECT): "REJECTED",
}
DIED_SENDING = (
    "The worker stopped while sending this, so SepLab cannot tell whether {site} received it: check the submission "
    "on {site} before asking again."
)


def payable_sessions(study: Study):
    """The study's MTurk and Prolific sessions, each with its link and rater, newest first."""
    return (
        WorkerSession.objects.filter(link__study=study, link__platform__in=PLATFORMS)
        .select_related("link", "rater", "assignment")
        .order_by("-created")
    )


def _mturk_hit(session: WorkerSession) -> MTurkHIT:
    hit = MTurkHIT.objects.filter(hit_id=session.hit_id, study_id=session.link.study_id).first()
    if hit is None:
        raise FieldErrors(
            {
                "session": [
                    "This assignment's HIT was not created by SepLab, so SepLab does not know its reward or whether "
                    "it is in the sandbox: pay it with `manage.py mturk approve|reject|bonus`."
                ]
            }
        )
    return hit


def _money(value: Any, field: str) -> Decimal:
    try:
        amount = Decimal(mturk.money(str(value)))
    except ServiceError as exc:
        raise FieldErrors({field: [f"{exc}."]}) from None
    if amount > MAX_BONUS:
        raise FieldErrors({field: [f"A bonus is at most {MAX_BONUS} (a larger one is paid on the site itself)."]})
    return amount


def check_action(study: Study, session: WorkerSession, kind: str, amount: Any, reason: str, category: str) -> dict:
    """The row's fields for an action, each problem named by its field: the words the worker reads, the money,
    Prolific's rules (a rejection of 100 characters or more in a category; a bonus needs the study's id on
    Prolific)."""
    platform = session.link.platform
    reason = (reason or "").strip()
    fields: dict[str, Any] = {"kind": kind, "reason": reason, "category": ""}
    problems: dict[str, list[str]] = {}
    if kind not in CrowdPayment.Kind.values:
        raise FieldErrors({"kind": [f"Choose one of {', '.join(CrowdPayment.Kind.values)}."]})
    if platform == ExternalLink.Platform.MTURK:
        hit = _mturk_hit(session)
        fields["sandbox"] = hit.sandbox
        if kind == CrowdPayment.Kind.APPROVE:
            fields["amount"] = Decimal(hit.reward)
    elif kind == CrowdPayment.Kind.APPROVE:
        fields["amount"] = study.crowd_settings.pay_per_assignment
    if kind == CrowdPayment.Kind.BLOCK and platform == ExternalLink.Platform.PROLIFIC:
        problems["kind"] = [
            "Prolific has no call to block one participant: block them in SepLab's blocklist below (they get no "
            "more work in your studies), or exclude them with a participant group on Prolific."
        ]
    if kind in (CrowdPayment.Kind.REJECT, CrowdPayment.Kind.BONUS, CrowdPayment.Kind.BLOCK) and not reason:
        problems["reason"] = ["Give a reason: the worker reads it."]
    if kind == CrowdPayment.Kind.REJECT and platform == ExternalLink.Platform.PROLIFIC:
        if reason and len(reason) < 100:
            problems["reason"] = [
                f"Prolific needs a rejection message of at least 100 characters (this has {len(reason)})."
            ]
        if category not in prolific.REJECTION_CATEGORIES:
            problems["category"] = [
                f"Choose Prolific's rejection category: {', '.join(prolific.REJECTION_CATEGORIES)}."
            ]
        fields["category"] = category
    if kind == CrowdPayment.Kind.BONUS:
        try:
            fields["amount"] = _money(amount, "amount")
        except FieldErrors as exc:
            problems.update(exc.errors)
        if platform == ExternalLink.Platform.PROLIFIC and not session.link.site_study_id:
            problems["session"] = ["Set the Prolific study id on this link first: a bonus is paid within that study."]
    if problems:
        raise FieldErrors(problems)
    return fields


@transaction.atomic
def do_queue(
    study: Study, session: WorkerSession, kind: str, amount: Any, reason: str, category: str, by: User | None
) -> CrowdPayment:
    """Check an action on a worker's submission and queue it for the worker to send (one ``crowd_pay`` job sends
    every queued action of the study). Refused by field (``FieldErrors``); an approve or reject already queued or done
    for the submission is refused too, so a double click never pays twice."""
    fields = check_action(study, session, kind, amount, reason, category)
    if kind in (CrowdPayment.Kind.APPROVE, CrowdPayment.Kind.REJECT):
        earlier = (
            CrowdPayment.objects.select_for_update()
            .filter(session=session, kind__in=(CrowdPayment.Kind.APPROVE, CrowdPayment.Kind.REJECT))
            .exclude(status=CrowdPayment.Status.FAILED)
            .first()
        )
        if earlier is not None:
            done = "approved" if earlier.kind == CrowdPayment.Kind.APPROVE else "rejected"
            state = earlier.get_status_display().lower()
            raise FieldErrors({"kind": [f"This submission is already {done} ({state})."]})
    payment = CrowdPayment.objects.create(study=study, session=session, by=by, **fields)
    money = f" ({payment.amount})" if payment.amount is not None else ""
    team.do_audit(
        study,
        by,
        f"crowd_{kind}",
        f"{payment.get_kind_display().lower()} {session.link.platform} worker {session.worker_id}{money}",
        {
            "payment": payment.pk,
            "worker_id": session.worker_id,
            "submission": session.session_key,
            "reason": payment.reason,
        },
    )
    jobs.start(study, KIND)
    return payment


def totals(study: Study) -> list[dict]:
    """The money per site: what was paid (done) and what is still to send (queued or being sent), approvals and
    bonuses apart; MTurk's sandbox counts no real money and is left out."""
    rows = []
    real = CrowdPayment.objects.filter(study=study, sandbox=False, amount__isnull=False)
    for platform in PLATFORMS:
        mine = real.filter(session__link__platform=platform)
        if not mine.exists():
            continue
        row: dict[str, Any] = {"platform": platform}
        for label, statuses in (
            ("paid", [CrowdPayment.Status.DONE]),
            ("to_send", [CrowdPayment.Status.QUEUED, CrowdPayment.Status.SENDING]),
        ):
            for kind in (CrowdPayment.Kind.APPROVE, CrowdPayment.Kind.BONUS):
                total = mine.filter(kind=kind, status__in=statuses).aggregate(s=Sum("amount"))["s"]
                # SQLite sums decimals as floats: back to cents
                row[f"{label}_{kind}"] = Decimal(str(total or 0)).quantize(CENT)
            row[label] = row[f"{label}_approve"] + row[f"{label}_bonus"]
        rows.append(row)
    return rows


# --- the job ------------------------------------------------------------------------------------------------------


def _send_mturk(payment: CrowdPayment, client) -> None:
    session = payment.session
    if payment.kind == CrowdPayment.Kind.APPROVE:
        mturk.approve(client, session.session_key)
    elif payment.kind == CrowdPayment.Kind.REJECT:
        mturk.reject(client, session.session_key, payment.reason)
    elif payment.kind == CrowdPayment.Kind.BONUS:
        mturk.bonus(client, session.worker_id, session.session_key, str(payment.amount), payment.reason, payment.token)
    else:
        mturk.block(client, session.worker_id, payment.reason)


def _send_prolific(payment: CrowdPayment, client: prolific.Client) -> None:
    session = payment.session
    if payment.kind == CrowdPayment.Kind.APPROVE:
        client.approve(session.session_key)
    elif payment.kind == CrowdPayment.Kind.REJECT:
        client.reject(session.session_key, payment.reason, payment.category)
    else:  # a bonus: set up, recorded, then paid once (Prolific's pay call is not idempotent)
        bulk_id = client.set_up_bonus(session.link.site_study_id, session.session_key, payment.amount)
        CrowdPayment.objects.filter(pk=payment.pk).update(site_reference=bulk_id)
        client.pay_bonus(bulk_id)


def _site_words(exc: Exception) -> str:
    from botocore.exceptions import BotoCoreError, ClientError

    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"MTurk refused: {error.get('Code')}: {error.get('Message')}"
    if isinstance(exc, BotoCoreError):
        return f"MTurk could not be reached: {exc}"
    return str(exc)


def pay_job(job, progress) -> str:
    """Send every queued action of the job's study, oldest first; each ends DONE or FAILED with the site's words."""
    from botocore.exceptions import BotoCoreError, ClientError

    study = job.study
    others = Job.objects.filter(study=study, kind=KIND, status=Job.Status.RUNNING).exclude(pk=job.pk)
    # rows left SENDING by a job that is no longer running (another running job's rows are its own)
    died = (
        CrowdPayment.objects.none()
        if others.exists()
        else CrowdPayment.objects.filter(study=study, status=CrowdPayment.Status.SENDING)
    )
    for payment in died.select_related("session__link"):
        site = payment.session.link.get_platform_display()
        CrowdPayment.objects.filter(pk=payment.pk, status=CrowdPayment.Status.SENDING).update(
            status=CrowdPayment.Status.FAILED, problem=DIED_SENDING.format(site=site)
        )
    queued = list(
        CrowdPayment.objects.filter(study=study, status=CrowdPayment.Status.QUEUED)
        .select_related("session__link")
        .order_by("id")
    )
    clients: dict[tuple[str, bool], Any] = {}

    def client_for(payment: CrowdPayment):
        key = (payment.session.link.platform, payment.sandbox)
        if key not in clients:
            make: Callable[[], Any] = (
                (lambda: mturk.make_client(payment.sandbox))
                if key[0] == ExternalLink.Platform.MTURK
                else prolific.Client
            )
            clients[key] = make()
        return clients[key]

    done = failed = 0
    for index, payment in enumerate(queued):
        progress(index, len(queued))
        claimed = CrowdPayment.objects.filter(pk=payment.pk, status=CrowdPayment.Status.QUEUED).update(
            status=CrowdPayment.Status.SENDING
        )
        if not claimed:  # another job of the study took it
            continue
        platform = payment.session.link.platform
        try:
            client = client_for(payment)
            (_send_mturk if platform == ExternalLink.Platform.MTURK else _send_prolific)(payment, client)
        except (ClientError, BotoCoreError, ServiceError) as exc:
            CrowdPayment.objects.filter(pk=payment.pk, status=CrowdPayment.Status.SENDING).update(
                status=CrowdPayment.Status.FAILED, problem=_site_words(exc)[:2000], sent=timezone.now()
            )
            failed += 1
            continue
        CrowdPayment.objects.filter(pk=payment.pk, status=CrowdPayment.Status.SENDING).update(
            status=CrowdPayment.Status.DONE, sent=timezone.now()
        )
        site_status = DONE_STATUS.get((platform, payment.kind))
        if site_status:
            WorkerSession.objects.filter(pk=payment.session_id).update(platform_status=site_status)
        if payment.kind == CrowdPayment.Kind.BLOCK:  # no more work in the owner's studies either
            sites.do_block_worker(study.owner, platform, payment.session.worker_id, payment.reason)
        done += 1
    progress(len(queued), len(queued))
    return f"{done} sent, {failed} failed"
