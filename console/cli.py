"""What the console's management commands share: the user a command acts as, the check of
the text a command is given, and JSON output."""

import json
from collections.abc import Mapping

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from api.openapi import unstorable


def storable_text(options: Mapping) -> None:
    """A CommandError naming the first option whose text the database cannot store: NUL
    characters, or bytes that are not UTF-8 (the shell hands them over as lone surrogates,
    which PostgreSQL refuses with a traceback). The rule is the one a start request is
    checked with (api.openapi.unstorable). Call it first, before anything is looked up or
    written."""
    for name, value in options.items():
        problems = unstorable(value, [name]) if isinstance(value, (str, list)) else []
        if problems:
            raise CommandError(f"--{name.replace('_', '-')}: {problems[0]['msg']}; give it "
                               "as UTF-8 text. Nothing was done.")


def user_named(username: str):
    """The active user `username`, or a CommandError naming what is wrong."""
    storable_text({"user": username})
    try:
        user = get_user_model().objects.get(username=username)
    except get_user_model().DoesNotExist:
        raise CommandError(f"no user {username!r}") from None
    if not user.is_active:
        raise CommandError(f"user {username!r} is not active")
    return user


def print_json(stream, value) -> None:
    stream.write(json.dumps(value, default=str, ensure_ascii=False, sort_keys=True))
