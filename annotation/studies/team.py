"""A study's team: members added, their roles changed, members removed (by the owner: ``access.MANAGE``), and the
audit trail every change to a study by a person is written to (``do_audit``). What a role may do is decided in
``annotation/access.py``."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from annotation.errors import FieldErrors
from annotation.models import AuditEntry, Membership, Role, Study

ROLES = tuple(Role.values)  # what a member may be: viewer, reviewer, editor (the owner is not a member)
ROLE_PROBLEM = f"The role must be one of {', '.join(ROLES)}."


def do_audit(study: Study, user: User | None, action: str, summary: str, detail: dict[str, Any] | None = None) -> None:
    """One line of the study's audit trail: who (None: a command run on the server) did what."""
    AuditEntry.objects.create(
        study=study,
        user=user,
        username=user.username if user is not None else "(server command)",
        action=action,
        summary=summary[:500],
        detail=detail or {},
    )


def check_member(study: Study, username: Any, role: Any) -> tuple[User, str]:
    """The account and role asked for, each refused by name: an unknown account, the owner, a role not one of
    ``ROLES``."""
    problems: dict[str, list[str]] = {}
    user = None
    if not isinstance(username, str) or not username.strip():
        problems["username"] = ["Give the account's username."]
    else:
        user = User.objects.filter(username=username.strip(), is_active=True).first()
        if user is None:
            problems["username"] = [f"No account is called {username.strip()!r}."]
        elif user.pk == study.owner_id:
            problems["username"] = [f"{user.username} owns this study already."]
    if role not in ROLES:
        problems["role"] = [ROLE_PROBLEM]
    if problems:
        raise FieldErrors(problems)
    assert user is not None
    return user, str(role)


@transaction.atomic
def do_add_member(study: Study, username: Any, role: Any, by: User | None) -> Membership:
    """Add an account to the study's team in a role (refused by name when it is a member already)."""
    user, role = check_member(study, username, role)
    try:
        with transaction.atomic():
            membership = Membership.objects.create(study=study, user=user, role=role)
    except IntegrityError:
        raise FieldErrors(
            {"username": [f"{user.username} is on this study's team already; change their role instead."]}
        ) from None
    do_audit(study, by, "member_added", f"added {user.username} as {role}", {"username": user.username, "role": role})
    return membership


@transaction.atomic
def do_set_role(membership: Membership, role: Any, by: User | None) -> Membership:
    if role not in ROLES:
        raise FieldErrors({"role": [ROLE_PROBLEM]})
    before = membership.role
    if before != role:
        membership.role = role
        membership.save(update_fields=["role"])
        do_audit(
            membership.study,
            by,
            "member_role",
            f"made {membership.user.username} {role} (was {before})",
            {"username": membership.user.username, "role": [before, role]},
        )
    return membership


@transaction.atomic
def do_remove_member(membership: Membership, by: User | None) -> None:
    name, role, study = membership.user.username, membership.role, membership.study
    membership.delete()
    do_audit(study, by, "member_removed", f"removed {name} ({role})", {"username": name, "role": role})
