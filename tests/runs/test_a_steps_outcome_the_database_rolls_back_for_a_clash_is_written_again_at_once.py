"""A step's outcome whose write the database rolls back for its clash with another session (a
serialization failure under a role's default_transaction_isolation = serializable, a
deadlock) is written again at once, from the rows as the database holds them: the worker held
the outcome in memory, and dropping it left the step to be settled by key only once its lease
ran out. A real worker on serializable sessions; a real session updates the run's row while the
step's call is under way and commits while the worker's outcome waits for that row, so the
database refuses the outcome's write (SQLSTATE 40001). The call reaches the receiver once,
the outcome is the worker's, and nothing is taken back or looked up."""

import pytest

from audit.actions import AuditAction
from audit.chain import Actor, verify_chain
from audit.models import AuditRecord
from runs.bench_receiver import SlowReceiver
from runs.machine import transitions
from runs.machine.errors import Classified
from runs.machine.transitions import start_run
from runs.models import ErrorClass, Run, RunStatus, Step
from tests.processes import child_env, start_worker, stop, wait_for
from tests.runs.clash_sessions import SERIALIZABLE, other_session, waiting_for_a_row

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]

def test_an_outcome_rolled_back_for_a_serialization_failure_is_written_again_by_the_worker(
        tmp_path):
    url = child_env()["DATABASE_URL"] + SERIALIZABLE
    with SlowReceiver(delay=2) as receiver:
        # A lease long enough that only the worker's own outcome can complete the run while
        # the test waits: a take-back would come after it.
        worker = start_worker("clash", tmp_path, DATABASE_URL=url, VAR_DIR=tmp_path,
                              RUNS_LEASE_SECONDS=120)
        holder = other_session()
        try:
            run = start_run(workflow="test-two-remote-calls", business_key="clash",
                            input={"n": 1, "url": receiver.url},
                            actor=Actor.system("clash-test"))[0]
            wait_for(lambda: receiver.held, timeout=60, interval=0.05,
                     what="the first call to reach the receiver")
            # The row changes under the worker's call: its outcome's statement waits for it,
            # then finds it changed since its snapshot and is refused.
            holder.execute("UPDATE runs_run SET cancel_requested = cancel_requested "
                           "WHERE id = %s", [run.pk])
            wait_for(lambda: waiting_for_a_row(holder), timeout=60, interval=0.05,
                     what="the worker's outcome to wait for the run's row")
            holder.commit()
            wait_for(lambda: Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED,
                     timeout=60, interval=0.2, what="the run to complete by its worker")
        finally:
            holder.close()
            stop(worker)
        assert sorted(receiver.posts.values()) == [1, 1]

    first = Step.objects.get(run=run, name="first-call")
    assert first.status == "succeeded"
    assert first.attempt == 1
    assert first.remote_ref == receiver.effects[first.idempotency_key]
    actions = list(AuditRecord.objects.filter(run_id=run.pk).values_list("action", flat=True))
    assert AuditAction.LEASE_EXPIRED not in actions
    assert AuditAction.OUTCOME_UNKNOWN not in actions
    assert actions.count(AuditAction.SUCCEEDED) == 2
    said = (tmp_path / "clash.log").read_text()
    assert "could not serialize access" in said  # the database did refuse it once
    assert "Traceback" not in said and "raised unexpected" not in said


# The same, in this process and on each of record_outcome's two paths (the one statement of
# a success; the locking transaction of a failure): the database refuses the first write of
# a step row once, as a clash (a trigger raising SQLSTATE 40001), and the checkpoint written
# again is the one the rows as the database holds them call for, not one applied a second
# time to rows the refused attempt had already changed in memory (tests/runs/conftest.py's
# clash_once).
def _claimed(key: str):
    run = start_run(workflow="test-two-remote-calls", business_key=key,
                    input={"n": 1, "url": "http://127.0.0.1:9/"},
                    actor=Actor.system("clash-test"), wake=False)[0]
    lease = transitions.claim_run(run.pk, worker="w1")
    assert lease.work.name == "first-call"
    return run, lease


def _steps(run) -> dict:
    return {s.name: (s.status, s.attempt) for s in Step.objects.filter(run=run)}


def test_a_success_refused_once_is_written_from_the_rows_the_database_holds(clash_once):
    run, lease = _claimed("hot-path")
    clash_once("runs_step", "UPDATE")
    lease = transitions.record_outcome(lease, lease.work,
                                       transitions.Outcome(succeeded=True, value={"id": "E-1"},
                                                           remote_ref="E-1"))
    assert lease.work.name == "second-call" and not lease.settle_first
    assert _steps(run) == {"first-call": ("succeeded", 1), "second-call": ("running", 1)}
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
    actions = list(AuditRecord.objects.filter(run_id=run.pk).order_by("seq")
                   .values_list("action", flat=True))
    assert actions == ["started", "claimed", "succeeded"]
    assert verify_chain(AuditRecord.objects.filter(run_id=run.pk).order_by("seq")) is None


def test_a_failure_refused_once_is_written_from_the_rows_the_database_holds(clash_once):
    run, lease = _claimed("locking-path")
    clash_once("runs_step", "UPDATE")
    lease = transitions.record_outcome(
        lease, lease.work,
        transitions.Outcome(succeeded=False, error=Classified(ErrorClass.TRANSIENT, "HTTP 503")))
    assert lease.finished
    assert _steps(run) == {"first-call": ("scheduled", 1), "second-call": ("pending", 0)}
    assert Run.objects.get(pk=run.pk).status == RunStatus.WAITING
    actions = list(AuditRecord.objects.filter(run_id=run.pk).order_by("seq")
                   .values_list("action", flat=True))
    assert actions == ["started", "claimed", "retry_scheduled"]
    assert verify_chain(AuditRecord.objects.filter(run_id=run.pk).order_by("seq")) is None
