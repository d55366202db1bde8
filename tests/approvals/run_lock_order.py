"""Whether a part of the approvals app locks a run before its request, as a decision does
(approvals.decisions.decide: the run, then the request). In the other order the part and
a decision arriving at that moment each hold what the other waits for, and PostgreSQL
aborts one of them as a deadlock. A part of the sweep does not wait for a run another
session holds: it leaves it to the next pass (approvals.requests.lock_run)."""

import threading
import time

import psycopg
from django.db import connection


def session(*, autocommit: bool = False) -> psycopg.Connection:
    """A session of its own (standing in for a decision that holds the run's lock)."""
    s = connection.settings_dict
    return psycopg.connect(host=s["HOST"], port=s["PORT"] or 5432, user=s["USER"],
                           password=s["PASSWORD"] or None, dbname=s["NAME"],
                           autocommit=autocommit)


def blocked_on_a_lock(timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    # Autocommit: inside a transaction pg_stat_activity keeps the view of its first read.
    with session(autocommit=True) as probe:
        while time.monotonic() < deadline:
            waiting = probe.execute("SELECT count(*) FROM pg_stat_activity "
                                    "WHERE wait_event_type = 'Lock' AND datname = %s",
                                    [connection.settings_dict["NAME"]]).fetchone()[0]
            if waiting:
                return True
            time.sleep(0.05)
    return False


def while_a_decision_holds_the_run(run_id: int, request_id: int, part) -> list:
    """Run `part` (a part of the approvals sweep) while another session holds run `run_id`
    locked: it neither waits for the run (a held run would hold the whole pass, and every
    other run's requests with it) nor locks request `request_id` before its run (the order a
    decision locks in; the other deadlocks): it leaves both to the next pass, and the
    request is still free. Then `part` again once the run is free; returns what that
    returned (one item)."""
    decider = session()
    decider.execute("SELECT id FROM runs_run WHERE id = %s FOR UPDATE", [run_id])
    passed = []

    def work():
        try:
            passed.append(part())
        finally:
            connection.close()

    thread = threading.Thread(target=work)
    thread.start()
    try:
        thread.join(timeout=60)
        assert not thread.is_alive(), "the part waited for the run another session holds"
        # The decision would now lock the request: it is free, nobody deadlocks.
        decider.execute("SELECT id FROM approvals_approvalrequest WHERE id = %s "
                        "FOR UPDATE NOWAIT", [request_id])
    finally:
        decider.commit()
        decider.close()
        thread.join(timeout=30)
    return [part()]
