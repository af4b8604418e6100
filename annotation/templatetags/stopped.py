"""Stopped imports on their study's page: ``{% stopped_uploads study "judgments" as uploads %}``
(annotation/uploads.py)."""

from __future__ import annotations

from django import template

from annotation import uploads
from annotation.models import Study, Upload

register = template.Library()


@register.simple_tag
def stopped_uploads(study: Study, kind: str) -> list[Upload]:
    """The study's files of ``kind`` whose import stopped unpublished and is not running now, newest first (their
    bytes unread)."""
    return uploads.stopped_uploads(study, kind)
