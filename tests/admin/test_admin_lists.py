"""Django admin at any number of runs: each changelist of a table that grows with runs makes
the same number of queries whatever the number of rows, counts no table in full, and its
search finds what the console's search finds."""

import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from api.models import WebhookDelivery, WebhookSubscriber
from approvals.models import ApprovalRequest, Notification
from audit.admin import COUNT_CAP, estimated_count
from runs.models import AgentTurn, ApprovalWait, Run, RunEvent, Step, ToolCall
from runs.reads.selectors import RunFilters, runs_page
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

CHANGELISTS = [
    "/admin/runs/run/",
    "/admin/runs/run/?status=attention",
    "/admin/runs/run/?attention_reason=permanent_error",
    "/admin/runs/run/?workflow_name=test-orders",
    "/admin/runs/run/?q=order-",
    "/admin/audit/auditrecord/",
    "/admin/audit/auditrecord/?action=attention",
    "/admin/audit/auditrecord/?actor_kind__exact=user",
    "/admin/audit/auditrecord/?q=order-",
    "/admin/approvals/approvalrequest/",
    "/admin/approvals/approvalrequest/?q=order-",
    "/admin/approvals/notification/",
    "/admin/approvals/notification/?status=failed",
    "/admin/runs/toolcall/",
    "/admin/runs/toolcall/?q=order-",
    "/admin/runs/agentturn/",
    "/admin/runs/approvalwait/",
    "/admin/api/webhookdelivery/",
    "/admin/audit/accessrecord/",
]


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "x"))
    return client


def grow(n: int) -> list[Run]:
    """n more runs, each with a row in every table an admin list shows."""
    now = timezone.now()
    subscriber, _ = WebhookSubscriber.objects.get_or_create(
        name="receiver", defaults={"url": "http://127.0.0.1:9/", "secret": "s"})
    runs = []
    for _ in range(n):
        run = place(new_run(), status="attention", attention_reason="permanent_error")
        step = Step.objects.filter(run=run).first()
        AgentTurn.objects.create(step=step, index=1, created_at=now)
        call = ToolCall.objects.create(step=step, turn=1, index=1, call_id="c", tool="t",
                                       args_hash="h", idempotency_key=uuid.uuid4().hex,
                                       updated_at=now)
        ApprovalWait.objects.create(run=run, step_name=step.name, tool_call=call,
                                    created_at=now)
        request = ApprovalRequest.objects.create(
            run=run, step_name=step.name, snapshot={}, snapshot_hash="h",
            timeout=timedelta(hours=1), on_timeout="reject", requested_at=now,
            due_at=now + timedelta(hours=1))
        Notification.objects.create(request=request, kind="request", recipient="a@b.c",
                                    subject="s", body="b", next_attempt_at=now,
                                    message_id=uuid.uuid4().hex, created_at=now)
        event = RunEvent.objects.create(run=run, status_from="queued", status_to="attention",
                                        created_at=now)
        WebhookDelivery.objects.create(subscriber=subscriber, event=event,
                                       delivery_id=uuid.uuid4(), next_attempt_at=now)
        runs.append(run)
    return runs


def queries_of(client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return len(ctx)


def test_every_changelist_makes_as_many_queries_at_3_rows_as_at_12(admin_client):
    grow(3)
    few = {url: queries_of(admin_client, url) for url in CHANGELISTS}
    grow(9)
    many = {url: queries_of(admin_client, url) for url in CHANGELISTS}
    assert many == few


def test_each_page_makes_as_many_queries_at_3_rows_as_at_12_for_staff_who_only_view(client):
    viewer = User.objects.create_user("viewer", password="x", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename__startswith="view_"))
    client.force_login(viewer)
    grow(3)
    run = grow(1)[0]
    pages = [*CHANGELISTS, f"/admin/runs/run/{run.pk}/change/",
             f"/admin/approvals/approvalrequest/{run.approval_requests.get().pk}/change/"]
    # Once first: a row's page reads the content types once per process, then from a cache.
    for url in pages:
        queries_of(client, url)
    few = {url: queries_of(client, url) for url in pages}
    grow(9)
    many = {url: queries_of(client, url) for url in pages}
    assert many == few


def test_no_changelist_counts_its_whole_table_or_reads_filter_choices_from_it(admin_client):
    grow(2)
    for url in CHANGELISTS:
        with CaptureQueriesContext(connection) as ctx:
            admin_client.get(url)
        for query in ctx.captured_queries:
            sql = query["sql"].upper()
            # Django's full count and its filters' choices from the table itself.
            assert "SELECT DISTINCT" not in sql, (url, sql)
            if "COUNT(" in sql:
                assert "LIMIT" in sql, (url, sql)


def test_a_list_counts_exactly_up_to_the_cap_and_estimates_beyond(admin_client,
                                                                   monkeypatch):
    grow(3)
    assert COUNT_CAP >= 1000
    assert estimated_count(Run.objects.all()) == 3
    assert estimated_count(Run.objects.filter(status="completed")) == 0
    assert "3 runs" in admin_client.get("/admin/runs/run/").text
    # Past the cap: the planner's estimate (never below the cap), and no count without a
    # LIMIT, whatever the table's size.
    monkeypatch.setattr("audit.admin.COUNT_CAP", 2)
    with CaptureQueriesContext(connection) as ctx:
        estimate = estimated_count(Run.objects.all())
    assert estimate >= 3
    sqls = [q["sql"].upper() for q in ctx.captured_queries]
    assert len(sqls) == 2 and "LIMIT 3" in sqls[0] and sqls[1].startswith("EXPLAIN")


def test_the_admin_search_finds_the_runs_the_console_search_finds(admin_client):
    runs = grow(3)
    other = grow(1)[0]
    step = Step.objects.filter(run=runs[1]).order_by("position").first()
    Step.objects.filter(pk=step.pk).update(remote_ref="TRK-4711")
    for q in (runs[0].business_key, runs[0].business_key[:8], step.idempotency_key,
              "TRK-4711", str(other.pk), "no-such-key"):
        console, _ = runs_page(RunFilters(q=q), workflow_ids=None, limit=100)
        page = admin_client.get("/admin/runs/run/", {"q": q})
        shown = set(page.context["cl"].result_list.values_list("pk", flat=True))
        assert shown == {run.pk for run in console}, q
    assert admin_client.get("/admin/runs/run/", {"q": "TRK-4711"}).context[
        "cl"].result_count == 1


def test_the_tool_call_admin_finds_a_call_by_its_key_or_its_first_characters_along_an_index(
        admin_client):
    runs = grow(3)
    call = ToolCall.objects.get(step__run=runs[1])
    for q in (call.idempotency_key, call.idempotency_key[:12] + "…"):
        with CaptureQueriesContext(connection) as ctx:
            page = admin_client.get("/admin/runs/toolcall/", {"q": q})
        assert list(page.context["cl"].result_list) == [call], q
        listed = [c["sql"] for c in ctx.captured_queries
                  if "runs_toolcall" in c["sql"] and "LIMIT" in c["sql"]]
        with connection.cursor() as cursor:
            cursor.execute("SET enable_seqscan = off")
            try:
                cursor.execute("EXPLAIN " + listed[-1])
                plan = "\n".join(row[0] for row in cursor.fetchall())
            finally:
                cursor.execute("RESET enable_seqscan")
        assert "toolcall_key_head_idx" in plan, plan
    # A key that differs after its first characters is another key.
    other = call.idempotency_key[:20] + "0" * 12
    page = admin_client.get("/admin/runs/toolcall/", {"q": other})
    assert list(page.context["cl"].result_list) == []


def test_every_list_is_named_in_english_on_the_admin_index(admin_client):
    # Django makes a plural by adding "s": "Webhook deliverys" until the model named its own.
    page = admin_client.get("/admin/").content.decode()
    assert "Webhook deliveries" in page and "deliverys" not in page.lower()
