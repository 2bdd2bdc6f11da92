"""``manage.py create_user NAME --role curator [--password …] [--token]`` — a workbench user and API token.

Creates the user if needed (printing a generated password when none is given), sets the role when one is
given and prints the user's API token with ``--token`` (send it as ``Authorization: Token <key>``).
"""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from rest_framework.authtoken.models import Token

from verifier.roles import ROLES, role_of, set_role
from verifier.services import record_audit


class Command(BaseCommand):
    help = "Create a user (or update one) with a role, and/or print the user's API token."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", choices=ROLES, help="viewer < curator < reviewer < admin")
        parser.add_argument("--password", help="set this password (default for a new user: a generated one, printed)")
        parser.add_argument("--token", action="store_true", help="print the user's API token (created on first use)")

    def handle(self, *args, username: str, role: str | None, password: str | None, token: bool, **options):
        users = get_user_model()
        user = users.objects.filter(username=username).first()
        if user is None and not role:
            raise CommandError(f"no user {username!r}; give --role to create one")
        with transaction.atomic():
            if user is None:
                generated = None if password else secrets.token_urlsafe(12)
                user = users.objects.create_user(username, password=password or generated)
                record_audit(actor=None, action="user.create", obj=user, after={"username": username})
                self.stdout.write(f"Created user {username}" + (f" with password {generated}" if generated else ""))
            elif password:
                user.set_password(password)
                user.save(update_fields=["password"])
                self.stdout.write(f"Password of {username} changed")
            if role and role_of(user) != role:
                before = role_of(user)
                set_role(user, role)
                record_audit(actor=None, action="user.role", obj=user, before={"role": before}, after={"role": role})
            if role:
                self.stdout.write(f"{username} has the {role} role")
            if token:
                key = Token.objects.get_or_create(user=user)[0].key
                self.stdout.write(key)
