"""A search of an admin list of rows of runs (audit records, approval requests) sorts the
rows of the runs it found. Walking the table newest first and keeping those rows, as
PostgreSQL chose to when the runs found seemed to have many, read the whole table when the
runs found are old ones: their rows are at the far end of the walk."""

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import ApprovalRequest
from audit.models import AuditRecord

from .scale import analyzed, bulk_runs, page_reads
from .test_admin_lists import admin_client  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db

OLD, NEWER = 40, 3000


def audit_records(run, seqs):
    now = timezone.now()
    return [AuditRecord(run=run, seq=seq, action="succeeded", actor_kind="system",
                        actor_label="worker", created_at=now, prev_hash="p", hash="h")
            for seq in seqs]


def approval_requests(run, count):
    now = timezone.now()
    return [ApprovalRequest(run=run, step_name=f"approve-{n}", snapshot={}, snapshot_hash="h",
                            status="approved", timeout=timedelta(hours=1),
                            on_timeout="reject", requested_at=now, due_at=now,
                            settled_at=now)
            for n in range(count)]


@pytest.mark.parametrize(("url", "table", "rows_of"), [
    ("/admin/audit/auditrecord/", "audit_auditrecord",
     lambda run, count: AuditRecord.objects.bulk_create(audit_records(run, range(count)))),
    ("/admin/approvals/approvalrequest/", "approvals_approvalrequest",
     lambda run, count: ApprovalRequest.objects.bulk_create(approval_requests(run, count))),
], ids=["audit records", "approval requests"])
def test_a_search_for_old_runs_reads_their_rows_not_the_table(admin_client, url,  # noqa: F811
                                                                table, rows_of):
    old_runs = bulk_runs(f"inv-2019-{n}" for n in range(OLD))
    for run in old_runs:
        rows_of(run, 10)
    # Every run since has more rows than the old ones together, all newer than theirs.
    for run in bulk_runs(f"inv-2026-{n}" for n in range(3)):
        rows_of(run, NEWER)
    analyzed(table, "runs_run")

    page, reads = page_reads(admin_client, url + "?q=inv-2019-", table)

    assert {row.run_id for row in page.context["cl"].result_list} <= {r.pk for r in old_runs}
    assert len(page.context["cl"].result_list) == 50
    listed = [sql for sql in reads if "ORDER BY" in sql]
    assert listed, reads
    # The old runs' 400 rows, each along its run's index; never the newer 9,000.
    assert all(count <= OLD * 10 + 50 for count in reads.values()), reads
