"""Who may do what. Four roles, each including the ones before it:

viewer   — read everything (queue, runs, evidence, memory bank, evaluations, exports)
curator  — and start/cancel runs, import flagged triples, assign tasks, comment
reviewer — and decide on verdicts (accept / override / not enough evidence), promote runs to the
           memory bank, retire/restore memory entries
admin    — and manage users, knowledge graphs and evaluations; Django superusers are admins

A role is membership of the Django group of the same name (created by migration 0006); a user
with several groups has the highest. Views use ``role_required``, the API ``HasRole``, the
websocket consumer ``has_role``: one table, three doors.
"""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from rest_framework.permissions import SAFE_METHODS, BasePermission

VIEWER, CURATOR, REVIEWER, ADMIN = "viewer", "curator", "reviewer", "admin"
ROLES = (VIEWER, CURATOR, REVIEWER, ADMIN)
_RANK = {role: rank for rank, role in enumerate(ROLES)}


def role_of(user) -> str | None:
    """The highest role ``user`` holds, or None (anonymous, inactive or in no role group)."""
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return ADMIN
    cached = getattr(user, "_kgv_role", False)
    if cached is not False:
        return cached
    names = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
    role = max(names, key=_RANK.__getitem__) if names else None
    user._kgv_role = role
    return role


def has_role(user, role: str) -> bool:
    held = role_of(user)
    return held is not None and _RANK[held] >= _RANK[role]


def set_role(user, role: str | None) -> None:
    """Make ``role`` the user's only role group (None removes every role)."""
    from django.contrib.auth.models import Group

    if role is not None and role not in _RANK:
        raise ValueError(f"unknown role {role!r}; roles are {', '.join(ROLES)}")
    user.groups.remove(*Group.objects.filter(name__in=ROLES))
    if role is not None:
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    user.__dict__.pop("_kgv_role", None)


def role_required(role: str):
    """View decorator: anonymous → the sign-in page; signed in without ``role`` → 403."""

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not has_role(request.user, role):
                raise PermissionDenied(f"this needs the {role} role")
            return view(request, *args, **kwargs)

        wrapped.required_role = role
        return wrapped

    return decorator


class HasRole(BasePermission):
    """DRF permission: reading needs ``view.read_role`` (viewer), writing ``view.write_role`` (curator).

    A view can name a role per action with ``action_roles = {"review": REVIEWER, ...}``.
    """

    message = "You do not have the role this needs."

    def has_permission(self, request, view) -> bool:
        action = getattr(view, "action", None)
        roles = getattr(view, "action_roles", {})
        if action in roles:
            needed = roles[action]
        elif request.method in SAFE_METHODS:
            needed = getattr(view, "read_role", VIEWER)
        else:
            needed = getattr(view, "write_role", CURATOR)
        if has_role(request.user, needed):
            return True
        if request.user.is_authenticated:
            self.message = f"This needs the {needed} role."
        return False
