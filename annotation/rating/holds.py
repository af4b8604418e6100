"""What crowd workers who have not answered yet may hold through one link: the link's cap
(``SEPLAB_CROWD_UNANSWERED_PER_LINK``) and each IPv6 /56's and /48's share of it, checked inside the transaction
of every start of a crowd worker's assignment (the link's entry and the worker's own start alike).

What is counted is assignments, not the site's sessions: the active assignments without an answer yet of the raters
who came through the link. An assignment counts from the moment it exists, whichever way it was started (a worker's
own start page attaches it to no session) and however many sessions its worker opened."""

from __future__ import annotations

from collections import Counter

from django.conf import settings
from django.db import connection
from django.db.models import QuerySet
from django.utils.translation import gettext

from annotation.errors import NetworkHoldsEnough
from annotation.models import Assignment, ExternalLink, Rater, WorkerSession
from annotation.ratelimit import WIDER_NETWORKS, supernet

# Unanswered assignments the anonymous raters of one network (Rater.client) may hold in a study at once: a few people
# sharing a household or a lab start together; a script inventing ids holds no more than they would.
UNANSWERED_PER_CLIENT = 3
# Unanswered assignments of one link's workers whose networks lie in one IPv6 /56 or /48: that network's share of
# clients' allowances (ratelimit.WIDER_NETWORKS), so addresses spread over the /64s of one site count together.
UNANSWERED_PER_NETWORK = {prefix: UNANSWERED_PER_CLIENT * share for prefix, share in WIDER_NETWORKS.items()}


def _unanswered(study_id: int) -> QuerySet[Assignment]:
    return Assignment.objects.filter(study_id=study_id, status=Assignment.Status.ACTIVE, answered=0)


def unanswered(link: ExternalLink) -> int:
    """The link's workers holding an active assignment without an answer yet: what
    ``SEPLAB_CROWD_UNANSWERED_PER_LINK`` caps."""
    return _unanswered(link.study_id).filter(rater__worker_sessions__link=link).values("rater_id").distinct().count()


def _lock_links(rater: Rater) -> list[int]:
    """Inside the start's transaction: the links the rater came through, in order, each locked until the transaction
    ends (PostgreSQL: an advisory lock per link, taken in link order, which PgBouncer's transaction pooling keeps;
    SQLite runs one writer at a time), so the starts through one link count one after the other."""
    if connection.vendor != "postgresql":
        return list(
            WorkerSession.objects.filter(rater=rater).order_by("link_id").values_list("link_id", flat=True).distinct()
        )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT link_id, pg_advisory_xact_lock(hashtextextended('seplab-link:' || link_id::text, 0)) "
            f"FROM (SELECT DISTINCT link_id FROM {WorkerSession._meta.db_table} WHERE rater_id = %s "
            "ORDER BY link_id) AS links",
            [rater.pk],
        )
        return [row[0] for row in cursor.fetchall()]


def check_link_holds(rater: Rater) -> None:
    """Inside the start's transaction of a crowd worker's assignment: ``NetworkHoldsEnough`` when the workers of a
    link the rater came through already hold ``SEPLAB_CROWD_UNANSWERED_PER_LINK`` unanswered assignments, or those
    of the rater's IPv6 /56 or /48 their ``UNANSWERED_PER_NETWORK``. The link is locked for the count
    (``_lock_links``), and the count is of assignments, which exist once the start commits, so simultaneous starts
    cannot all see room. Nothing is read without a cap to check (no link cap and an IPv4 worker)."""
    cap = settings.SEPLAB_CROWD_UNANSWERED_PER_LINK
    networks = ((prefix, supernet(rater.client, prefix), most) for prefix, most in UNANSWERED_PER_NETWORK.items())
    own = [(prefix, network, most) for prefix, network, most in networks if network is not None]
    if not cap and not own:
        return
    links = _lock_links(rater)
    if not links:
        return
    held = (
        _unanswered(rater.study_id)
        .filter(rater__worker_sessions__link_id__in=links)
        .values_list("rater__worker_sessions__link_id", "rater_id", "rater__client")
        .distinct()
    )
    # a cap's worth per link is enough: a link with that many is refused whatever the rest hold
    rows = list(held[: cap * len(links)] if cap else held)
    if cap and max(Counter(link for link, _, _ in rows).values(), default=0) >= cap:
        raise NetworkHoldsEnough(
            gettext(
                "Many workers have just started this task and not answered yet; please try again in a minute, "
                "once some of them have."
            )
        )
    for prefix, network, most in own:
        per_link = Counter(link for link, _, client in rows if supernet(client, prefix) == network)
        if max(per_link.values(), default=0) >= most:
            raise NetworkHoldsEnough(
                gettext(
                    "Several people on your network have started this study and not answered yet; please try "
                    "again once one of them has."
                )
            )
