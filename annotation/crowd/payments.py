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

import re
import secrets
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
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
TOKEN = re.compile(r"[A-Za-z0-9_-]{8,32}")  # a form's token (new_token), or a row's default (new_nonce)
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
        problems["session"] = [
            "This link has no Prolific study id, so SepLab cannot check the submission is this study's on Prolific: "
            "create a Prolific link with the study id."
        ]
    if problems:
        raise FieldErrors(problems)
    return fields


def new_token() -> str:
    """The token a payment form carries (one per form shown): the row it queues keeps it, unique, so the same form
    sent twice (a double click, a second tab, a reload) queues one action; MTurk's bonus is sent with it too."""
    return secrets.token_hex(16)


@transaction.atomic
def do_queue(
    study: Study,
    session: WorkerSession,
    kind: str,
    amount: Any,
    reason: str,
    category: str,
    by: User | None,
    token: str | None = None,
) -> CrowdPayment:
    """Check an action on a worker's submission and queue it for the worker to send (one ``crowd_pay`` job sends
    every queued action of the study). Refused by field (``FieldErrors``), nothing queued: an action already queued
    from the same form (``token``), and an approve or reject already queued or done for the submission (checked under
    the session's row lock, so two requests at once cannot both pass)."""
    fields = check_action(study, session, kind, amount, reason, category)
    WorkerSession.objects.select_for_update().filter(pk=session.pk).first()  # one action at a time per submission
    token = token or new_token()
    if not TOKEN.fullmatch(token):
        raise FieldErrors({"token": ["Not a form's token: reload the page and ask again."]})
    if CrowdPayment.objects.filter(token=token).exists():
        raise FieldErrors({"token": ["This form was sent already: the action is queued once (see the ledger)."]})
    if kind in (CrowdPayment.Kind.APPROVE, CrowdPayment.Kind.REJECT):
        earlier = (
            CrowdPayment.objects.filter(session=session, kind__in=(CrowdPayment.Kind.APPROVE, CrowdPayment.Kind.REJECT))
            .exclude(status=CrowdPayment.Status.FAILED)
            .first()
        )
        if earlier is not None:
            done = "approved" if earlier.kind == CrowdPayment.Kind.APPROVE else "rejected"
            state = earlier.get_status_display().lower()
            raise FieldErrors({"kind": [f"This submission is already {done} ({state})."]})
    try:
        with transaction.atomic():
            payment = CrowdPayment.objects.create(study=study, session=session, by=by, token=token, **fields)
    except IntegrityError:  # the same token sent for another submission at the same moment
        raise FieldErrors(
            {"token": ["This form was sent already: the action is queued once (see the ledger)."]}
        ) from None
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
    """The money per site (one grouped query): what was paid (done) and what is still to send (queued or being sent),
    approvals and bonuses apart; MTurk's sandbox counts no real money and is left out."""
    sums = (
        CrowdPayment.objects.filter(study=study, sandbox=False, amount__isnull=False)
        .values_list("session__link__platform", "kind", "status")
        .annotate(total=Sum("amount"))
        .order_by()
    )
    rows: dict[str, dict[str, Any]] = {}
    for platform, kind, status, total in sums:
        row = rows.setdefault(
            platform,
            {
                "platform": platform,
                **{f"{w}_{k}": Decimal("0.00") for w in ("paid", "to_send") for k in ("approve", "bonus")},
            },
        )
        if kind in (CrowdPayment.Kind.APPROVE, CrowdPayment.Kind.BONUS) and status != CrowdPayment.Status.FAILED:
            label = "paid" if status == CrowdPayment.Status.DONE else "to_send"
            # SQLite sums decimals as floats: back to cents
            row[f"{label}_{kind}"] += Decimal(str(total or 0)).quantize(CENT)
    for row in rows.values():
        row["paid"], row["to_send"] = (
            row["paid_approve"] + row["paid_bonus"],
            row["to_send_approve"] + row["to_send_bonus"],
        )
    return [rows[p] for p in PLATFORMS if p in rows]


# --- the job ------------------------------------------------------------------------------------------------------


class NotThisStudys(ServiceError):
    """The site says the submission is not one of this study's: nothing was sent."""


def _check_mturk(payment: CrowdPayment, client) -> None:
    """The assignment, as MTurk knows it, is one of this study's HITs and its worker's (ids in a crowd link come
    from the worker's address bar, and the requester account is the server's, shared by every study)."""
    session = payment.session
    found = client.get_assignment(AssignmentId=session.session_key)["Assignment"]
    hits = set(MTurkHIT.objects.filter(study_id=payment.study_id).values_list("hit_id", flat=True))
    if found.get("HITId") not in hits or found.get("WorkerId") != session.worker_id:
        raise NotThisStudys(
            f"MTurk's assignment {session.session_key} is not one of this study's HITs by worker "
            f"{session.worker_id}: nothing was sent."
        )


def _check_prolific(payment: CrowdPayment, client: prolific.Client) -> None:
    """The submission, as Prolific knows it, is in the link's Prolific study and by its participant."""
    session = payment.session
    found = client.submission(session.session_key)
    participant = found.get("participant", found.get("participant_id"))  # "participant" in a submission's own answer
    if found.get("study_id") != session.link.site_study_id or participant != session.worker_id:
        raise NotThisStudys(
            f"Prolific's submission {session.session_key} is not in study {session.link.site_study_id} by participant "
            f"{session.worker_id}: nothing was sent."
        )


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


UNKNOWN = (
    "Outcome unknown ({words}): the site may or may not have done it. Check the submission on the site before asking "
    "again."
)


def _site_words(exc: Exception, sent: bool) -> str:
    """What the ledger says of a failure: the site's words, and -- once the action itself was sent (``sent``) -- that
    its outcome is unknown unless the site surely did nothing: a refusal (MTurk's client error on the first attempt;
    Prolific's 4xx). A server error, a timeout, an answer cut off or a request botocore retried (the first may have
    been done: MTurk then refuses the repeat) may have been done."""
    from botocore.exceptions import ClientError

    words = f"{type(exc).__name__}: {exc}"
    refused = False
    if isinstance(exc, ClientError):
        error, meta = exc.response.get("Error", {}), exc.response.get("ResponseMetadata", {})
        words = f"MTurk refused: {error.get('Code')}: {error.get('Message')}"
        refused = (
            meta.get("HTTPStatusCode", 400) < 500
            and error.get("Code") != "ServiceFault"
            and not meta.get("RetryAttempts")
        )
    elif isinstance(exc, prolific.ProlificError):
        words, refused = str(exc), exc.status is not None and 400 <= exc.status < 500
    elif isinstance(exc, ServiceError):
        words, refused = str(exc), True  # SepLab's own check: nothing was asked of the site
    if not sent:
        return f"{words} (nothing was sent)" if not isinstance(exc, NotThisStudys) else words
    return words if refused else UNKNOWN.format(words=words)


def pay_job(job, progress) -> str:
    """Send every queued action of the job's study, oldest first, each once the site confirms the submission is this
    study's; each ends DONE, or FAILED with the site's words (a refusal, or an outcome the site left unknown)."""
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
        mturk_site = platform == ExternalLink.Platform.MTURK
        sent = False  # until the action itself is asked: a failure before it did nothing on the site
        try:
            client = client_for(payment)
            (_check_mturk if mturk_site else _check_prolific)(payment, client)
            sent = True
            (_send_mturk if mturk_site else _send_prolific)(payment, client)
        except Exception as exc:  # noqa: BLE001 -- every row ends, whatever the site or the network did
            words = _site_words(exc, sent)
            CrowdPayment.objects.filter(pk=payment.pk, status=CrowdPayment.Status.SENDING).update(
                status=CrowdPayment.Status.FAILED, problem=words[:2000], sent=timezone.now()
            )
            failed += 1
            continue
        ended = CrowdPayment.objects.filter(pk=payment.pk, status=CrowdPayment.Status.SENDING).update(
            status=CrowdPayment.Status.DONE, sent=timezone.now()
        )
        if not ended:  # the stale-job sweep failed it meanwhile: its words stand, nothing more is written
            continue
        site_status = DONE_STATUS.get((platform, payment.kind))
        if site_status:
            WorkerSession.objects.filter(pk=payment.session_id).update(platform_status=site_status)
        if payment.kind == CrowdPayment.Kind.BLOCK:  # no more work in the owner's studies either
            sites.do_block_worker(study.owner, platform, payment.session.worker_id, payment.reason)
        done += 1
    progress(len(queued), len(queued))
    return f"{done} sent, {failed} failed"
