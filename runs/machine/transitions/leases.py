"""A lease after its claim: heartbeats extend it (one run, or every run one process holds in
its remote calls, runs.machine.heartbeats), and expiry takes it back from a worker that stopped
beating. Both judge time by the database server's now() in the statement, so a worker or a
sweeper whose clock is wrong neither extends nor takes a live lease; and both go by the
fencing token: a lease taken back stays taken, and its old holder records nothing."""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.db.models import DateTimeField, ExpressionWrapper

from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord

from ... import store
from ...definitions import definition
from ...models import AttentionReason, Run, Step, StepStatus
from .kernel import (
    COMP,
    HELD,
    QUEUED,
    Change,
    Lease,
    audit_state,
    held_status,
    release_calls_in_flight,
    save_changes,
    taken_back,
    transition_time,
)
from .resends import due_at_once


def heartbeat(lease: Lease, *, now: datetime | None = None) -> bool:
    """Extend the lease of a long step or undo. False if the lease was lost to another
    worker. A run being compensated is held as a running one is (HELD): read as running
    only, a long undo that beat was told its lease was lost and was cut off at its deadline."""
    with store.current().transaction():
        extended = Run.objects.filter(
            pk=lease.run.pk, status__in=HELD, fencing_token=lease.token
        ).update(**extended_lease(now))
    return extended == 1


def extended_lease(now: datetime | None) -> dict:
    """The columns a heartbeat sets: the expiry is the database server's now() plus the
    lease, computed in the statement (unless a caller gives a time), so a worker whose clock
    runs ahead cannot give itself a longer lease."""
    stamp = store.time_in_statement(now)
    return {"lease_expires_at": ExpressionWrapper(
                stamp + timedelta(seconds=settings.RUNS_LEASE_SECONDS),
                output_field=DateTimeField()),
            "heartbeat_at": stamp}


def heartbeat_many(tokens: dict[int, int], *, now: datetime | None = None) -> int:
    """Extend, in one transaction, the leases of the runs one process holds in flight
    ({run id: fencing token}, runs.machine.heartbeats). Each lease is extended only while its
    token still matches: one taken back by the sweeper stays taken. Returns how many were."""
    if not tokens:
        return 0
    held = models.Q()
    for run_id, token in tokens.items():
        held |= models.Q(pk=run_id, fencing_token=token)
    db = store.current()
    with db.transaction():
        # A row locked by a transition (an outcome being recorded, the sweeper taking the
        # lease back) is skipped until the next beat, never waited on: a beat that waited
        # could deadlock with a sweep locking the same rows in another order.
        free = db.lock_runs(Run.objects.filter(held, status__in=HELD).order_by("pk")
                            .values_list("pk", flat=True), skip_locked=True)
        return Run.objects.filter(pk__in=free).update(**extended_lease(now))


def expire_lease(run_id: int, *, now: datetime | None = None, actor: Actor | None = None) -> bool:
    """Take a run back from a worker whose lease ran out (the sweeper calls this).

    The fencing token moves on, so the old worker can no longer record anything. A
    side-effecting step it was running becomes unknown (it may have acted) and is
    reconciled before anything is sent again; a read or decision step simply runs again.
    """
    return bool(expire_leases([run_id], now=now, actor=actor))


def expire_leases(run_ids: list[int], *, now: datetime | None = None,
                  actor: Actor | None = None) -> list[int]:
    """expire_lease for many runs at once, in one transaction and a few statements: after
    a mass worker death the sweeper takes hundreds of runs back, and one transaction each
    would cost a commit and half a dozen round trips per run. Returns the runs taken back;
    the others (a heartbeat came in time, another pass took them) are left as they are.
    The caller keeps batches small: every run of a batch stays locked until it commits.

    Whether a lease ran out is judged in the locking statement by the database server's
    now(), not by this process's clock: a sweeper whose clock runs ahead takes no live lease.
    """
    return _taken_back(Run.objects.filter(pk__in=run_ids, status__in=list(HELD),
                                          lease_expires_at__lte=store.time_in_statement(now)),
                       now, actor, why="lease of {owner} expired while running")


def hand_back(lease: Lease, *, why: str, by: str = "", now: datetime | None = None) -> bool:
    """A lease whose holder stopped working the run is given back before it runs out (its
    database session ended under it, so what it was about to write is lost; or the process
    died, and its worker, `by`, saw it die): taken back exactly as the sweeper takes back an
    expired lease (expire_leases: the step under way becomes unknown and is settled by its
    key before anything is sent again; counted among the take-backs in a row), only sooner.
    Nothing happens unless the lease still holds the run (its token). `why` says it in the
    records, done by `by` (the holder itself by default). Returns whether it was handed
    back."""
    return bool(_taken_back(Run.objects.filter(pk=lease.run.pk, status__in=list(HELD),
                                               fencing_token=lease.token),
                            now, Actor.system(by or lease.worker),
                            why="lease of {owner} handed back while running: " + why,
                            handed_back=why))


def lease_held_by(run_id: int, worker: str) -> Lease | None:
    """The lease `worker` (a process's name in leases) holds on the run, with the token of
    its claim, or None: what a worker hands back for one of its pool processes that died
    holding it (runs.execution.lost_pool_process). The dead process claims nothing more, and
    any claim since put its own name on the run, so while the run carries this name the
    token read here is the dead process's; hand_back goes by the token all the same."""
    run = (Run.objects.filter(pk=run_id, status__in=list(HELD), lease_owner=worker)
           .only("pk", "fencing_token", "lease_owner").first())
    if run is None:
        return None
    return Lease(run=run, steps=[], token=run.fencing_token, worker=worker, definition=None)


def _taken_back(held, now: datetime | None, actor: Actor | None, *, why: str,
                handed_back: str = "") -> list[int]:
    db = store.current()
    with db.transaction():
        # Locked in id order, as every batch locks them: two batches cannot deadlock.
        runs = db.lock_runs(held.order_by("pk"))
        # Stamped in the same transaction: now() is the time the locks were taken.
        now = transition_time(now)
        running: dict[int, list[Step]] = {run.pk: [] for run in runs}
        # A compensation in flight holds its step's lease owner (cleared when it ends).
        in_flight = models.Q(status=StepStatus.RUNNING) | (
            models.Q(status=StepStatus.COMPENSATING) & ~models.Q(lease_owner=""))
        for step in Step.objects.filter(in_flight, run_id__in=list(running)):
            running[step.run_id].append(step)
        in_a_row = take_backs_in_a_row_of(runs)
        save_changes([_take_back(run, running[run.pk], now, actor, in_a_row[run.pk] + 1,
                                 why=why, handed_back=handed_back)
                      for run in runs])
    return [run.pk for run in runs]


# What a worker that stops before recording anything leaves on the run's chain: its claim,
# the intents of the calls it began, and the take-back of its lease.
NOTHING_RECORDED = frozenset({
    AuditAction.CLAIMED, AuditAction.INTENT, AuditAction.TOOL_CALL_INTENT,
    AuditAction.COMPENSATION_INTENT, AuditAction.TOOL_CALL_COMPENSATION_INTENT,
    AuditAction.STEP_LEASE_EXPIRED, AuditAction.LEASE_EXPIRED,
})


def take_backs_in_a_row(run_id: int) -> int:
    """How many times the run was taken back from a stopped worker with nothing recorded
    between (take_backs_in_a_row_of, for one run)."""
    run = Run.objects.only("audit_seq").get(pk=run_id)
    return take_backs_in_a_row_of([run])[run.pk]


def take_backs_in_a_row_of(runs: list[Run]) -> dict[int, int]:
    """{run id: how many times it was taken back from a stopped worker with nothing recorded
    between}: the same point failing again and again (a checkpoint the database refuses, a
    step that kills its process), read from the newest end of each run's chain, for a whole
    batch in one query. An outcome, a lookup's verdict, an operator's action end the count."""
    # Between two take-backs lie a claim and a few intents and step take-backs: a tail of
    # this length holds the limit's take-backs unless an agent had many calls in flight, in
    # which case the count comes out lower and the run is held a little later.
    span = settings.RUNS_TAKE_BACKS_BEFORE_ATTENTION * 8
    tails = models.Q()
    for run in runs:
        tails |= models.Q(run_id=run.pk, seq__gt=run.audit_seq - span)
    counts, ended = dict.fromkeys((run.pk for run in runs), 0), set()
    if not runs:
        return counts
    for run_id, action in (AuditRecord.objects.filter(tails).order_by("run_id", "-seq")
                           .values_list("run_id", "action")):
        if run_id in ended:
            continue
        if action not in NOTHING_RECORDED:
            ended.add(run_id)
        else:
            counts[run_id] += action == AuditAction.LEASE_EXPIRED
    return counts


def _take_back(run: Run, running: list[Step], now: datetime, actor: Actor | None,
               in_a_row: int, *, why: str, handed_back: str = "") -> Change:
    change = Change(run, "expire_lease", actor or Actor.system("sweeper"), now)
    before = audit_state(run)
    previous_owner = run.lease_owner
    why = why.replace("{owner}", previous_owner)
    run.fencing_token += 1
    for step in running:
        # The record of the attempt the dead worker left in the row (it carries its intent).
        step_before = step.status
        if step_before != StepStatus.COMPENSATING:  # an undo is sent again with its own key
            taken_back(step, step.kind, why)
        if step.kind == definition.AGENT:
            # The calls the dead worker left running are settled now, not at the next
            # claim, so that a person's terminate and the four-eyes count see them. The
            # step itself goes back to pending (taken_back): the next claim records its
            # intent again, and its agent settles an unknown call by key first.
            release_calls_in_flight(change, step, action=AuditAction.STEP_LEASE_EXPIRED,
                                    why=why)
        step.lease_owner, step.lease_expires_at = "", None
        change.step_changed(step)
        change.audit(AuditAction.STEP_LEASE_EXPIRED, step=step,
                     before={"step_status": step_before},
                     after={"step_status": step.status})
    if in_a_row >= settings.RUNS_TAKE_BACKS_BEFORE_ATTENTION:
        # Trying again would stop there again: a person looks (the workers' logs say why).
        # What may have acted is unknown by now, and is settled by key when the run resumes.
        where = ", ".join(step.name for step in running) or run.current_step or "its claim"
        change.move(held_status(run), reason=AttentionReason.WORKERS_KEEP_STOPPING,
                    message=f"taken back {in_a_row} times in a row from workers that stopped "
                            f"at {where} before recording anything; held for a person: see "
                            f"the workers' logs, then resume to try again")
    elif run.status == COMP:
        # The compensation in flight is sent again with its own key by the next worker.
        change.move(COMP)
        run.lease_owner, run.lease_expires_at = "", None
        run.next_wake_at = due_at_once(now)
        change.wake = True
    else:
        change.move(QUEUED)
    change.audit(AuditAction.LEASE_EXPIRED, before=before, after=audit_state(run),
                 data={"previous_owner": previous_owner, "in_a_row": in_a_row,
                       **({"handed_back": handed_back} if handed_back else {})})
    return change
