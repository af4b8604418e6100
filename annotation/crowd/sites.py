"""Workers arriving from crowdsourcing sites: the MTurk ExternalQuestion protocol (usable by any
compatible site), Prolific, and a generic completion-code profile.

A worker's visit is a ``WorkerSession`` keyed by the site's own id for it (MTurk ``assignmentId``,
Prolific ``SESSION_ID``), so reloading or reopening the link resumes the same assignment. The
rater's authority travels in signed URLs, never in cookies, because sites frame our pages and
browsers block third-party cookies in frames.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from html import escape
from typing import TYPE_CHECKING, cast
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy

from annotation.errors import ServiceError
from annotation.models import (
    Assignment,
    BlockedWorker,
    ExternalLink,
    Rater,
    Study,
    WorkerSession,
)
from annotation.ratelimit import WIDER_NETWORKS, allow, client_key, client_networks
from annotation.rating import allocation, practice
from annotation.text import whole_number

if TYPE_CHECKING:
    from django_stubs_ext import StrPromise

PREVIEW_ASSIGNMENT = "ASSIGNMENT_ID_NOT_AVAILABLE"


# What researchers paste into the site: our link with the site's placeholders where it has them.
PLACEHOLDERS: dict[str, str] = {
    ExternalLink.Platform.PROLIFIC: (
        "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    ),
    ExternalLink.Platform.GENERIC: "worker_id=WORKER_ID",
}


# The names sites and researchers put where a worker's id goes, as the link shows them before a site fills them in
# (ours above, Prolific's, MTurk's and the usual spellings of others): an id that is one of these, or still holds a
# template's brackets, is a link opened as it was pasted, never a person.
PLACEHOLDER_NAMES = {
    "WORKERID",
    "WORKER",
    "PROLIFICPID",
    "SESSIONID",
    "STUDYID",
    "PARTICIPANTID",
    "PARTICIPANT",
    "PID",
    "USERID",
    "RESPONDENTID",
    "ASSIGNMENTID",
    "HITID",
    "ID",
    "YOURID",
    "NONE",
    "NULL",
    "UNDEFINED",
}
TEMPLATE_MARKS = ("{{", "}}", "%%", "${", "[[", "]]", "<", ">", "{", "}")


def placeholder(value: str) -> bool:
    """Whether a worker or session id is a placeholder left in the link rather than a site's real id."""
    bare = "".join(c for c in value.upper() if c.isalnum())
    return bare in PLACEHOLDER_NAMES or any(mark in value for mark in TEMPLATE_MARKS)


# The most characters of an id a site puts in the link (a worker, a session, a HIT, a study, the submit address):
# MTurk's and Prolific's are 13 to 40; a longer one is refused, never cut. It leaves room for the platform prefix of
# a crowd worker's rater id (``prolific:``) and a generic session's (``worker:``) in their 200-character columns.
MAX_ID_CHARS = 150


@dataclasses.dataclass(frozen=True)
class Arrival:
    platform: str
    worker_id: str
    session_key: str
    hit_id: str = ""
    submit_to: str = ""
    preview: bool = False


def parse_arrival(link: ExternalLink, params) -> Arrival:
    """The worker's identity from the site's query parameters; ``ServiceError`` says what is missing, or that an id
    is still the link's placeholder (the link was opened as it was pasted, not from the site)."""

    def get(name: str) -> str:
        value = (params.get(name) or "").strip()
        if len(value) > MAX_ID_CHARS:  # never cut: a cut id could be another worker's, and stored ids must fit
            raise ServiceError(
                gettext(
                    "The link's %(name)s is %(length)d characters long, longer than any site's ids (at most "
                    "%(most)d): open the task from the site that sent you, or ask the researcher for your own link."
                )
                % {"name": name, "length": len(value), "most": MAX_ID_CHARS}
            )
        return value

    def real(name: str, *, required: bool = True) -> str:
        value = get(name)
        if value and placeholder(value):
            raise ServiceError(
                gettext(
                    "This link still holds the placeholder %(value)s where the site puts your "
                    "%(name)s: open the task from the site that sent you (it fills in your id), or "
                    "ask the researcher for your own link."
                )
                % {"value": repr(value), "name": name}
            )
        if required and not value:
            raise ServiceError(str(MISSING[link.platform]))
        return value

    if link.platform == ExternalLink.Platform.MTURK:
        assignment_id = get("assignmentId")
        if assignment_id == PREVIEW_ASSIGNMENT or not assignment_id:
            return Arrival(link.platform, get("workerId"), "", get("hitId"), preview=True)
        worker = real("workerId")
        real("assignmentId")
        submit_to = get("turkSubmitTo").rstrip("/")
        if submit_to and submit_to not in settings.SEPLAB_TURK_SUBMIT_HOSTS:
            raise ServiceError(gettext("The link's turkSubmitTo is not a site this study submits to."))
        return Arrival(link.platform, worker, assignment_id, get("hitId"), submit_to)
    if link.platform == ExternalLink.Platform.PROLIFIC:
        worker, session = real("PROLIFIC_PID"), real("SESSION_ID")
        return Arrival(link.platform, worker, session, real("STUDY_ID", required=False))
    worker = real("worker_id")
    return Arrival(link.platform, worker, real("session_id", required=False) or f"worker:{worker}")


MISSING: dict[str, StrPromise] = {
    ExternalLink.Platform.MTURK: gettext_lazy("The link is missing workerId; open it from the HIT page."),
    ExternalLink.Platform.PROLIFIC: gettext_lazy(
        "The link is missing PROLIFIC_PID or SESSION_ID; open it from Prolific."
    ),
    ExternalLink.Platform.GENERIC: gettext_lazy(
        "The link is missing worker_id (your id on the site that sent you here)."
    ),
}


def is_blocked(study: Study, platform: str, worker_id: str) -> bool:
    return BlockedWorker.objects.filter(owner_id=study.owner_id, platform=platform, worker_id=worker_id).exists()


ANOTHER_WORKER = gettext_lazy(
    "This task was opened by another worker. Open the study from your own task page on the site."
)
OTHER_SESSION = gettext_lazy("You are already working on this study in another task. Finish or return that one first.")


class OtherSessionActive(ServiceError):
    """The worker already works on this study through another HIT / session."""


class SessionOfAnotherWorker(ServiceError):
    """A visit brought a session id that belongs to another worker."""


class TooManyNewWorkers(ServiceError):
    """A link, or one client on it, started new worker sessions faster than people do."""


# New worker sessions a link accepts per client (a person starts one; a few share an address, an IPv6 /64 is one
# client); in all, the link's launch limit per minute (ExternalLink.launch_limit: a crowd site's launch brings
# hundreds of people in minutes). A client over its own limit is refused before it counts against the link's, and a
# client's own limit is at most half the link's, so one client never fills the link's cap.
NEW_WORKERS_PER_CLIENT = (10, 600)
# An IPv6 client's /56 and /48 in the same window: their share of clients' allowances (ratelimit.WIDER_NETWORKS), so
# addresses spread over the /64s of one site count together.
NEW_WORKERS_PER_NETWORK = {prefix: NEW_WORKERS_PER_CLIENT[0] * share for prefix, share in WIDER_NETWORKS.items()}
# What the workers of one link who have not answered yet may hold (the link's cap, an IPv6 /56's and /48's share) is
# checked where their assignments start: annotation/rating/holds.py.


# What the crowd page calls faster than people: this many new workers on a link within one minute.
MINT_WARNING_PER_MINUTE = 10


REFUSED_WINDOW = 3600  # how long the crowd page remembers workers the launch limit turned away


def _allow_new_worker(link: ExternalLink, client: str) -> None:
    from django.core.cache import cache

    limit = link.launch_limit
    per_client, window = NEW_WORKERS_PER_CLIENT
    if limit:  # a link with a small cap: one client gets at most half of it (at least one new worker)
        per_client = min(per_client, max(1, limit // 2))
    # the narrowest first: a network over its allowance counts no further; a wider one gets its share of clients'
    # allowances, and at most half the link's too
    for network, share in client_networks(client):
        most = per_client if share == 1 else NEW_WORKERS_PER_CLIENT[0] * share
        if limit and share > 1:
            most = min(most, max(per_client, limit // 2))
        if not allow(f"new-worker:{link.pk}:{network}", most, window):
            raise TooManyNewWorkers(
                gettext(
                    "Too many new workers are arriving from your network through this link; "
                    "please try again in a few minutes."
                )
            )
    if limit and not allow(f"new-worker:{link.pk}", limit, 60):
        key = f"launch-refused:{link.pk}"
        if not cache.add(key, 1, timeout=REFUSED_WINDOW):
            try:
                cache.incr(key)
            except ValueError:
                cache.set(key, 1, timeout=REFUSED_WINDOW)
        raise TooManyNewWorkers(
            gettext("Too many new workers are arriving through this link right now; please try again in a minute.")
        )


def launch_refusals(link: ExternalLink) -> int:
    """New workers the link's launch limit turned away within the last hour (or since the counter was made)."""
    from django.core.cache import cache

    return int(cache.get(f"launch-refused:{link.pk}") or 0)


def do_set_launch_limit(link: ExternalLink, value: str) -> None:
    """The link's own launch limit: a whole number of new workers per minute (0: none), or empty for the server's
    default."""
    text = value.strip()
    if not text:
        link.launch_per_minute = None
    else:
        if (number := whole_number(text)) is None or number > 100_000:
            raise ServiceError(
                "The launch limit must be a whole number of new workers per minute from 0 "
                "(no limit) to 100,000, or empty for the server's default."
            )
        link.launch_per_minute = int(text)
    link.save(update_fields=["launch_per_minute"])


def do_accept(link: ExternalLink, arrival: Arrival, client: str = "") -> WorkerSession:
    """The worker's session for this visit (resumed when it exists), bound to an assignment when there
    is work. Idempotent: the same visit never creates a second session or assignment. A session belongs to
    the worker who opened it: another worker bringing its id (an assignmentId or session_id they learnt)
    gets nothing of it."""
    session = (
        WorkerSession.objects.filter(link=link, session_key=arrival.session_key)
        .select_related("assignment", "rater")
        .first()
    )
    if session is not None and session.worker_id != arrival.worker_id:
        raise SessionOfAnotherWorker(str(ANOTHER_WORKER))
    if session is None:
        if (
            link.platform == ExternalLink.Platform.PROLIFIC
            and link.site_study_id
            and arrival.hit_id != link.site_study_id
        ):
            raise ServiceError(gettext("This link belongs to another Prolific study (STUDY_ID does not match)."))
        _allow_new_worker(link, client)  # only new sessions count: a worker coming back is never refused
        network = client_key(client) if client else ""
        rater, _ = Rater.objects.get_or_create(
            study=link.study,
            external_id=f"{link.platform}:{arrival.worker_id}",
            defaults={"source": Rater.Source.EXTERNAL, "kind": Rater.Kind.HUMAN, "client": network},
        )
        if rater.client != network and Assignment.objects.filter(rater=rater, status=Assignment.Status.ACTIVE).exists():
            network = rater.client  # an open assignment counts where it started (moving it would free that network)
        if rater.source != Rater.Source.EXTERNAL or rater.client != network:
            # The same worker id was already known (imported judgments, or a personal link named like a
            # platform id): they now work through a crowdsourcing site, whose completion they must see. A worker
            # coming back from another network with nothing open counts there now.
            Rater.objects.filter(pk=rater.pk).update(source=Rater.Source.EXTERNAL, client=network)
            rater.source, rater.client = Rater.Source.EXTERNAL, network
        try:
            with transaction.atomic():
                session = WorkerSession.objects.create(
                    link=link,
                    rater=rater,
                    worker_id=arrival.worker_id,
                    session_key=arrival.session_key,
                    hit_id=arrival.hit_id,
                    submit_to=arrival.submit_to,
                )
        except IntegrityError:  # the same visit arrived twice at once
            session = WorkerSession.objects.select_related("assignment", "rater").get(
                link=link, session_key=arrival.session_key
            )
            if session.worker_id != arrival.worker_id:
                raise SessionOfAnotherWorker(str(ANOTHER_WORKER)) from None
    if session.assignment is None and practice.due(session.rater):
        return session  # no places are held while the worker practises: the entry starts their work afterwards
    if session.assignment is None or session.assignment.status == Assignment.Status.EXPIRED:
        active = Assignment.objects.filter(rater=session.rater, status=Assignment.Status.ACTIVE).first()
        if active is not None and WorkerSession.objects.filter(assignment=active).exclude(pk=session.pk).exists():
            raise OtherSessionActive(str(OTHER_SESSION))
        # a new assignment is attached to the session in the start's own transaction; the worker's open assignment
        # (one without a session: started on their own start page) is attached here
        assignment = allocation.do_start_assignment(session.rater, session)
        if assignment is not None and session.assignment != assignment:
            try:
                with transaction.atomic():  # the database holds one session per assignment
                    WorkerSession.objects.filter(pk=session.pk).update(assignment=assignment)
            except IntegrityError:  # another session of this worker took it a moment earlier
                raise OtherSessionActive(str(OTHER_SESSION)) from None
            session.assignment = assignment
    return session


def worker_consented(link: ExternalLink, arrival: Arrival) -> bool:
    """Whether the arriving worker already agreed to the study's consent text (on an earlier visit)."""
    return Rater.objects.filter(
        study=link.study_id, external_id=f"{link.platform}:{arrival.worker_id}", consented_at__isnull=False
    ).exists()


def entry_return(url: str | None) -> str:
    """``url`` when it is a crowd entry address of this site (where a worker goes back to after the practice round,
    with the site's parameters), else "" -- never another site (an open redirect)."""
    from django.urls import Resolver404, resolve

    if not url:
        return ""
    parts = urlsplit(url)
    if parts.scheme or parts.netloc or not url.startswith("/") or url.startswith("//"):
        return ""
    try:
        return url if resolve(parts.path).url_name == "external_entry" else ""
    except Resolver404:
        return ""


def minting_warnings(study: Study) -> dict[int, int]:
    """Link id -> the most new worker sessions it started within any one minute of the last hour, for links
    that started at least ``MINT_WARNING_PER_MINUTE`` (faster than people arrive: likely invented ids)."""
    since = timezone.now() - timedelta(hours=1)
    times: dict[int, list] = {}
    for link_id, created in (
        WorkerSession.objects.filter(link__study=study, created__gte=since)
        .order_by("created")
        .values_list("link_id", "created")
    ):
        times.setdefault(link_id, []).append(created)
    out = {}
    for link_id, stamps in times.items():
        most, start = 0, 0
        for end, stamp in enumerate(stamps):
            while stamp - stamps[start] > timedelta(minutes=1):
                start += 1
            most = max(most, end - start + 1)
        if most >= MINT_WARNING_PER_MINUTE:
            out[link_id] = most
    return out


def session_for(assignment: Assignment) -> WorkerSession | None:
    return WorkerSession.objects.filter(assignment=assignment).select_related("link").first()


def completion(session: WorkerSession, rater: Rater) -> dict:
    """How the finished worker is sent back to their site, with the completion (or screening) code."""
    link = session.link
    screened = rater.screened_out
    # the session of the assignment its worker finished (``session_for``): its assignment is set
    code = link.screened_code if screened else cast(Assignment, session.assignment).completion_code
    out = {"platform": link.platform, "code": code, "screened": screened}
    if link.platform == ExternalLink.Platform.MTURK and session.submit_to:
        out["submit_url"] = f"{session.submit_to}/mturk/externalSubmit"
        out["assignment_id"] = session.session_key
    elif link.platform == ExternalLink.Platform.PROLIFIC:
        out["redirect_url"] = settings.PROLIFIC_COMPLETE_URL.format(code=code)
    return out


def link_url(link: ExternalLink, base_url: str) -> str:
    url = base_url.rstrip("/") + link.path()
    placeholders = PLACEHOLDERS.get(link.platform)
    return f"{url}?{placeholders}" if placeholders else url


def external_question_xml(url: str, frame_height: int = 0) -> str:
    """The MTurk ExternalQuestion for our URL (XML-escaped, so '&' becomes '&amp;'). MTurk requires HTTPS."""
    if urlsplit(url).scheme != "https":
        raise ServiceError("MTurk's ExternalQuestion needs an https address, and this link's is not")
    return (
        '<ExternalQuestion xmlns="http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/'
        '2006-07-14/ExternalQuestion.xsd">\n'
        f"  <ExternalURL>{escape(url, quote=False)}</ExternalURL>\n"
        f"  <FrameHeight>{int(frame_height)}</FrameHeight>\n"
        "</ExternalQuestion>"
    )


def do_create_external_link(study: Study, platform: str, site_study_id: str = "") -> ExternalLink:
    if platform not in ExternalLink.Platform.values:
        raise ServiceError("Choose a platform.")
    site_study_id = site_study_id.strip()
    if len(site_study_id) > 100:
        raise ServiceError("The Prolific study id has at most 100 characters.")
    prolific = platform == ExternalLink.Platform.PROLIFIC
    return ExternalLink.objects.create(study=study, platform=platform, site_study_id=site_study_id if prolific else "")


def do_block_worker(owner: User, platform: str, worker_id: str, reason: str = "") -> BlockedWorker:
    """Keep a crowd worker out of all of ``owner``'s studies."""
    worker_id = worker_id.strip()
    if platform not in ExternalLink.Platform.values or not worker_id:
        raise ServiceError("Give the platform and the worker id to block.")
    if len(worker_id) > MAX_ID_CHARS:
        raise ServiceError(f"A worker id has at most {MAX_ID_CHARS} characters (this one has {len(worker_id):,}).")
    blocked, _ = BlockedWorker.objects.get_or_create(
        owner=owner, platform=platform, worker_id=worker_id, defaults={"reason": reason[:300]}
    )
    return blocked


def do_unblock_worker(blocked: BlockedWorker) -> None:
    blocked.delete()
