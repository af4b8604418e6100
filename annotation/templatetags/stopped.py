"""A stopped import on its study's page: ``{% stopped_upload study "judgments" as upload %}``
(annotation/uploads.py)."""

from __future__ import annotations

from django import template

from annotation import uploads
from annotation.models import Study, Upload

register = template.Library()


@register.simple_tag
def stopped_upload(study: Study, kind: str) -> Upload | None:
    """The study's file of ``kind`` whose import stopped unpublished and is not running now (its bytes unread)."""
    return uploads.stopped_upload(study, kind)
