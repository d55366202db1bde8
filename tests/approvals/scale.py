"""A large deployment's approvals, built in bulk for the query-count tests: copies of one
real waiting test-approval run (its steps, its wait, its open request, the approvers'
grants and the notifications sent) spread over many workflows, plus decided ones. A few
hundred inserts in all however many rows: the copies go in with bulk_create."""

from datetime import timedelta

from django.contrib.auth.models import Group, Permission, User
from django.db import connection
from django.utils import timezone

from approvals.models import (
    DECIDE_CODENAME,
    ApprovalRequest,
    ApprovalRequestGroupObjectPermission,
    ApprovalRequestUserObjectPermission,
    Notification,
    NotificationKind,
    NotificationStatus,
    RequestKind,
    RequestStatus,
)
from runs.models import ApprovalWait, Run, RunStatus, Step, StepStatus, Workflow

BATCH = 2000


def _copy(obj, **changes):
    fields = {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields
              if not f.primary_key}
    fields.update(changes)
    return type(obj)(**fields)


def add_requests(template: ApprovalRequest, *, pending: int, decided: int = 0,
                 workflows: int = 50, prefix: str = "scale",
                 operator_actions: int = 0, requested_by: User | None = None) -> None:
    """Add `pending` waiting runs like `template`'s, each with its pending request granted to
    the group "approvers" and to its workflow's group ("<prefix>-wf-N"), with the request's
    notifications sent; `decided` completed runs with their approved, settled requests; and
    `operator_actions` pending four-eyes requests (retry_step) asked by `requested_by` on
    runs in attention, granted to ann by name. Due times lie days ahead: nothing is due."""
    run = template.run
    steps = list(Step.objects.filter(run=run))
    now = timezone.now()
    flows = [Workflow.objects.get_or_create(name=f"{prefix}-wf-{i}")[0]
             for i in range(workflows)]
    groups = [Group.objects.get_or_create(name=f"{prefix}-wf-{i}")[0] for i in range(workflows)]
    approvers = Group.objects.get(name="approvers")
    members = list(approvers.user_set.all())
    decide = Permission.objects.get(codename=DECIDE_CODENAME)
    ann = User.objects.filter(username="ann").first()
    total = pending + decided + operator_actions
    start = Run.objects.count()
    for offset in range(0, total, BATCH):
        numbers = range(offset, min(offset + BATCH, total))
        runs = []
        for n in numbers:
            flow = flows[n % workflows]
            status = (RunStatus.WAITING if n < pending else RunStatus.COMPLETED
                      if n < pending + decided else RunStatus.ATTENTION)
            runs.append(_copy(run, workflow_id=flow.pk, workflow_name=flow.name,
                              business_key=f"{prefix}:{start + n}", status=status,
                              created_at=now - timedelta(minutes=n),
                              updated_at=now - timedelta(minutes=n)))
        runs = Run.objects.bulk_create(runs)
        Step.objects.bulk_create([
            _copy(step, run_id=r.pk, status=(step.status if r.status == RunStatus.WAITING
                                             else StepStatus.SUCCEEDED))
            for r in runs for step in steps])
        ApprovalWait.objects.bulk_create([
            ApprovalWait(run=r, step_name=template.step_name, created_at=now)
            for r in runs if r.status == RunStatus.WAITING])
        made = []
        for n, r in zip(numbers, runs, strict=True):
            requested_at = now - timedelta(minutes=n % 5000)
            fields = {"run_id": r.pk, "requested_at": requested_at,
                      "due_at": now + timedelta(days=2, minutes=n % 5000),
                      "next_reminder_at": None}
            if n < pending:
                made.append(_copy(template, **fields))
            elif n < pending + decided:
                made.append(_copy(template, **fields, status=RequestStatus.APPROVED,
                                  decided_by_id=members[0].pk if members else None,
                                  decided_by_label="ann", decided_at=now,
                                  settled_at=now))
            else:
                made.append(_copy(template, **fields, kind=RequestKind.OPERATOR_ACTION,
                                  step_name="", action="retry_step",
                                  params={"step": "pay"}, requested_by_id=requested_by.pk,
                                  approvers=["user:ann"],
                                  snapshot={**template.snapshot, "reason": "scale",
                                            "requested_by": requested_by.username}))
        made = ApprovalRequest.objects.bulk_create(made)
        grants, user_grants, notes = [], [], []
        for n, approval in zip(numbers, made, strict=True):
            if approval.status != RequestStatus.PENDING:
                continue
            if approval.kind == RequestKind.OPERATOR_ACTION:
                user_grants.append(ApprovalRequestUserObjectPermission(
                    content_object=approval, user=ann, permission=decide))
                continue
            grants.append(ApprovalRequestGroupObjectPermission(
                content_object=approval, group=approvers, permission=decide))
            grants.append(ApprovalRequestGroupObjectPermission(
                content_object=approval, group=groups[n % workflows], permission=decide))
            notes += [Notification(
                request=approval, kind=NotificationKind.REQUEST, user=member,
                recipient=member.email, subject="approval needed", body="...",
                status=NotificationStatus.SENT, attempts=1, next_attempt_at=now,
                message_id=f"<scale-{approval.pk}-{member.pk}@example.com>",
                created_at=now, sent_at=now) for member in members]
        ApprovalRequestGroupObjectPermission.objects.bulk_create(grants)
        ApprovalRequestUserObjectPermission.objects.bulk_create(user_grants)
        Notification.objects.bulk_create(notes)
    with connection.cursor() as cursor:
        for table in ("runs_run", "runs_step", "runs_approvalwait", "approvals_approvalrequest",
                      "approvals_approvalrequestgroupobjectpermission",
                      "approvals_approvalrequestuserobjectpermission",
                      "approvals_notification"):
            cursor.execute(f"ANALYZE {table}")


def rows_read_by_a_sweep(now, tables) -> tuple[object, int]:
    """(the report, the rows of `tables` it read) of one approvals sweep at `now`, by scans
    of the tables or through their indexes, after ANALYZE. Tables this small are cheapest
    read whole: with that way closed, the rows read are those an index leaves to read, as
    on tables of any size."""
    from approvals import schedule

    def read() -> int:
        # Rows of `tables` read so far in this transaction (the test's).
        with connection.cursor() as cursor:
            cursor.execute("SELECT coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)), 0)"
                           " FROM pg_stat_xact_user_tables WHERE relname = ANY(%s)",
                           [list(tables)])
            return int(cursor.fetchone()[0])

    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"ANALYZE {table}")
        cursor.execute("SET enable_seqscan = off")
    try:
        before = read()
        report = schedule.sweep(now=now)
        return report, read() - before
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET enable_seqscan")
