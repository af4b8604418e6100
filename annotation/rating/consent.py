"""A study's consent step: human raters agree to the study's consent text before their first pair, once each.
Declining stores nothing (the page that follows says so)."""

from __future__ import annotations

from django.utils import timezone

from annotation.models import Rater, Study, text_hash

AGREE, DECLINE = "agree", "decline"  # the consent form's two buttons (name="consent")


def required(study: Study) -> bool:
    """Whether the study asks raters for consent at all."""
    return bool(study.consent_text.strip())


def needed(rater: Rater, study: Study | None = None) -> bool:
    """Whether the rater must still agree before they get a pair: reads only the rater's and study's own columns
    (the rating page's one query has them), so the hot path pays nothing for it."""
    study = study or rater.study
    return rater.kind == Rater.Kind.HUMAN and rater.consented_at is None and required(study)


def do_record_consent(rater: Rater) -> bool:
    """Record that the rater agreed to the study's consent text now, once: True when this call recorded it (a
    double submit, or a second tab, finds it recorded and changes nothing)."""
    now = timezone.now()
    recorded = Rater.objects.filter(pk=rater.pk, consented_at__isnull=True).update(
        consented_at=now, consent_text_hash=text_hash(rater.study.consent_text)
    )
    if recorded:
        rater.consented_at, rater.consent_text_hash = now, text_hash(rater.study.consent_text)
    else:
        rater.refresh_from_db(fields=["consented_at", "consent_text_hash"])
    return bool(recorded)
