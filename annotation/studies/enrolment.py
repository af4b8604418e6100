"""How people get in: personal rater links (one, or many at once as a CSV), the open link, crowd links, the API
token, and the public address every link is built on -- each revoked or rotated with immediate effect.

How a link stops working at once: a rater's every page and submit checks their token's nonce against the
database (``annotation.access``), so giving the rater a new nonce invalidates what they hold. Raters who
came through the open link or a crowd link hold such a token too; closing or rotating that link gives all of
them new nonces, and they get the new token only by coming back through a link that is open (the open link
remembers the browser, a crowd site resends the worker's ids).
"""

from __future__ import annotations

import csv
import io
import random
from collections.abc import Iterable
from typing import cast

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.http import HttpRequest
from rest_framework.authtoken.models import Token

from annotation.errors import ServiceError
from annotation.exchange import rules
from annotation.exchange.rules import csv_safe
from annotation.models import (
    ExternalLink,
    Rater,
    Study,
    new_nonce,
)


def do_rotate_api_token(user: User) -> Token:
    """A new API token for the researcher; the old one stops working."""
    with transaction.atomic():
        Token.objects.filter(user=user).delete()
        return Token.objects.create(user=user)


def do_create_rater_link(study: Study, name: str) -> Rater:
    name = name.strip()
    if not name:
        raise ServiceError("Give the rater a name (for example their initials or an id).")
    try:
        with transaction.atomic():
            return Rater.objects.create(study=study, external_id=name, source=Rater.Source.PERSONAL_LINK)
    except IntegrityError:
        raise ServiceError(f"A rater named '{name}' already exists in this study.") from None


def do_join_open_link(study: Study, client: str = "") -> Rater:
    """A new anonymous rater for a visitor of the study's open link, from network ``client`` (ratelimit.client_key)."""
    for _ in range(5):
        external_id = f"anon-{random.SystemRandom().randrange(16**8):08x}"
        try:
            with transaction.atomic():
                return Rater.objects.create(
                    study=study, external_id=external_id, source=Rater.Source.OPEN_LINK, client=client
                )
        except IntegrityError:
            continue
    raise ServiceError("Could not create a rater; please try again.")


MAX_BULK_LINKS = 1000


NAME_MAX = cast(int, Rater._meta.get_field("external_id").max_length)  # a CharField's: always set


def do_rotate_rater_link(rater: Rater) -> Rater:
    """A new personal link for the rater; the old one stops working at once (a revoked link comes back)."""
    rater.token_nonce, rater.revoked = new_nonce(), False
    rater.save(update_fields=["token_nonce", "revoked"])
    return rater


def do_revoke_rater_link(rater: Rater) -> Rater:
    """The rater's link stops working at once; their judgments are kept. Rotating gives them a new one."""
    rater.token_nonce, rater.revoked = new_nonce(), True
    rater.save(update_fields=["token_nonce", "revoked"])
    return rater


def _invalidate(raters) -> int:
    """New nonces for these raters, one UPDATE per rater (each needs its own): what they hold stops working."""
    ids = list(raters.values_list("pk", flat=True))
    for pk in ids:
        Rater.objects.filter(pk=pk).update(token_nonce=new_nonce())
    return len(ids)


@transaction.atomic
def do_set_open_link(study: Study, enabled: bool) -> int:
    """Open or close the open link. Closing also stops every rater who joined through it, at once; returns
    how many were stopped. Reopening lets them back in through the link (their browser is remembered)."""
    study.open_link_enabled = enabled
    study.save(update_fields=["open_link_enabled"])
    return 0 if enabled else _invalidate(study.raters.filter(source=Rater.Source.OPEN_LINK))


@transaction.atomic
def do_rotate_open_link(study: Study) -> int:
    """A new open link; the old one and the tokens of everyone who joined through it stop working."""
    study.open_link_nonce = new_nonce()
    study.save(update_fields=["open_link_nonce"])
    return _invalidate(study.raters.filter(source=Rater.Source.OPEN_LINK))


def _link_raters(link: ExternalLink):
    return Rater.objects.filter(worker_sessions__link=link).distinct()


@transaction.atomic
def do_set_external_link(link: ExternalLink, enabled: bool) -> int:
    """Enable or disable a crowd link. Disabling stops every worker who came through it, at once."""
    link.enabled = enabled
    link.save(update_fields=["enabled"])
    return 0 if enabled else _invalidate(_link_raters(link))


@transaction.atomic
def do_rotate_external_link(link: ExternalLink) -> int:
    """A new URL for a crowd link (paste it on the site again); the old URL and its workers' pages stop."""
    link.nonce = new_nonce()
    link.save(update_fields=["nonce"])
    return _invalidate(_link_raters(link))


def parse_names(text: str) -> list[str]:
    """Rater names, one per line (blank lines ignored). Raises ServiceError naming every bad line."""
    names: list[str] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(rules.file_lines(text), start=1):
        name = raw.strip()
        if not name:
            continue
        if len(name) > NAME_MAX:
            problems.append(f"line {number}: a name has at most {NAME_MAX} characters")
        elif name in seen:
            problems.append(f"line {number}: '{name}' is also on line {seen[name]}")
        else:
            seen[name] = number
            names.append(name)
    if not names and not problems:
        problems.append("names: give one rater name per line")
    if len(names) > MAX_BULK_LINKS:
        problems.append(f"names: at most {MAX_BULK_LINKS} links at a time ({len(names)} given)")
    if problems:
        raise ServiceError("; ".join(problems))
    return names


@transaction.atomic
def do_bulk_create_rater_links(study: Study, names: Iterable[str]) -> list[Rater]:
    """One personal link per name, all or none: a name the study already has is an error (nothing is made)."""
    names = list(names)
    taken = set(study.raters.filter(external_id__in=names).values_list("external_id", flat=True))
    if taken:
        raise ServiceError("names: the study already has raters named " + ", ".join(sorted(taken)))
    return Rater.objects.bulk_create(
        Rater(study=study, external_id=n, source=Rater.Source.PERSONAL_LINK) for n in names
    )


def links_csv(raters: Iterable[Rater], base_url: str) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["name", "link"])
    for rater in raters:
        writer.writerow([csv_safe(rater.external_id), base_url.rstrip("/") + rater.link_path()])
    return buffer.getvalue()


def public_base_url(study: Study, request: HttpRequest) -> str:
    """The address every link of the study is built on: the study's setting, else the site's SITE_URL when
    it is https (a deployment), else the address the researcher is browsing."""
    if study.public_base_url:
        return study.public_base_url.rstrip("/")
    if settings.SITE_URL.startswith("https"):
        return settings.SITE_URL.rstrip("/")
    return request.build_absolute_uri("/").rstrip("/")
