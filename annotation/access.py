"""Every permission decision lives here: the views of all three apps and the API ask one ``access_*`` function
before they read or change anything.

Researchers see their own studies and the studies they are members of; raters are identified by signed links and
see only their own assignments. A study's team (``annotation.models.team``): its owner holds every right; a member
holds a role, and what each role may do is ``PERMISSIONS``. Someone outside the study gets a 404, so nobody learns what
exists behind it; a member asking for more than their role allows gets a 403 that names the role needed.
"""

from __future__ import annotations

from typing import cast

from django.contrib.auth.models import User
from django.core import signing
from django.core.exceptions import PermissionDenied
from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.http import Http404, HttpRequest
from django.shortcuts import get_object_or_404
from rest_framework.authtoken.models import Token

from annotation import study_settings
from annotation.compiled import CompiledQuery, instance, model_columns
from annotation.http import RaterRequest
from annotation.models import (
    EXTERNAL_LINK_SALT,
    OPEN_LINK_SALT,
    OWNER,
    RATER_TOKEN_SALT,
    Assignment,
    AssignmentPair,
    Battle,
    BlockedWorker,
    CrowdSettings,
    ExternalLink,
    Item,
    Job,
    Judge,
    Judgment,
    Membership,
    Rater,
    Role,
    Study,
    SystemEndpoint,
    WorkerSession,
)

SESSION_RATERS = "seplab_open_link_raters"

# What a study's team may do. VIEW: read every page, the report, the API and every export. REVIEW: rule on the
# review queue. CHANGE: everything else that changes the study (settings, raters, links, judges, systems, runs,
# crowd work and payments). MANAGE: the team itself, and deleting the study.
VIEW, REVIEW, CHANGE, MANAGE = "view", "review", "change", "manage"
PERMISSIONS: dict[str, frozenset[str]] = {
    OWNER: frozenset({VIEW, REVIEW, CHANGE, MANAGE}),
    Role.EDITOR: frozenset({VIEW, REVIEW, CHANGE}),
    Role.REVIEWER: frozenset({VIEW, REVIEW}),
    Role.VIEWER: frozenset({VIEW}),
}
ROLE_NEEDED = {REVIEW: "a reviewer's or an editor's", CHANGE: "an editor's", MANAGE: "the owner's"}
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def studies_for(user: User) -> QuerySet[Study]:
    """Every study the user owns or is a member of, each with the member's role read in the same query
    (``member_role``: a ``Role``, or None on the user's own studies; ``role_of`` reads it)."""
    member = Membership.objects.filter(study=OuterRef("pk"), user=user).values("role")[:1]
    return Study.objects.filter(
        Q(owner=user) | Q(pk__in=Membership.objects.filter(user=user).values("study"))
    ).annotate(member_role=Subquery(member))


def role_of(user: User, study: Study) -> str | None:
    """The user's role in the study: ``OWNER``, a ``Role``, or None when they are outside it."""
    if study.owner_id == user.pk:
        return OWNER
    if "member_role" in study.__dict__:  # read with the study by studies_for
        return study.__dict__["member_role"]
    return Membership.objects.filter(study=study, user=user).values_list("role", flat=True).first()


def check_may(user: User, study: Study, need: str) -> str:
    """The user's role, when it allows ``need``; else 403 naming the role needed (404 outside the study)."""
    role = role_of(user, study)
    if role is None:
        raise Http404("No such study.")
    if need not in PERMISSIONS[role]:
        article = "an" if role[0] in "aeiou" else "a"
        raise PermissionDenied(
            f"You are {article} {role} of this study: this needs {ROLE_NEEDED[need]} role. Ask the study's owner."
        )
    return role


def api_token_for(user: User) -> Token | None:
    """The researcher's own API token, if they made one."""
    return Token.objects.filter(user=user).first()


def blocked_workers_for(user: User) -> QuerySet[BlockedWorker]:
    """The crowd workers a researcher keeps out of all their studies."""
    return BlockedWorker.objects.filter(owner=user)


def _researcher(request: HttpRequest) -> User:
    """The logged-in researcher a researcher page or API call is made by."""
    # Every view that asks an access_* function about a researcher's objects is behind login_required (the API
    # behind IsAuthenticated), so the user is never AnonymousUser here; the views of all three apps pass Django's
    # plain HttpRequest, whose user the stubs type as User | AnonymousUser.
    return cast(User, request.user)


def access_study(request: HttpRequest, study_id: int, need: str | None = None) -> Study:
    """The study, if the logged-in researcher owns it or is a member, with every app's settings row and their role
    (one query). ``need``: what the request does (``VIEW``, ``REVIEW``, ``CHANGE``, ``MANAGE``); by default, a GET
    reads (``VIEW``) and any other method changes (``CHANGE``). The role is kept on the request (``study_role``)
    for the page to say, and what it allows (``study_may``) for the page to offer."""
    user = _researcher(request)
    study = get_object_or_404(studies_for(user).select_related(*study_settings.GROUPS), pk=study_id)
    role = check_may(user, study, need or (VIEW if request.method in SAFE_METHODS else CHANGE))
    request.study_role, request.study_may = role, PERMISSIONS[role]  # type: ignore[attr-defined]
    return study


def access_item(request: HttpRequest, study_id: int, item_id: int) -> tuple[Study, Item]:
    study = access_study(request, study_id)
    return study, get_object_or_404(study.items, pk=item_id)


def access_member(request: HttpRequest, study_id: int, member_id: int) -> tuple[Study, Membership]:
    """A member of the study's team, for its owner to change or remove (``MANAGE``)."""
    study = access_study(request, study_id, MANAGE)
    membership = get_object_or_404(study.memberships.select_related("user"), pk=member_id)
    membership.study = study
    return study, membership


def access_worker_session(request: HttpRequest, study_id: int, session_id: object) -> tuple[Study, WorkerSession]:
    """A crowd worker's session of the study on a site SepLab pays through (MTurk or Prolific), for paying it (404
    otherwise: another study's, or a generic link's)."""
    study = access_study(request, study_id)
    if not isinstance(session_id, str) or not session_id.isdigit():
        raise Http404("No such worker session.")
    session = get_object_or_404(
        WorkerSession.objects.select_related("link", "rater"),
        pk=int(session_id),
        link__study=study,
        link__platform__in=(ExternalLink.Platform.MTURK, ExternalLink.Platform.PROLIFIC),
    )
    session.link.study = study
    return study, session


def access_study_rater(request: HttpRequest, study_id: int, rater_id: int) -> tuple[Study, Rater]:
    """A rater of the researcher's study (their personal link, as the researcher manages it)."""
    study = access_study(request, study_id)
    return study, get_object_or_404(study.raters, pk=rater_id)


def access_study_external_link(request: HttpRequest, study_id: int, link_id: int) -> tuple[Study, ExternalLink]:
    study = access_study(request, study_id)
    return study, get_object_or_404(study.external_links, pk=link_id)


def access_judge(request: HttpRequest, study_id: int, judge_id: int) -> Judge:
    """An LLM judge of the researcher's study, with its study and rater."""
    study = access_study(request, study_id)
    return get_object_or_404(Judge.objects.select_related("study", "rater"), pk=judge_id, study=study)


def access_system_endpoint(request: HttpRequest, study_id: int, endpoint_id: int) -> SystemEndpoint:
    """A system of the researcher's study whose outputs are generated from an endpoint, with its system and study."""
    study = access_study(request, study_id)
    endpoint = get_object_or_404(SystemEndpoint.objects.select_related("system"), pk=endpoint_id, system__study=study)
    endpoint.system.study = study  # the one already read, with its settings rows
    return endpoint


def access_job(request: HttpRequest, study_id: int, job_id: int) -> tuple[Study, Job]:
    study = access_study(request, study_id)
    return study, get_object_or_404(Job, pk=job_id, study=study)


def access_blocked_worker(request: HttpRequest, study_id: int, block_id: int) -> tuple[Study, BlockedWorker]:
    """An entry of the blocklist that applies to the study, for its owner to lift (``MANAGE``): the list spans all of
    the owner's studies, so an editor of one adds to it (a worker kept out) but neither reads nor lifts it."""
    study = access_study(request, study_id, MANAGE)
    return study, get_object_or_404(blocked_workers_for(study.owner), pk=block_id)


def _rater_token(token: str) -> dict:
    try:
        payload = signing.Signer(salt=RATER_TOKEN_SALT).unsign_object(token)
        if not isinstance(payload, dict) or not isinstance(payload.get("r"), int):
            raise TypeError
    except (signing.BadSignature, TypeError, ValueError):
        raise Http404("This rater link is not valid.") from None
    return payload


def _check_nonce(rater: Rater, payload: dict) -> None:
    """A link works while its nonce is the rater's: rotating or revoking a link (annotation/studies/enrolment.py)
    gives the rater a new one, so the old link stops at once, on every page and submit."""
    if rater.revoked or rater.token_nonce != payload.get("n"):
        raise Http404("This rater link is no longer valid.")


def access_rater(token: str) -> Rater:
    """The rater a personal link belongs to; revoked or forged links are 404."""
    payload = _rater_token(token)
    rater = Rater.objects.select_related("study").filter(pk=payload["r"]).first()
    if rater is None:
        raise Http404("This rater link is not valid.")
    _check_nonce(rater, payload)
    return rater


def access_rater_battle(token: str, battle_id: int) -> tuple[Rater, Battle]:
    """The rater of a personal link and one of their own arena battles (404 otherwise)."""
    rater = access_rater(token)
    battle = Battle.objects.select_related("comparison", "item").filter(pk=battle_id, rater=rater).first()
    if battle is None:
        raise Http404("No such battle.")
    battle.study = rater.study
    return rater, battle


# The rating page and its submit are the hot path under load: the assignment with its rater and study
# in one query, compiled once per thread (annotation/compiled.py).
_ASSIGNMENT_RATER_STUDY = CompiledQuery(
    lambda assignment, rater: (
        Assignment.objects.filter(pk=assignment, rater_id=rater).order_by().values(*assignment_columns(""))
    ),
    assignment=int,
    rater=int,
)


def access_rater_assignment(token: str, assignment_id: int) -> tuple[Rater, Assignment]:
    """The rater of a personal link and one of their own assignments, in one query."""
    payload = _rater_token(token)
    rows = _ASSIGNMENT_RATER_STUDY.rows(assignment=assignment_id, rater=payload["r"])
    if not rows:
        # A valid link with someone else's (or no) assignment and a forged link both end here: 404.
        access_rater(token)
        raise Http404("No such assignment.")
    return _assignment_from(rows[0], payload)


def _assignment_from(row: dict, payload: dict, prefix: str = "") -> tuple[Rater, Assignment]:
    assignment, rater = instance(Assignment, row, prefix), instance(Rater, row, f"{prefix}rater__")
    study = instance(Study, row, f"{prefix}study__")
    # What select_related("crowd_settings") caches: the submit reads them (min_seconds_per_pair).
    crowd = instance(CrowdSettings, row, f"{prefix}study__crowd_settings__")
    Study.crowd_settings.related.set_cached_value(study, crowd)
    _check_nonce(rater, payload)
    if study.is_arena:
        # an arena's assignment is a battle's held pair: voted on the battle's page only, where the arena's rules
        # (the names rule, the hourly limits, the battle's status) are checked; never through the rating page
        raise Http404("An arena's battles are voted on the arena's own page.")
    assignment.rater, assignment.study, rater.study = rater, study, study
    return rater, assignment


def assignment_columns(prefix: str = "assignment__") -> tuple[str, ...]:
    """The columns ``access_rater_assignment_rows`` reads of the assignment, its rater, its study and the
    study's crowd settings, reached from the queried model through ``prefix``."""
    return (
        *model_columns(Assignment, prefix),
        *model_columns(Rater, f"{prefix}rater__"),
        *model_columns(Study, f"{prefix}study__"),
        *model_columns(CrowdSettings, f"{prefix}study__crowd_settings__"),
    )


def access_rater_assignment_rows(
    token: str, assignment_id: int, query: CompiledQuery, **params: int
) -> tuple[Rater, Assignment, list[dict]]:
    """The rater of a personal link, one of their own assignments and rows about it, in one query:
    ``query`` takes ``assignment``, ``rater`` (and ``params``), keeps only rows of that assignment of that
    rater (``assignment_id=assignment, assignment__rater_id=rater``) and selects ``assignment_columns()``.
    With no rows, the assignment is looked up on its own (404 when it is not the rater's)."""
    payload = _rater_token(token)
    rows = query.rows(assignment=assignment_id, rater=payload["r"], **params)
    if not rows:
        return *access_rater_assignment(token, assignment_id), []
    return *_assignment_from(rows[0], payload, "assignment__"), rows


def rater_pair(assignment: Assignment, rows: list[dict], pair_id: int) -> AssignmentPair | None:
    """The pair a rater answers, from the rows ``access_rater_assignment_rows`` read of *their* assignment
    (each with ``model_columns(AssignmentPair)`` and ``judgment__id``); None when it is not one of them. Its
    earlier judgment, if any, is attached (a repeated submit); an unanswered pair costs no query."""
    row = next((r for r in rows if r["id"] == pair_id), None)
    if row is None:
        return None
    pair = instance(AssignmentPair, row)
    pair.assignment = assignment
    judgment_id = row["judgment__id"]
    # What select_related("judgment") caches: None when unanswered, so no later access queries again.
    AssignmentPair.judgment.related.set_cached_value(
        pair, None if judgment_id is None else Judgment.objects.get(pk=judgment_id)
    )
    return pair


def access_external_link(token: str) -> ExternalLink:
    """The crowd link a worker arrived through (404 when forged, unknown or closed)."""
    try:
        payload = signing.Signer(salt=EXTERNAL_LINK_SALT).unsign_object(token)
        link = ExternalLink.objects.select_related("study", "study__owner").get(pk=payload["l"])
    except (signing.BadSignature, ExternalLink.DoesNotExist, KeyError, TypeError):
        raise Http404("This study link is not valid.") from None
    if not link.enabled or link.nonce != payload.get("n"):
        raise Http404("This study link is closed.")
    return link


def access_open_link(token: str) -> Study:
    try:
        payload = signing.Signer(salt=OPEN_LINK_SALT).unsign_object(token)
        study = Study.objects.get(pk=payload["s"])
    except (signing.BadSignature, Study.DoesNotExist, KeyError, TypeError):
        raise Http404("This study link is not valid.") from None
    if not study.open_link_enabled or study.open_link_nonce != payload.get("n"):
        raise Http404("This study link is closed.")
    return study


def open_link_rater(request: HttpRequest, study: Study) -> Rater | None:
    """The anonymous rater this browser already is for the study, if any."""
    rater_id = request.session.get(SESSION_RATERS, {}).get(str(study.pk))
    if rater_id is None:
        return None
    return Rater.objects.filter(pk=rater_id, study=study).first()


def remember_open_link_rater(request: HttpRequest, rater: Rater) -> None:
    raters = dict(request.session.get(SESSION_RATERS, {}))
    raters[str(rater.study_id)] = rater.pk
    request.session[SESSION_RATERS] = raters


def raters_language(request: HttpRequest, study: Study) -> str:
    """The language a study's rater pages speak: the study's own (``Study.raters_language``), or the one the
    rater's browser asks for (Accept-Language), negotiated among settings.LANGUAGES (else LANGUAGE_CODE)."""
    from django.utils import translation

    return study.raters_language or translation.get_language_from_request(request)


def speak_to_raters(request: RaterRequest, study: Study) -> None:
    """Speak the study's raters' language for the rest of this request: each rater view calls it once it has the
    study, and its ``@rater_page`` decorator restores the server's language afterwards."""
    from django.utils import translation

    translation.activate(raters_language(request, study))
    request.raters_language_from_browser = not study.raters_language


def rater_page(view):
    """A rater page: SepLab's own words in the raters' language (``speak_to_raters``), never leaking into the next
    request the thread serves; a response chosen by the browser's language says so (Vary, Content-Language)."""
    from functools import wraps

    from django.utils import translation
    from django.utils.cache import patch_vary_headers

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        with translation.override(translation.get_language()):
            response = view(request, *args, **kwargs)
            if getattr(request, "raters_language_from_browser", False):
                patch_vary_headers(response, ["Accept-Language"])
            response.headers.setdefault("Content-Language", translation.get_language())
        return response

    return wrapped


def frameable(view):
    """Rater pages may be framed by the crowdsourcing sites in SEPLAB_FRAME_ANCESTORS (and only by them):
    a Content-Security-Policy frame-ancestors header replaces X-Frame-Options: DENY."""
    from functools import wraps

    from django.conf import settings
    from django.views.decorators.clickjacking import xframe_options_exempt

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        response = view(request, *args, **kwargs)
        ancestors = " ".join(["'self'", *settings.SEPLAB_FRAME_ANCESTORS])
        response["Content-Security-Policy"] = f"frame-ancestors {ancestors}"
        return response

    return xframe_options_exempt(wrapped)
