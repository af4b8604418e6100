from __future__ import annotations

import os

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from annotation.models import Study


def get_study(name: str) -> Study:
    """The study a command's --study names: its name, or OWNER/NAME (study names are unique per researcher, so
    two researchers' studies may share a name; the owner then says which)."""
    matches = list(Study.objects.filter(name=name).select_related("owner").order_by("owner__username")[:10])
    if not matches and "/" in name:
        owner, _, bare = name.partition("/")
        matches = list(Study.objects.filter(owner__username=owner, name=bare).select_related("owner"))
    if len(matches) == 1:
        return matches[0]
    if matches:
        choices = ", ".join(f"{s.owner.username}/{s.name}" for s in matches)
        raise CommandError(
            f"{len(matches)} researchers have a study named '{name}': say whose, as --study OWNER/NAME ({choices})."
        )
    known = (
        ", ".join(
            f"{o}/{n}"
            for o, n in Study.objects.order_by("owner__username", "name").values_list("owner__username", "name")[:20]
        )
        or "none"
    )
    raise CommandError(f"No study named '{name}'. Studies: {known}.")


def get_owner(username: str | None):
    users = get_user_model().objects
    if username:
        try:
            return users.get(username=username)
        except users.model.DoesNotExist:
            raise CommandError(f"No user named '{username}'.") from None
    only = list(users.filter(is_active=True)[:2])
    if len(only) != 1:
        raise CommandError(
            "Say who owns the study with --owner USERNAME "
            "(create an account with `python manage.py create_researcher NAME`)."
        )
    return only[0]


def read_file(path: str) -> bytes:
    """The file's bytes; a file over SEPLAB_MAX_IMPORT_BYTES is refused before it is read."""
    try:
        if os.path.getsize(path) > settings.SEPLAB_MAX_IMPORT_BYTES:
            raise CommandError(
                f"{path} is {os.path.getsize(path) / 1e6:.1f} MB; the import limit is "
                f"{settings.SEPLAB_MAX_IMPORT_BYTES / 1e6:.1f} MB (SEPLAB_MAX_IMPORT_BYTES)"
            )
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise CommandError(f"Cannot read {path}: {exc.strerror}") from None
