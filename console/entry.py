"""What manage.py does with a condition its user can cause and cannot fix by reading a
traceback: a database that cannot be reached ends the command in one line that says so."""

import sys

from django.core.management import execute_from_command_line


def execute_or_exit(program: str, argv: list[str]) -> None:
    """Run the command `argv` names. A database that cannot be reached (down, restarting, a
    wrong DATABASE_URL) ends it with exit status 1 and a sentence naming what failed; any
    other error is the command's own and is left as it is."""
    from runs.execution.database_outage import CONNECTION_LOST, unreachable
    from runs.execution.outages import first_line

    try:
        execute_from_command_line(argv)
    except CONNECTION_LOST as exc:
        if not unreachable(exc):
            raise
        command = f"{program} {argv[1]}" if len(argv) > 1 else program
        print(f"{command}: the database cannot be reached ({first_line(exc)}); check "
              "DATABASE_URL and that PostgreSQL is running, then run the command again",
              file=sys.stderr)
        raise SystemExit(1) from None
