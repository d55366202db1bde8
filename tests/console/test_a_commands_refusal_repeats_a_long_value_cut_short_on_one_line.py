"""A command that refuses a name or a text it was given repeats it, so that the person sees
what was wrong, cut short as every refusal of the runtime cuts it (audit.quoting.quoted:
the first 120 characters, then how many there were; a number by
runs.machine.storable.digits_shown). Several repeated it whole: run_action --user with a
100,000-character name printed one line of 100,025 characters, and so did list_runs --user
and --workflow, start_run's workflow, the ids of show_run and run_action, --after, --before,
--now, --call, a bulk job's action and step, a dispatch's or a schedule's workflow. A run id
of 100,000 digits ended show_run in a traceback (int() reads 4,300 at most). A value that is
not one of an argument's choices (run_action's action, --mode, --step-status, a subcommand of
dispatch) was repeated whole by argparse's own "invalid choice", and so were an argument no
command takes ("unrecognized arguments") and a value its type refuses (--verbosity's "invalid
int value"): every command's parser is now audit.arguments'. Each refusal is now one line, a
few hundred characters at most (and its list of the choices), naming what was refused."""

import io

import pytest
from django.core.management import CommandError, call_command, get_commands, load_command_class

from audit.arguments import REFUSAL_SHOWN, ValuesCutShortParser, parsers_within

pytestmark = pytest.mark.django_db

LONG = "u" * 100_000
DIGITS = "9" * 100_000
RUN = object()  # the stuck run's id, in its place

# (the command's arguments, the words its refusal names what was refused by)
CASES = {
    "run_action --user": (["run_action", RUN, "--user", LONG], "no user"),
    "run_action's run": (["run_action", LONG, "--user", "olga"], "run id"),
    "run_action's run in digits": (["run_action", DIGITS, "--user", "olga"], "no run"),
    "run_action --step": (["run_action", RUN, "retry_step", "--user", "olga", "--reason",
                           "INC-7", "--step", LONG], "has no step"),
    "run_action --call": (["run_action", RUN, "reconcile_tool_call", "--user", "olga",
                           "--reason", "INC-7", "--call", LONG], "--call"),
    "run_action --call of a step": (["run_action", RUN, "reconcile_tool_call", "--user", "olga",
                                     "--reason", "INC-7", "--call", f"create-task:{LONG}"],
                                    "--call"),
    "run_action --call naming another step": (
        ["run_action", RUN, "reconcile_tool_call", "--user", "olga", "--reason", "INC-7",
         "--step", LONG, "--call", f"{LONG}x:1.0"], "--call names step"),
    "run_action --decide": (["run_action", "--decide", LONG, "--user", "olga"], "--decide"),
    "run_action --decide in digits": (["run_action", "--decide", DIGITS, "--user", "olga"],
                                      "no four-eyes request"),
    "list_runs --user": (["list_runs", "--user", LONG], "no user"),
    "list_runs --workflow": (["list_runs", "--workflow", LONG], "--workflow"),
    "list_runs --workflow as a user": (["list_runs", "--workflow", LONG, "--user", "olga"],
                                       "--workflow"),
    "list_runs --status": (["list_runs", "--status", LONG], "--status"),
    "list_runs --after": (["list_runs", "--after", LONG], "--after"),
    "start_run's workflow": (["start_run", LONG, "k", "--input", "{}"], "unknown workflow"),
    "show_run's run": (["show_run", LONG], "run id"),
    "show_run's run in digits": (["show_run", DIGITS], "no run"),
    "show_run --user": (["show_run", RUN, "--user", LONG], "no user"),
    "run_history's run": (["run_history", LONG], "run id"),
    "run_history --before": (["run_history", RUN, "--before", LONG], "--before"),
    "advance_run's run": (["advance_run", LONG], "run id"),
    "bulk_action's action": (["bulk_action", "preview", LONG, "--user", "olga"], "no action"),
    "bulk_action's job": (["bulk_action", "show", LONG, "--user", "olga"], "job id"),
    "bulk_action --user": (["bulk_action", "preview", "terminate", "--user", LONG], "no user"),
    "bulk_action --step": (["bulk_action", "start", "retry_step", "--user", "olga",
                            "--workflow", "test-orders", "--reason", "INC-7", "--step", LONG],
                           "step"),
    "bulk_action --status": (["bulk_action", "preview", "terminate", "--user", "olga",
                              "--status", LONG], "--status"),
    "bulk_action --workflow": (["bulk_action", "preview", "terminate", "--user", "olga",
                                "--workflow", LONG], "--workflow"),
    "dispatch's workflow": (["dispatch", "pause", LONG, "--user", "olga", "--reason", "INC-7"],
                            "no workflow"),
    "dispatch --system": (["dispatch", "pause", "test-orders", "--system", LONG, "--user",
                           "olga", "--reason", "INC-7"], "system"),
    "dispatch --user": (["dispatch", "pause", "test-orders", "--user", LONG, "--reason",
                         "INC-7"], "no user"),
    "schedules' workflow": (["schedules", "pause", LONG, "nightly", "--user", "olga",
                             "--reason", "INC-7"], "no workflow"),
    "schedules' schedule": (["schedules", "pause", "test-orders", LONG, "--user", "olga",
                             "--reason", "INC-7"], "no schedule"),
    "schedules tick --now": (["schedules", "tick", "--now", LONG], "--now"),
    "recovery_contract's workflow": (["recovery_contract", LONG], "unknown workflow"),
    "drill's workflow": (["drill", LONG], "unknown workflow"),
    "lint_migrations' app label": (["lint_migrations", LONG], "unknown app label"),
    "audit_checkpoint's file": (["audit_checkpoint", "check", f"/tmp/{LONG}"],
                                "cannot be read"),
    "verify_audit --archive": (["verify_audit", "--archive", f"/tmp/{LONG}"],
                               "no archive file"),
    # Not one of an argument's choices, which argparse refuses (audit.arguments).
    "run_action's action": (["run_action", RUN, LONG, "--user", "olga"],
                            "argument action: invalid choice"),
    "run_action --mode": (["run_action", RUN, "reconcile", "--user", "olga", "--mode", LONG],
                          "argument --mode: invalid choice"),
    "list_runs --step-status": (["list_runs", "--step-status", LONG],
                                "argument --step-status: invalid choice"),
    "list_runs --error-class": (["list_runs", "--error-class", LONG],
                                "argument --error-class: invalid choice"),
    "bulk_action's verb": (["bulk_action", LONG, "terminate", "--user", "olga"],
                           "argument verb: invalid choice"),
    "bulk_action --step-status": (["bulk_action", "preview", "terminate", "--user", "olga",
                                   "--step-status", LONG],
                                  "argument --step-status: invalid choice"),
    "bulk_action --error-class": (["bulk_action", "preview", "terminate", "--user", "olga",
                                   "--error-class", LONG],
                                  "argument --error-class: invalid choice"),
    "dispatch's subcommand": (["dispatch", LONG], "invalid choice"),
    "schedules' subcommand": (["schedules", LONG, "test-orders", "nightly"],
                              "invalid choice"),
    "audit_checkpoint's operation": (["audit_checkpoint", LONG],
                                     "argument operation: invalid choice"),
    # What argparse itself refuses: an argument no command takes, a value its type refuses.
    "list_runs' unrecognized argument": (["list_runs", LONG], "unrecognized arguments: 'uuu"),
    "list_runs' unrecognized option": (["list_runs", f"--{LONG}"],
                                       "unrecognized arguments: '--uuu"),
    "a subcommand's unrecognized argument": (["dispatch", "status", LONG],
                                             "unrecognized arguments"),
    "show_run's second run": (["show_run", RUN, LONG], "unrecognized arguments"),
    "list_runs -v": (["list_runs", "-v", LONG], "argument -v/--verbosity: invalid int value"),
    "run_history --verbosity": (["run_history", RUN, "--verbosity", LONG],
                                "invalid int value"),
    "seed_scale --runs": (["seed_scale", "--runs", LONG], "argument --runs"),
    "bench_runtime --runs": (["bench_runtime", "--runs", LONG], "argument --runs"),
    "bench_console --runs": (["bench_console", "--runs", DIGITS], "argument --runs"),
}


# Refused by their length, which the refusal says instead of repeating them.
BY_LENGTH = {
    "list_runs --search": (["list_runs", "--search", LONG], "--search"),
    "start_run's business key": (["start_run", "test-orders", LONG, "--input",
                                  '{"order": "o-1"}'], "business key"),
    "run_action --reason": (["run_action", RUN, "resume", "--user", "olga", "--reason", LONG],
                            "reason"),
}


def refusal(arguments: list) -> str:
    with pytest.raises(CommandError) as refused:
        call_command(*arguments, stdout=io.StringIO(), stderr=io.StringIO())
    return str(refused.value)


# What repeating a value adds to a refusal, cut short: 120 characters, quoted, then
# "... (100000 characters)"; a refusal may repeat two values (--call and --step).
REPEATED_AT_MOST = 2 * 150


@pytest.mark.parametrize("case", list(CASES))
def test_a_refusal_repeats_what_it_was_given_cut_short_on_one_line(operator, stuck_run, case):
    arguments, named = CASES[case]
    run_id = str(stuck_run.pk)
    said = refusal([run_id if a is RUN else a for a in arguments])
    assert "\n" not in said
    assert named in said, said
    # The same refusal, given a value ten characters long, differs only by what it repeats:
    # what else it says (the workflows registered, for a start of an unknown one; the choices,
    # for a value not one of them) is its own.
    short = refusal([run_id if a is RUN else a.replace(LONG, "u" * 10).replace(DIGITS, "9" * 10)
                     for a in arguments])
    assert len(said) <= len(short) + REPEATED_AT_MOST, (len(said), said[:600])
    if "registered: " not in said and "(choose from " not in said:
        assert len(said) < 400, (len(said), said[:600])


@pytest.mark.parametrize("case", list(BY_LENGTH))
def test_a_value_refused_for_its_length_is_not_repeated(operator, stuck_run, case):
    arguments, named = BY_LENGTH[case]
    said = refusal([str(stuck_run.pk) if a is RUN else a for a in arguments])
    assert "\n" not in said and len(said) < 400 and named in said, said


def test_a_drill_names_a_sandbox_url_it_cannot_reach_cut_short(settings):
    # The refusal's own advice (how to start the demo's sandbox) takes most of its line.
    settings.SANDBOX_ENABLED = True
    url = "http://ops:Secret-Sandbox-Pw@" + "a" * 64 + "." + "b" * 60_000
    said = refusal(["drill", "invoice-approval", "--sandbox", url])
    assert "\n" not in said and len(said) < 700, (len(said), said[:700])
    assert "characters) (from --sandbox): InvalidURL: invalid host 'aaaa" in said, said
    assert "Secret-Sandbox-Pw" not in said


PROJECT_APPS = ("console", "api", "observability", "archive", "approvals", "runs", "audit",
                "demo")


@pytest.mark.parametrize("arguments", [
    # Whatever else argparse repeats whole is cut where every refusal passes: an option
    # that may be one of several, a value given to an option that takes none.
    ["list_runs", f"--s={LONG}"],
    ["dispatch", "status", f"--json={LONG}"],
    ["bench_runtime", f"--fresh-database={LONG}"],
    # So many arguments no command takes that, each cut short, they still make a long line.
    ["list_runs", *["u" * 8] * 12_500],
])
def test_what_else_argparse_repeats_is_cut_short_on_one_line(arguments):
    said = refusal(arguments)
    assert "\n" not in said and len(said) < REFUSAL_SHOWN + 100, (len(said), said[:600])
    assert "(100000 characters)" not in said and "characters)" in said, said[-200:]


@pytest.mark.parametrize("arguments", [
    ["list_runs", "a\nb\x1b[31m"], ["list_runs", "--s=a\nb\x1b[31m"],
    ["list_runs", "-v", "a\nb\x1b[31m"],
])
def test_a_line_break_or_a_terminals_escape_argparse_repeats_is_written_as_its_escape(arguments):
    said = refusal(arguments)
    assert "\n" not in said and "\x1b" not in said
    assert "a\\nb\\x1b[31m" in said, said


def test_every_commands_parser_and_its_subcommands_repeat_what_they_were_given_cut_short():
    # A command made later without the base that cuts its refusals short fails here rather
    # than only when someone gives it 100,000 characters.
    commands = {name: app for name, app in get_commands().items()
                if app.split(".")[0] in PROJECT_APPS}
    assert {"run_action", "dispatch", "audit_checkpoint", "seed_scale"} <= set(commands)
    whole = [(name, parser.prog) for name, app in sorted(commands.items())
             for parser in parsers_within(
                 load_command_class(app, name).create_parser("manage.py", name))
             if not isinstance(parser, ValuesCutShortParser)]
    assert not whole, whole
