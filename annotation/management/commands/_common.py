from __future__ import annotations

import os

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from annotation.models import Study


def get_study(name: str) -> Study:
    try:
        return Study.objects.get(name=name)
    except Study.DoesNotExist:
        known = ", ".join(Study.objects.order_by("name").values_list("name", flat=True)[:20]) or "none"
        raise CommandError(f"No study named '{name}'. Studies: {known}.") from None


def get_owner(username: str | None):
    users = get_user_model().objects
    if username:
        try:
            return users.get(username=username)
        except users.model.DoesNotExist:
            raise CommandError(f"No user named '{username}'.") from None
    superusers = list(users.filter(is_superuser=True)[:2])
    if len(superusers) != 1:
        raise CommandError("Say who owns the study with --owner USERNAME "
                           "(create an account with `python manage.py createsuperuser`).")
    return superusers[0]


def read_file(path: str) -> bytes:
    """The file's bytes; a file over SEPLAB_MAX_IMPORT_BYTES is refused before it is read."""
    try:
        if os.path.getsize(path) > settings.SEPLAB_MAX_IMPORT_BYTES:
            raise CommandError(f"{path} is {os.path.getsize(path) / 1e6:.1f} MB; the import limit is "
                               f"{settings.SEPLAB_MAX_IMPORT_BYTES / 1e6:.1f} MB (SEPLAB_MAX_IMPORT_BYTES)")
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise CommandError(f"Cannot read {path}: {exc.strerror}") from None
