"""A worker in the threads mode (celery --pool=threads, DB_POOL_MAX_SIZE) holds many steps
that wait on a remote system at once: they overlap, the worker's PostgreSQL sessions stay
within its pool, each step makes its effect once, and a SIGKILL with dozens in flight ends,
after lease expiry and a second worker, with every step's effect made exactly once."""

import threading
import time
import uuid
from datetime import timedelta

import pytest
from django.db import connection

from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from runs import bench_workflows  # noqa: F401 - registers bench-remote-1s here too
from runs.bench_receiver import SlowReceiver
from runs.machine.transitions import cancel, claim_run, expire_lease, heartbeat_many, start_run
from runs.models import Run, RunStatus, Step, StepStatus
from tests.processes import kill_hard, start_worker, stop, until_status, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]
STEPS = 50
POOL = 4
STARTER = Actor.system("in-flight-test")
MODULES = "tests.workflows,runs.bench_workflows"


@pytest.fixture
def receiver():
    with SlowReceiver(delay=1.0) as server:
        yield server


def _threads_worker(name, log_dir, application_name, **env):
    worker = start_worker(name, log_dir, pool="threads", concurrency=STEPS,
                          DB_POOL_MAX_SIZE=POOL, PGAPPNAME=application_name,
                          RUNS_EXTRA_WORKFLOW_MODULES=MODULES, **env)
    wait_for(lambda: " ready." in (log_dir / f"{name}.log").read_text(), timeout=60,
             what=f"worker {name} to be ready")
    return worker


def _sessions(application_name) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                       [application_name])
        return cursor.fetchone()[0]


def _start(receiver, prefix) -> list[Run]:
    return [start_run(workflow="bench-remote-1s", business_key=f"{prefix}-{i}",
                      input={"n": i, "url": receiver.url}, actor=STARTER)[0]
            for i in range(STEPS)]


def _one_effect_per_step(runs, receiver):
    steps = list(Step.objects.filter(run__in=runs))
    assert len(steps) == STEPS
    assert all(s.status == StepStatus.SUCCEEDED for s in steps)
    # Every step's key reached the receiver exactly once, and nothing else did.
    assert receiver.posts == {s.idempotency_key: 1 for s in steps}
    assert {s.remote_ref for s in steps} == set(receiver.effects.values())
    assert len(receiver.effects) == STEPS


def test_fifty_steps_wait_on_the_remote_at_once_within_a_bounded_pool(tmp_path, receiver):
    app = f"inflight-{uuid.uuid4().hex[:10]}"
    worker = _threads_worker("inflight", tmp_path, app)
    most_sessions, sampling = [0], threading.Event()

    def sample():
        while not sampling.is_set():
            most_sessions[0] = max(most_sessions[0], _sessions(app))
            time.sleep(0.05)

    try:
        started = time.monotonic()
        runs = _start(receiver, "overlap")
        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            wait_for(lambda: Run.objects.filter(pk__in=[r.pk for r in runs],
                                                status=RunStatus.COMPLETED).count() == STEPS,
                     timeout=60, interval=0.05, what="every run to complete")
        finally:
            sampling.set()
            sampler.join()
        elapsed = time.monotonic() - started
    finally:
        stop(worker)
    print(f"\n{STEPS} steps of 1 s: {elapsed:.1f}s, at most {receiver.max_holding} at the "
          f"receiver at once, at most {most_sessions[0]} worker sessions")
    # One at a time they would take 50 s; together, about one.
    assert elapsed < 15
    assert receiver.max_holding >= 20
    assert 1 <= most_sessions[0] <= POOL
    _one_effect_per_step(runs, receiver)


@pytest.fixture
def slower_receiver():
    # Calls of 3 s: twenty are in flight at once even on a host that starts seven steps a
    # second (with calls of 1 s a loaded CI host did not reach twenty).
    with SlowReceiver(delay=3.0) as server:
        yield server


def test_sigkill_with_dozens_in_flight_ends_with_each_effect_made_once(tmp_path,
                                                                      slower_receiver):
    receiver = slower_receiver
    app = f"inflight-{uuid.uuid4().hex[:10]}"
    first = _threads_worker("first", tmp_path, app, RUNS_LEASE_SECONDS=2)
    try:
        runs = _start(receiver, "crash")
        wait_for(lambda: receiver.holding >= 20, timeout=60, interval=0.01,
                 what="many steps in flight at the receiver")
        in_flight = receiver.holding
        kill_hard(first)
    finally:
        stop(first)
    ids = [r.pk for r in runs]
    unfinished = Run.objects.filter(pk__in=ids).exclude(status=RunStatus.COMPLETED).count()
    assert unfinished >= 20  # their outcomes were lost with the worker
    second = _threads_worker("second", tmp_path, app, RUNS_LEASE_SECONDS=2)
    try:
        for run in runs:
            until_status(run, RunStatus.COMPLETED, timeout=90)
    finally:
        stop(second)
    print(f"\nkilled with {in_flight} in flight and {unfinished} runs unfinished; all "
          f"completed by the second worker, {sum(receiver.posts.values())} POSTs")
    _one_effect_per_step(runs, receiver)


def test_one_heartbeat_keeps_alive_every_lease_of_a_call_longer_than_it(tmp_path):
    """Leases of 1.5 s, calls of 3 s, the sweeper taking back every expired lease all along:
    the process's heartbeat (one statement for all its steps) keeps every lease, so no run is
    taken back and each effect is made once. Without it each lease runs out mid-call."""
    app = f"inflight-{uuid.uuid4().hex[:10]}"
    with SlowReceiver(delay=3.0) as receiver:
        worker = _threads_worker("beating", tmp_path, app, RUNS_LEASE_SECONDS=1.5,
                                 RUNS_HEARTBEAT_SECONDS=0.3)
        try:
            runs = _start(receiver, "beat")
            wait_for(lambda: receiver.holding >= 20, timeout=30, interval=0.01,
                     what="many steps in flight at the receiver")
            for run in runs:
                until_status(run, RunStatus.COMPLETED, timeout=60)
        finally:
            stop(worker)
        taken_back = AuditRecord.objects.filter(
            run__in=runs, action__in=[AuditAction.LEASE_EXPIRED,
                                      AuditAction.STEP_LEASE_EXPIRED]).count()
        assert taken_back == 0
        _one_effect_per_step(runs, receiver)


def test_cancel_while_dozens_wait_on_the_remote_stops_each_run_after_its_call(tmp_path):
    """Cancel, read at the step boundary, works the same with many steps in one process:
    each call in flight ends and is recorded, and no cancelled run sends its next step. The
    runs cancelled are those whose first call reached the receiver within the last second:
    with calls of 4 s they are all still in flight when the last cancel is committed."""
    app = f"inflight-{uuid.uuid4().hex[:10]}"
    with SlowReceiver(delay=4.0) as receiver:
        worker = _threads_worker("cancel", tmp_path, app)
        try:
            runs = [start_run(workflow="test-two-remote-calls", business_key=f"cancel-{i}",
                              input={"n": i, "url": receiver.url}, actor=STARTER)[0]
                    for i in range(STEPS)]
            wait_for(lambda: receiver.holding >= 20, timeout=30, interval=0.01,
                     what="many first calls in flight")
            fresh = receiver.arrived_within(1.0)
            cancelled = set(Step.objects.filter(idempotency_key__in=fresh)
                            .values_list("run_id", flat=True))
            for run_id in cancelled:
                cancel(run_id, actor=STARTER, reason="the order was withdrawn")
            for run in runs:
                until_status(run, RunStatus.TERMINATED, RunStatus.COMPLETED, timeout=60)
        finally:
            stop(worker)
    assert len(cancelled) >= 10
    steps = {(s.run_id, s.name): s for s in Step.objects.filter(run__in=runs)}
    for run in Run.objects.filter(pk__in=[r.pk for r in runs]):
        first, second = steps[(run.pk, "first-call")], steps[(run.pk, "second-call")]
        assert first.status == StepStatus.SUCCEEDED
        if run.pk in cancelled:
            assert (run.status, second.status) == (RunStatus.TERMINATED, StepStatus.SKIPPED)
        else:
            assert (run.status, second.status) == (RunStatus.COMPLETED, StepStatus.SUCCEEDED)
    sent = {s.idempotency_key: 1 for s in steps.values() if s.status == StepStatus.SUCCEEDED}
    assert receiver.posts == sent


def test_one_heartbeat_extends_only_the_leases_still_held():
    """The process's heartbeat is fenced like every write: a lease the sweeper took back
    (its token moved) stays taken; the others are extended."""
    kept, lost = (start_run(workflow="test-orders", business_key=f"beat-{name}",
                            input={"order": name}, actor=STARTER, wake=False)[0]
                  for name in ("kept", "lost"))
    kept_lease, lost_lease = (claim_run(run.pk, worker="w1") for run in (kept, lost))
    expired_at = Run.objects.get(pk=lost.pk).lease_expires_at
    assert expire_lease(lost.pk, now=expired_at + timedelta(seconds=1))
    before = Run.objects.get(pk=kept.pk).lease_expires_at

    assert heartbeat_many({kept.pk: kept_lease.token, lost.pk: lost_lease.token}) == 1

    kept.refresh_from_db()
    lost.refresh_from_db()
    assert kept.lease_expires_at > before
    assert (lost.status, lost.lease_owner) == (RunStatus.QUEUED, "")
