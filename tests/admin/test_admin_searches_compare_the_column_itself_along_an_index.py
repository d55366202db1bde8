"""The admin searches of tables that grow (the outbox, webhook deliveries, archived runs, the
access chain) compare the column itself, a number as a number and a text exactly or by its
start, each along an index: never Django's UPPER(col::text), which no index serves. The
archived runs' workflow filter offers the workflows' rows, never a DISTINCT over the
tombstones."""

import re
import uuid

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from api.models import WebhookDelivery
from api.tokens import token_create
from approvals.models import Notification
from archive.models import ArchivedRun, ArchiveFile
from audit.models import AccessRecord
from runs.models import Workflow

from .test_admin_lists import admin_client, grow  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


def arabic(digits: str) -> str:
    """The same number in Arabic-Indic digits, which int() reads and whole_number refuses."""
    return "".join(chr(0x660 + int(d)) for d in digits)


def indexes_on(table: str, column: str) -> set[str]:
    """The names of the indexes of `table` whose first column is `column`."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s",
                       [table])
        return {name for name, definition in cursor.fetchall()
                if re.search(rf"\(\"?{column}\"?[ ,)]", definition)}


def indexes_used(queryset) -> set[str]:
    """The indexes PostgreSQL reads for `queryset` when it may not read the table whole."""
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        try:
            plan = queryset.order_by().explain()
        finally:
            cursor.execute("RESET enable_seqscan")
    return set(re.findall(r"Index (?:Only )?Scan (?:Backward )?(?:using|on) (\w+)", plan))


def search(client, url: str, q: str, table: str):
    """The page's rows for `q`, and the SQL of the queries that read `table`."""
    with CaptureQueriesContext(connection) as ctx:
        page = client.get(url, {"q": q})
    assert page.status_code == 200, (url, q)
    listed = list(page.context["cl"].result_list)
    return listed, [c["sql"] for c in ctx.captured_queries if f'"{table}"' in c["sql"]]


def assert_compares_the_column(sqls: list[str], table: str, column: str, how: str = " ="):
    """Each query compares the column itself, `how` (equal, or LIKE a start: the ::text is
    PostgreSQL's no-op relabelling of a varchar, which its pattern index still serves)."""
    assert sqls, table
    for sql in sqls:
        assert "UPPER(" not in sql.upper(), sql
        # A match anywhere in the text, which no index serves.
        assert "LIKE '%" not in sql, sql
    assert any(f'"{table}"."{column}"{how}' in sql for sql in sqls), sqls


def archived(workflow: Workflow, key: str, run_id: int, archive: ArchiveFile) -> ArchivedRun:
    now = timezone.now()
    return ArchivedRun.objects.create(
        original_run_id=run_id, workflow=workflow, workflow_name=workflow.name,
        workflow_version=1, business_key=key, input_hash="h", final_status="completed",
        created_at=now, archived_at=now, archive_file=archive)


def test_the_outbox_is_searched_by_a_requests_id_as_a_number(admin_client):  # noqa: F811
    grow(3)
    notification = Notification.objects.order_by("pk")[1]
    table, column = "approvals_notification", "request_id"
    listed, sqls = search(admin_client, "/admin/approvals/notification/",
                          str(notification.request_id), table)
    assert listed == [notification]
    assert_compares_the_column(sqls, table, column)
    model_admin_rows, _ = admin_client.get("/admin/approvals/notification/").context[
        "cl"].model_admin.get_search_results(None, Notification.objects.all(),
                                             str(notification.request_id))
    assert indexes_on(table, column) & indexes_used(model_admin_rows)
    # Not a number, or one written in other digits: nothing, though int() would read it.
    for q in (arabic(str(notification.request_id)), "²", "x1", "1" * 40):
        assert search(admin_client, "/admin/approvals/notification/", q, table)[0] == [], q


def test_deliveries_are_searched_by_their_uuid(admin_client):  # noqa: F811
    grow(3)
    delivery = WebhookDelivery.objects.order_by("pk")[1]
    table = "api_webhookdelivery"
    for q in (str(delivery.delivery_id), delivery.delivery_id.hex.upper()):
        listed, sqls = search(admin_client, "/admin/api/webhookdelivery/", q, table)
        assert listed == [delivery], q
        assert_compares_the_column(sqls, table, "delivery_id")
    rows, _ = admin_client.get("/admin/api/webhookdelivery/").context[
        "cl"].model_admin.get_search_results(None, WebhookDelivery.objects.all(),
                                             str(delivery.delivery_id))
    assert indexes_on(table, "delivery_id") & indexes_used(rows)
    for q in (str(delivery.delivery_id)[:8], str(uuid.uuid4()), "not-a-uuid"):
        assert search(admin_client, "/admin/api/webhookdelivery/", q, table)[0] == [], q


def test_archived_runs_are_searched_by_run_id_or_the_start_of_a_key(admin_client):  # noqa: F811
    orders = Workflow.objects.get_or_create(name="test-orders")[0]
    saga = Workflow.objects.get_or_create(name="test-saga")[0]
    archive = ArchiveFile.objects.create(name="runs/a.jsonl.gz", sha256="a" * 64, size=1,
                                         run_count=3, record_count=3, heads={},
                                         created_at=timezone.now(), created_by="test")
    first = archived(orders, "inv-2024-001", 9001, archive)
    second = archived(orders, "inv-2024-002", 9002, archive)
    numbered = archived(saga, "9001-late", 77, archive)
    table = "archive_archivedrun"
    url = "/admin/archive/archivedrun/"
    listed, sqls = search(admin_client, url, "inv-2024-00", table)
    assert set(listed) == {first, second}
    assert_compares_the_column(sqls, table, "business_key", "::text LIKE")
    # A middle of a key is no start of one.
    assert search(admin_client, url, "2024", table)[0] == []
    listed, sqls = search(admin_client, url, "9001", table)
    assert set(listed) == {first, numbered}
    assert_compares_the_column(sqls, table, "original_run_id")
    assert search(admin_client, url, arabic("9002"), table)[0] == []
    model_admin = admin_client.get(url).context["cl"].model_admin
    rows, _ = model_admin.get_search_results(None, ArchivedRun.objects.all(), "9001")
    used = indexes_used(rows)
    assert "archivedrun_key_prefix_idx" in used
    assert indexes_on(table, "original_run_id") & used


def test_the_archived_runs_workflow_filter_reads_no_distinct_of_the_tombstones(
        admin_client):  # noqa: F811
    orders = Workflow.objects.get_or_create(name="test-orders")[0]
    Workflow.objects.get_or_create(name="test-saga")
    archive = ArchiveFile.objects.create(name="runs/b.jsonl.gz", sha256="b" * 64, size=1,
                                         run_count=1, record_count=1, heads={},
                                         created_at=timezone.now(), created_by="test")
    kept = archived(orders, "inv-1", 1, archive)
    for url in ("/admin/archive/archivedrun/",
                "/admin/archive/archivedrun/?workflow_name=test-orders",
                "/admin/archive/archivedrun/?workflow_name=test-saga"):
        with CaptureQueriesContext(connection) as ctx:
            page = admin_client.get(url)
        assert page.status_code == 200
        for query in ctx.captured_queries:
            assert "DISTINCT" not in query["sql"].upper(), query["sql"]
        choices = [c["display"] for spec in page.context["cl"].filter_specs
                   if spec.title == "workflow" for c in spec.choices(page.context["cl"])]
        assert {"test-orders", "test-saga"} <= set(choices)
        listed = list(page.context["cl"].result_list)
        assert listed == ([] if url.endswith("test-saga") else [kept]), url


def test_the_access_chain_is_searched_by_actor_or_the_start_of_a_subject(
        admin_client):  # noqa: F811
    root = User.objects.get(username="root")
    token_create(name="erp", workflows=["test-orders"], created_by=root)
    token_create(name="erp-2", workflows=["test-orders"], created_by=root)
    token_create(name="crm", workflows=["test-orders"], created_by=None)
    table, url = "audit_accessrecord", "/admin/audit/accessrecord/"
    listed, sqls = search(admin_client, url, "root", table)
    assert {r.subject for r in listed} == {"token erp", "token erp-2"}
    assert_compares_the_column(sqls, table, "actor_label")
    listed, sqls = search(admin_client, url, "token erp", table)
    assert {r.subject for r in listed} == {"token erp", "token erp-2"}
    assert_compares_the_column(sqls, table, "subject", "::text LIKE")
    assert search(admin_client, url, "ro", table)[0] == []
    assert search(admin_client, url, "erp", table)[0] == []
    model_admin = admin_client.get(url).context["cl"].model_admin
    # A NUL, which no PostgreSQL text holds (and psycopg refuses to send), matches nothing.
    rows, _ = model_admin.get_search_results(None, AccessRecord.objects.all(), "token\x00erp")
    assert list(rows) == []
    rows, _ = model_admin.get_search_results(None, AccessRecord.objects.all(), "root")
    assert {"access_actor_idx", "access_subject_idx"} <= indexes_used(rows)
