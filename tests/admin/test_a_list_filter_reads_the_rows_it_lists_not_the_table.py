"""Every filter of the admin's lists of tables that grow reads the rows it lists (and the
count's first COUNT_CAP + 1), never the table: a value few rows have (an expired request, a
failed notification, a person's audit records, a compensated archived run) was found by
reading every row. Each table here holds 3 * COUNT_CAP rows of its common values; each
choice of each filter is asked for. A list with no index for a filter has no such filter
(the tool calls: no index may hold a call's status, which its checkpoints change)."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from api.models import WebhookDelivery, WebhookSubscriber
from approvals.models import ApprovalRequest, Notification
from archive.models import ArchivedRun, ArchiveFile
from audit.actions import ROUTINE_ACTIONS
from audit.admin import COUNT_CAP
from audit.models import AccessRecord, AuditRecord
from runs.models import ExternalEvent, Run, RunEvent, Step, ToolCall, Workflow
from tests.factories import new_run

from .scale import analyzed, bulk_runs, page_reads
from .test_admin_lists import admin_client  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db

ROWS = 3 * COUNT_CAP


def runs():
    bulk_runs(f"k-{n}" for n in range(ROWS))
    Workflow.objects.get_or_create(name="test-saga", defaults={"created_at": timezone.now()})


def audit_records():
    run = bulk_runs(["k-1"])[0]
    now = timezone.now()
    AuditRecord.objects.bulk_create(
        AuditRecord(run=run, seq=n, action="succeeded" if n % 2 else "retry_scheduled",
                    actor_kind="system", actor_label="worker", created_at=now,
                    prev_hash="p", hash="h") for n in range(ROWS))


def access_records():
    now = timezone.now()
    AccessRecord.objects.bulk_create(
        AccessRecord(seq=n, action="object_permission_granted", subject=f"user u{n}",
                     actor_kind="user", actor_label="root", created_at=now, prev_hash="p",
                     hash="h") for n in range(1, ROWS + 1))


def approval_requests():
    run = bulk_runs(["k-1"])[0]
    now = timezone.now()
    requests = ApprovalRequest.objects.bulk_create(
        ApprovalRequest(run=run, step_name=f"approve-{n}", snapshot={}, snapshot_hash="h",
                        status="approved", timeout=timedelta(hours=1), on_timeout="reject",
                        requested_at=now, due_at=now, settled_at=now) for n in range(ROWS))
    return requests


def notifications():
    request = approval_requests()[0]
    now = timezone.now()
    Notification.objects.bulk_create(
        Notification(request=request, kind="request", recipient="a@example.com", subject="s",
                     body="b", status="sent", next_attempt_at=now, message_id=f"m{n}",
                     created_at=now, sent_at=now) for n in range(ROWS))


def tool_calls():
    step = Step.objects.filter(run=new_run()).first()
    now = timezone.now()
    ToolCall.objects.bulk_create(
        ToolCall(step=step, turn=1, index=n, call_id=f"c{n}", tool="t", args_hash="h",
                 status="succeeded", idempotency_key=uuid.uuid4().hex, updated_at=now)
        for n in range(ROWS))


def external_events():
    now = timezone.now()
    ExternalEvent.objects.bulk_create(
        ExternalEvent(workflow_name="test-orders", source="psp", event_id=f"e{n}",
                      event_name="paid", correlation_key=f"k-{n}", received_at=now,
                      consumed_run_id=n, consumed_at=now) for n in range(ROWS))


def webhook_deliveries():
    run = bulk_runs(["k-1"])[0]
    now = timezone.now()
    events = RunEvent.objects.bulk_create(
        RunEvent(run=run, status_from="queued", status_to="running", created_at=now)
        for _ in range(ROWS))
    receiver = WebhookSubscriber.objects.create(name="receiver", url="https://r.example/",
                                                secret="s")
    WebhookSubscriber.objects.create(name="idle", url="https://i.example/", secret="s")
    WebhookDelivery.objects.bulk_create(
        WebhookDelivery(subscriber=receiver, event=event, delivery_id=uuid.uuid4(),
                        status="delivered", next_attempt_at=now, delivered_at=now)
        for event in events)


def archived_runs():
    flow, _ = Workflow.objects.get_or_create(name="test-orders",
                                             defaults={"created_at": timezone.now()})
    Workflow.objects.get_or_create(name="test-saga", defaults={"created_at": timezone.now()})
    now = timezone.now()
    archive = ArchiveFile.objects.create(name="runs/a.jsonl.gz", sha256="a" * 64, size=1,
                                         run_count=ROWS, record_count=ROWS, heads={},
                                         created_at=now, created_by="test")
    ArchivedRun.objects.bulk_create(
        ArchivedRun(original_run_id=n, workflow=flow, workflow_name=flow.name,
                    workflow_version=1, business_key=f"k-{n}", input_hash="h",
                    final_status="completed", created_at=now, archived_at=now,
                    archive_file=archive) for n in range(ROWS))


TABLES = [
    (Run, runs), (AuditRecord, audit_records), (AccessRecord, access_records),
    (ApprovalRequest, approval_requests), (Notification, notifications),
    (ToolCall, tool_calls), (ExternalEvent, external_events), (WebhookDelivery, webhook_deliveries),
    (ArchivedRun, archived_runs),
]


@pytest.mark.parametrize(("model", "seed"), TABLES, ids=[m.__name__ for m, _ in TABLES])
def test_each_choice_of_each_filter_reads_no_more_than_it_lists(admin_client, model,  # noqa: F811
                                                                  seed):
    seed()
    table = model._meta.db_table
    analyzed(table)
    url = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
    changelist = admin_client.get(url).context["cl"]
    choices = [choice["query_string"] for spec in changelist.filter_specs
               for choice in spec.choices(changelist) if choice["query_string"] != "?"]
    for query in choices:
        _, reads = page_reads(admin_client, url + query, table)
        assert reads, query
        assert max(reads.values()) <= COUNT_CAP + 1, (query, reads)


def test_the_audit_records_are_filtered_by_their_uncommon_actions_only(admin_client):  # noqa: F811
    changelist = admin_client.get("/admin/audit/auditrecord/").context["cl"]
    offered = {choice["display"] for spec in changelist.filter_specs if spec.title == "action"
               for choice in spec.choices(changelist)}
    assert {"attention", "outcome_unknown", "resumed"} <= offered
    assert not offered & {str(action) for action in ROUTINE_ACTIONS}


def test_an_address_filtering_on_a_routine_action_is_answered_with_the_list_unfiltered(
        admin_client):  # noqa: F811
    page = admin_client.get("/admin/audit/auditrecord/", {"action": "started"}, follow=True)
    assert page.redirect_chain == [("/admin/audit/auditrecord/", 302)]
    assert "routine action (started)" in page.text
    assert page.context["cl"].queryset.query.where.children == []


def test_the_archived_runs_are_filtered_by_the_statuses_a_run_is_archived_in(
        admin_client):  # noqa: F811
    changelist = admin_client.get("/admin/archive/archivedrun/").context["cl"]
    offered = {choice["display"] for spec in changelist.filter_specs
               if spec.title == "final status" for choice in spec.choices(changelist)}
    assert offered == {"All", "completed", "compensated", "terminated"}
