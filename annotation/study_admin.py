"""Managing a study from the browser: pause / resume / archive, delete, duplicate, and every rater link --
personal, open and external -- revoked or rotated with immediate effect, bulk-created personal links, and
the public address links are built on.

How a link stops working at once: a rater's every page and submit checks their token's nonce against the
database (``annotation.access``), so giving the rater a new nonce invalidates what they hold. Raters who
came through the open link or a crowd link hold such a token too; closing or rotating that link gives all of
them new nonces, and they get the new token only by coming back through a link that is open (the open link
remembers the browser, a crowd site resends the worker's ids).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest

from annotation import formats, study_settings
from annotation.formats import csv_safe
from annotation.models import (
    Comparison,
    ExternalLink,
    Generation,
    GoldPair,
    Item,
    Rater,
    Study,
    System,
    new_nonce,
)
from annotation.services import ServiceError, rebuild_plan

MAX_BULK_LINKS = 1000
NAME_MAX = Rater._meta.get_field("external_id").max_length


SETTABLE_STATUSES = (Study.Status.ACTIVE, Study.Status.PAUSED, Study.Status.ARCHIVED)


def do_set_status(study: Study, status: str) -> Study:
    if status not in SETTABLE_STATUSES:
        raise ServiceError(f"status: {status!r} is not one of {', '.join(SETTABLE_STATUSES)}")
    if study.status == Study.Status.IMPORTING:
        raise ServiceError("status: the study is still being imported")
    Study.objects.filter(pk=study.pk).update(status=status)
    study.status = status
    return study


def do_delete_study(study: Study, typed_name: str) -> None:
    """Delete the study and everything in it, once its name is typed to confirm."""
    if typed_name.strip() != study.name:
        raise ServiceError("Type the study's name exactly to confirm the deletion.")
    study.delete()


@transaction.atomic
def do_duplicate_study(study: Study, name: str) -> Study:
    """A new study with the same items, outputs, attention checks and every setting (the researcher's own
    copy to run again): no raters, judgments or links. Its plan is built afresh from the copied settings."""
    name = name.strip()
    if not name:
        raise ServiceError("name: give the new study a name")
    if Study.objects.filter(owner=study.owner, name=name).exists():
        raise ServiceError(f"name: you already have a study named '{name}'; choose another name")
    skip = {"id", "name", "created", "open_link_enabled", "open_link_nonce", "status", "baseline"}
    copy = Study.objects.create(name=name, **{f.name: getattr(study, f.name) for f in Study._meta.concrete_fields
                                              if f.name not in skip and f.attname not in skip | {"baseline_id"}})
    for group in study_settings.GROUPS.values():
        source = getattr(study, group.accessor)
        group.model.objects.create(study=copy, **{f: getattr(source, f) for f in group.fields})
    systems = {s.pk: System.objects.create(study=copy, name=s.name) for s in study.systems.all()}
    if study.baseline_id:
        copy.baseline = systems[study.baseline_id]
        copy.save(update_fields=["baseline"])
    originals = list(study.items.all())
    items = Item.objects.bulk_create(
        Item(study=copy, external_id=i.external_id, input=i.input, reference=i.reference, metadata=i.metadata,
             position=i.position) for i in originals)
    item_of = {old.pk: new for old, new in zip(originals, items, strict=True)}
    generations = Generation.objects.filter(item__study=study).values_list(
        "item_id", "system_id", "sample_index", "text", "text_hash", "n_words")
    Generation.objects.bulk_create(
        (Generation(item=item_of[i], system=systems[s], sample_index=k, text=t, text_hash=h, n_words=w)
         for i, s, k, t, h, w in generations.iterator(chunk_size=2000)), batch_size=2000)
    GoldPair.objects.bulk_create(GoldPair(study=copy, input=g.input, good_output=g.good_output,
                                          bad_output=g.bad_output) for g in study.gold_pairs.all())
    explicit = None
    if study.pair_mode == Study.PairMode.EXPLICIT:
        explicit = [(systems[a].pk, systems[b].pk)
                    for a, b in Comparison.objects.filter(study=study).values_list("system_a_id", "system_b_id")]
    rebuild_plan(copy, explicit)
    return copy


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
    for number, raw in enumerate(formats.file_lines(text), start=1):
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
    return Rater.objects.bulk_create(Rater(study=study, external_id=n, source=Rater.Source.PERSONAL_LINK)
                                     for n in names)


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
