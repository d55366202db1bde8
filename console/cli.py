"""What the console's management commands share: the user a command acts as, the check of
the text and the ids a command is given, and JSON output."""

import difflib
import getpass
import json
import logging
import os
import sys
from collections.abc import Mapping

from axes.utils import reset as reset_login_failures
from django.contrib.auth import authenticate, get_user_model
from django.core.management.base import CommandError
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest

from approvals.operator_actions import refuse_workflow_action
from archive.models import ArchivedRun
from archive.selectors import archived_run, archived_run_viewable
from audit.quoting import file_name, quoted
from runs.definitions.definition import registry
from runs.execution.lost_commit import acting_for_a_person
from runs.machine.storable import NotAnId, id_written, unstorable_texts
from runs.models import Workflow
from runs.permissions import VIEW, grant_for
from runs.reads.filter_problems import run_filter_problems
from runs.reads.selectors import workflow_names_matching

logger = logging.getLogger(__name__)

# The address a command's password proof is counted under by the login throttle (axes): the
# host itself. Failures at the command line lock that user out there as the console's login
# does from a browser's address (AXES_FAILURE_LIMIT, AXES_COOLOFF_MINUTES).
COMMAND_LINE_ADDRESS = "127.0.0.1"


def storable_text(options: Mapping) -> None:
    """A CommandError naming the first option whose text the database cannot store: NUL
    characters, or bytes that are not UTF-8 (the shell hands them over as lone surrogates,
    which PostgreSQL refuses with a traceback). The rule is the one a start request is
    checked with (runs.machine.storable.unstorable_texts). Call it first, before anything is
    looked up or written."""
    for name, value in options.items():
        problems = unstorable_texts(value, [name]) if isinstance(value, (str, list)) else []
        if problems:
            raise CommandError(f"--{name.replace('_', '-')}: {problems[0]['msg']}; give it "
                               "as UTF-8 text. Nothing was done.")


def run_filters_refused(options: Mapping) -> None:
    """A one-line CommandError naming the option, if the runs list's --status or --search
    is one no run can be listed by, in the words the console and GET /api/runs say it in
    (runs.reads.filter_problems). Call it first, before storable_text (its words for a NUL
    are the rule's) and before anything is looked up or written."""
    refused = run_filter_problems(status=options["status"], q=options["search"])
    if refused:
        raise CommandError(f"--{next(iter(refused.values()))}. Nothing was done.")


def id_given(text: str, *, name: str, thing: str) -> int:
    """The id `text` writes (runs.machine.storable.id_written: ASCII digits only, so "٢" is
    not run 2 as int() would have it), or a one-line CommandError naming `name` and what was
    given. Call it before anything is looked up or written."""
    try:
        return id_written(text, name=name, thing=thing)
    except NotAnId as exc:
        raise CommandError(str(exc)) from None


def no_run(run_id: int, *, user=None) -> str:
    """What a command says of a run id the hot tables do not hold: "no run N", or, for a run
    archival removed, where it went; "no run" would tell its operator it never existed. A
    command acting as `user` names it only to a person who may view its workflow's runs, as
    the console's page of an archived run does."""
    if user is not None:
        tombstone = archived_run_viewable(user, run_id)
    else:
        try:
            tombstone = archived_run(run_id)
        except ArchivedRun.DoesNotExist:
            tombstone = None
    if tombstone is None:
        return f"no run {run_id}"
    name = file_name(tombstone.archive_file.name)
    return (f"run {run_id} ({tombstone.workflow_name} {tombstone.business_key}) finished "
            f"{tombstone.final_status} and was archived to {name}: the console shows it read "
            f"only (/runs/archived/{run_id}/), and manage.py verify_audit --archive {name} "
            "checks it; nothing was done")


# How many workflows a refused --workflow names, the closest to it: a big install's
# hundreds, listed on each typo, buried the line that says what is wrong.
CLOSE_NAMES = 3


def close_names(text: str, names) -> str:
    """What a refusal adds after `text`: up to CLOSE_NAMES of `names` closest to it
    (difflib's ratio, regardless of case) as " (close names: a, b)", or "" where none is
    close."""
    by_folded = {name.casefold(): name for name in names}
    close = difflib.get_close_matches(text.casefold(), list(by_folded), n=CLOSE_NAMES)
    return f" (close names: {', '.join(by_folded[c] for c in close)})" if close else ""


def workflow_filter_matches(text: str, *, user=None) -> None:
    """A one-line CommandError when --workflow `text` is part of no workflow's name: a
    misspelt name would otherwise read as "no run matches" (approvals.bulk refuses a job on
    it in the same words). It names `text` and the few workflows whose names are closest to
    it (close_names), never every workflow. A workflow is one with runs (its row) or one the
    code registers: before its first run, a registered workflow simply has no run to list.
    For `user` (--user), only the workflows whose runs they may see are asked and named, by
    the console's runs list's rule (runs.permissions.grant_for): a workflow beyond them,
    with runs or not, is told as unknown, as the API tells a token's
    (api.selectors.workflow_filter_problem)."""
    if not text.strip():
        return
    part = text.strip()
    grant = grant_for(user, VIEW) if user is not None else None
    if grant is not None and not grant.everywhere:
        seen = sorted(Workflow.objects.filter(pk__in=grant.workflow_ids)
                      .values_list("name", flat=True))
        if any(part.lower() in name.lower() for name in seen):
            return
        raise CommandError(f"--workflow: no workflow whose runs user {user.get_username()!r} "
                           f"may see has a name containing {quoted(part)}"
                           + (close_names(part, seen) if seen else
                              " (they may see no workflow's runs)"))
    if workflow_names_matching(text).exists():
        return
    registered = registry.names()
    if any(part.lower() in name.lower() for name in registered):
        return
    known = {*registered, *Workflow.objects.values_list("name", flat=True)}
    raise CommandError(f"--workflow: no workflow's name contains {quoted(part)}"
                       + close_names(part, known))


def user_named(username: str):
    """The active user `username`, or a CommandError naming what is wrong."""
    storable_text({"user": username})
    try:
        user = get_user_model().objects.get(username=username)
    except get_user_model().DoesNotExist:
        raise CommandError(f"no user {quoted(username)}") from None
    if not user.is_active:
        raise CommandError(f"user {quoted(username)} is not active")
    return user


def acting_user(username: str, *, nothing: str = "nothing was done"):
    """The active user `username` once they have proved who they are (proven)."""
    return proven(user_named(username), nothing=nothing)


def acting_on_workflow(action: str, workflow: str, username: str, **names):
    """The person `username` acting on `workflow` by `action` (a dispatch or schedule
    action), proven (proven) only once the checks that need no password pass: their
    permission, then the workflow's and the schedule's or system's names
    (refuse_workflow_action), so that a misspelt name costs no password."""
    user = user_named(username)
    refuse_workflow_action(action, workflow, user=user, **names)
    return proven(user)


def proven(user, *, nothing: str = "nothing was done"):
    """`user` once they have proved who they are by their password (asked for, or read from
    CLI_PASSWORD), or a CommandError ending in `nothing`.

    A command that changes something as a person writes that person into the audit trail,
    and a four-eyes request counts them as its first person: naming someone is not acting
    as them. Commands that only read (what a run offers a user, the runs a user may see) take
    the name alone (user_named)."""
    # Where a script gives the acting person's password instead of the prompt.
    password = os.environ.get("CLI_PASSWORD")
    if password is None:
        try:
            # Asked on a terminal only: getpass would read a script's input with the echo on.
            if not sys.stdin.isatty():
                raise EOFError
            password = getpass.getpass(f"password of {user.get_username()}: ")
        except (EOFError, OSError):  # no terminal to ask on, and no CLI_PASSWORD
            raise CommandError(f"no password given for {user.get_username()} (a script sets "
                               f"CLI_PASSWORD); {nothing}") from None
        except KeyboardInterrupt:
            # Ctrl-C at the prompt: the person decided not to act, and nothing has been yet.
            raise CommandError(f"no password given for {user.get_username()}: interrupted "
                               f"at the prompt; {nothing}") from None
    username = user.get_username()
    if not utf8(password):
        # Bytes that are not UTF-8 (a script's Latin-1 CLI_PASSWORD) reach us as lone
        # surrogates, which the password hasher cannot encode: no stored password is such
        # text, so it is refused before the check rather than ending in a traceback.
        logger.warning("command line: a password for %s that is not UTF-8 text; nothing was "
                       "done", username)
        raise CommandError(f"the password given for {username} (CLI_PASSWORD or the prompt) "
                           f"is not UTF-8 text: give it as UTF-8; {nothing}")
    request = HttpRequest()
    request.method, request.path = "POST", "/command-line/"
    request.META.update(REMOTE_ADDR=COMMAND_LINE_ADDRESS, HTTP_USER_AGENT="manage.py")
    # Through the authentication backends, the throttle first: a locked-out user is refused
    # before the password is checked, and each failure counts towards the lockout.
    if authenticate(request, username=username, password=password) is None:
        if getattr(request, "axes_locked_out", False):
            logger.warning("command line: %s is locked out after too many failed passwords; "
                           "nothing was done", username)
            raise CommandError(f"too many failed passwords for {username}: locked out for a "
                               f"while (an admin can lift it in Django admin); {nothing}")
        # The operators' log keeps the attempt (never the password tried).
        logger.warning("command line: wrong password for %s; nothing was done", username)
        raise CommandError(f"wrong password for {username}; {nothing}")
    # As a successful login does (AXES_RESET_ON_SUCCESS): earlier slips no longer count.
    reset_login_failures(ip=COMMAND_LINE_ADDRESS, username=username)
    # What the command commits from here on is the person's: a COMMIT whose connection is
    # lost is asked about afterwards, and the command says whether it was done.
    acting_for_a_person()
    return user


def utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def json_value(value) -> str:
    """What JSON has no type for, as text: a time as the API writes one (ISO 8601,
    `2026-12-05T21:10:02.116Z`: Django's JSON encoder), so a script reads both alike;
    anything else as str()."""
    try:
        return DjangoJSONEncoder().default(value)
    except TypeError:
        return str(value)


def print_json(stream, value) -> None:
    stream.write(json.dumps(value, default=json_value, ensure_ascii=False, sort_keys=True))
