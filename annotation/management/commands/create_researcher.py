import secrets
import sys

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = (
        "Create a researcher's account: an ordinary account that sees only its own studies (not staff, not a "
        "superuser: only the server's operators are, and a superuser can read every API token in /admin/). "
        "Prints a generated password unless --password-stdin gives one."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--email", default="")
        parser.add_argument(
            "--password-stdin",
            action="store_true",
            help="Read the password from standard input instead of generating one.",
        )

    def handle(self, *args, **options):
        users = get_user_model().objects
        username = options["username"].strip()
        if not username or len(username) > 150:
            raise CommandError("The user name must have 1 to 150 characters.")
        if users.filter(username=username).exists():
            raise CommandError(f"A user named '{username}' exists already.")
        generated = not options["password_stdin"]
        password = secrets.token_urlsafe(12) if generated else sys.stdin.readline().rstrip("\n")
        user = users.model(username=username, email=options["email"], is_staff=False, is_superuser=False)
        try:
            validate_password(password, user)
        except ValidationError as exc:
            raise CommandError("The password is refused: " + " ".join(exc.messages)) from None
        user.set_password(password)
        user.save()
        self.stdout.write(f"Researcher '{username}' created." + (f" Password: {password}" if generated else ""))
