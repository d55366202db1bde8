"""What the console's management commands share: the user a command acts as, and JSON
output."""

import json

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError


def user_named(username: str):
    """The active user `username`, or a CommandError naming what is wrong."""
    try:
        user = get_user_model().objects.get(username=username)
    except get_user_model().DoesNotExist:
        raise CommandError(f"no user {username!r}") from None
    if not user.is_active:
        raise CommandError(f"user {username!r} is not active")
    return user


def print_json(stream, value) -> None:
    stream.write(json.dumps(value, default=str, ensure_ascii=False, sort_keys=True))
