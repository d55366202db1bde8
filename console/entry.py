"""What manage.py does with a condition its user can cause and cannot fix by reading a
traceback: a database that cannot be reached ends the command in one line that says so, a
reader of its output that stops early (`| head`) ends it quietly, and an output that takes
nothing (a full disk, a closed descriptor) or a Ctrl-C is said in one line."""

import os
import select
import sys

from django.core.exceptions import ImproperlyConfigured
from django.core.management import execute_from_command_line


def execute_or_exit(program: str, argv: list[str]) -> None:
    """Run the command `argv` names. A database that cannot be reached (down, restarting, a
    wrong DATABASE_URL) ends it with exit status 1 and a sentence naming what failed, and so
    does one that would not wait (a row held by another session, a cancelled statement) or
    refuses writes (read-only, a standby); a connection lost as a change was committed, with
    what the database says of it when asked afterwards (exit status 0 where it says it was
    done); a
    configuration refused while the apps load, with status 2 and its one line; any other
    error is the command's own and is left as it is."""
    from django.db import DatabaseError

    from runs.error_text import first_line
    from runs.execution.database_outage import (
        CONNECTION_LOST,
        commit_under_way,
        connections_full,
        connections_full_detail,
        refused_change_detail,
        refuses_writes,
        unreachable,
        would_not_wait,
    )
    from runs.execution.lost_commit import COMMITTED, NOT_COMMITTED, commit_outcome, door

    command = f"{program} {argv[1]}" if len(argv) > 1 else program
    output = sys.stdout
    if output is None:
        # Started with its standard output closed (`>&-`): the command would do its work and
        # then fail as it says so, which reads as work not done. Refused before any.
        print(f"{command}: standard output is closed, so the command could not say what it "
              "did; give it somewhere to write (> /dev/null to discard it); nothing was done",
              file=sys.stderr)
        raise SystemExit(1)
    sys.stdout = _Output(output)
    try:
        # Its commits are answered once it acts as a proven person (console.cli.proven).
        with door(answering=False):
            execute_from_command_line(argv)
        # Flushed here, where a reader that went away is caught, rather than at exit.
        sys.stdout.flush()
    except ImproperlyConfigured as exc:
        # Raised while the apps load (a workflow module that does not exist, runs.apps): the
        # configuration's fault, said as load_settings_or_exit says a malformed variable.
        print(f"{program}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        # Ctrl-C: the person stopped it. A transaction under way is rolled back as the
        # interrupt leaves it (atomic), unless the interrupt came as it committed: then
        # nobody here knows, so the person looks. What an earlier one committed stays.
        print(f"{command}: interrupted (Ctrl-C); the transaction under way, if any, was "
              "rolled back unless it was committing at that instant, and what the command "
              "committed before stays: look (show_run, list_runs) before running it again",
              file=sys.stderr)
        raise SystemExit(130) from None
    except OutputRefused as exc:
        # Python would flush what is left at exit and fail there too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), output.fileno())
        print(f"{command}: its output could not be written ({exc.problem}), so what it "
              "printed is incomplete; it may have done its work: look (show_run, list_runs) "
              "before running it again", file=sys.stderr)
        raise SystemExit(1) from None
    except BrokenPipeError:
        if not _stdout_closed():
            raise  # another pipe or socket: the command's own error
        # Python would flush stdout again at exit and fail there too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(1) from None
    except DatabaseError as exc:
        if refuses_writes(exc):
            # Read-only (a standby, a DBA's setting): the command's transaction was refused
            # before anything of it was written; commands that only read still work.
            print(f"{command}: {refused_change_detail(exc)}", file=sys.stderr)
            raise SystemExit(1) from None
        if not isinstance(exc, CONNECTION_LOST):
            raise
        if would_not_wait(exc):
            # A row another session held past lock_timeout, a statement_timeout, a cancel:
            # the database answers, and what the command was doing in that transaction was
            # rolled back. Not "cannot be reached", which sends the person to the wrong place.
            print(f"{command}: the database would not wait ({first_line(exc)}): a record "
                  "it needed was held by another session, or the statement was cancelled; "
                  "the transaction under way was rolled back: run the command again",
                  file=sys.stderr)
            raise SystemExit(1) from None
        if not unreachable(exc):
            raise
        if commit_under_way(exc):
            lost = (f"{command}: the connection to the database was lost as the command's "
                    f"change was committed ({first_line(exc)})")
            outcome = commit_outcome(exc)
            if outcome == COMMITTED:
                # Asked afterwards, the database says it committed: done, though its
                # answer was lost. Exit status 0: a script must not run it again.
                print(f"{lost}, and the database says it committed it: it was done; see "
                      "what it left (show_run, list_runs) and do not run the command again",
                      file=sys.stderr)
                raise SystemExit(0) from None
            if outcome == NOT_COMMITTED:
                print(f"{lost}, and the database says it did not commit it: it was not "
                      "done; run the command again", file=sys.stderr)
                raise SystemExit(1) from None
            # The server may have committed before the connection went, and cannot be asked
            # now: running the command again blind could act twice where an action allows it.
            print(f"{lost}: it may have been done; look (show_run, list_runs) before running "
                  "the command again", file=sys.stderr)
            raise SystemExit(1) from None
        if connections_full(exc):
            print(f"{command}: {connections_full_detail(exc)}", file=sys.stderr)
            raise SystemExit(1) from None
        print(f"{command}: the database cannot be reached ({first_line(exc)}); check "
              "DATABASE_URL and that PostgreSQL is running, then run the command again",
              file=sys.stderr)
        raise SystemExit(1) from None
    finally:
        sys.stdout = output


class OutputRefused(Exception):
    """Standard output refused what the command wrote. Not an OSError: a command's own
    `except OSError` (a file it writes, a storage) must not take it for its own failure."""

    def __init__(self, error: OSError):
        super().__init__(error)
        self.problem = error.strerror or str(error)


class _Output:
    """sys.stdout, whose refusals (a full disk, an I/O error) are told apart from the
    command's own errors. A reader that went away stays a BrokenPipeError (said nothing)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputRefused(exc) from exc

    def flush(self):
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputRefused(exc) from exc

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _stdout_closed() -> bool:
    """Whether nobody reads stdout any more. Asked of the pipe itself: the failed write
    has left nothing in the buffer whose flush would tell."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll here, or no file behind stdout
        return False
