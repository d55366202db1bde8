"""A real cancel (pg_cancel_backend) or a real end of the session (pg_terminate_backend),
sent from another session at one chosen statement of this process's connection; or a
session ended at once (end_session, end_this_session).

The chosen statement is not sent: in its place the connection runs a long pg_sleep, and the
other session, once it sees this backend sleeping, cancels it (or ends the session). What
the code under test gets back is what the server answers a statement cancelled as it ran:
the transaction aborted (or the connection gone), nothing of that statement written."""

import threading
import time
from collections.abc import Callable
from contextlib import contextmanager

import psycopg
from django.db import connection

# Long enough that only the other session's cancel ends it.
SLEEP = "SELECT pg_sleep(120)"


def other_session(*, autocommit: bool = True) -> psycopg.Connection:
    s = connection.settings_dict
    return psycopg.connect(host=s["HOST"], port=s["PORT"] or 5432, user=s["USER"],
                           password=s["PASSWORD"] or None, dbname=s["NAME"],
                           autocommit=autocommit)


def end_session(pid: int) -> None:
    """End backend `pid`'s session from another one, waiting until it is gone."""
    with other_session() as other:
        (done,) = other.execute("SELECT pg_terminate_backend(%s, 5000)", [pid]).fetchone()
    assert done, f"backend {pid} was not ended"


def end_this_session() -> None:
    """End this process's own session from another one, waiting until it is gone."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    end_session(pid)


def _stop_when_sleeping(pid: int, terminate: bool, done: list) -> None:
    with other_session() as other:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            sleeping = other.execute(
                "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND state = 'active' "
                "AND query = %s", [pid, SLEEP]).fetchone()
            if sleeping:
                stop = "pg_terminate_backend(%s, 5000)" if terminate else \
                    "pg_cancel_backend(%s)"
                done.append(other.execute(f"SELECT {stop}", [pid]).fetchone()[0])
                return
            time.sleep(0.02)


@contextmanager
def cancelled(where: Callable[[str], bool], *, nth: int = 1, terminate: bool = False):
    """Within the block, the `nth` statement of this connection for which `where(sql)`
    holds is cancelled from another session (ended with its session if `terminate`).
    Yields a list that holds that statement's text once it was cancelled: a test checks it
    to know its aim was met."""
    hit: list[str] = []
    seen = [0]

    def aim(execute, sql, params, many, context):
        if hit or not where(sql):
            return execute(sql, params, many, context)
        seen[0] += 1
        if seen[0] != nth:
            return execute(sql, params, many, context)
        hit.append(sql)
        stopped: list = []
        pid = context["connection"].connection.info.backend_pid
        stopper = threading.Thread(target=_stop_when_sleeping, args=(pid, terminate, stopped))
        stopper.start()
        try:
            return execute(SLEEP, None, False, context)
        finally:
            stopper.join()
            assert stopped == [True], f"the cancel of backend {pid} was not delivered"

    with connection.execute_wrapper(aim):
        yield hit
