"""The audit page's filter by a person's name (an account's username) reads that person's
records along audit_person_label_idx, newest first, on a log where the system's records are
nearly all: never the table whole, nor the log backwards along its primary key until a page
of matches or its start. The plan is PostgreSQL's own for the selector's query (the page's
and the CSV export's), after ANALYZE, as autovacuum keeps the statistics of a live log."""

import json

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditRecord
from audit.selectors import audit_records
from tests.admin.scale import analyzed, bulk_runs

pytestmark = pytest.mark.django_db

SYSTEM_RECORDS = 50_000
PEOPLES_RECORDS = 5_000
INDEX = "audit_person_label_idx"
TABLE = AuditRecord._meta.db_table


@pytest.fixture
def busy_log():
    """One run whose log holds a few records of alice's and bob's, then PEOPLES_RECORDS of
    carol's and SYSTEM_RECORDS of a worker's after them (alice's and bob's are the oldest: a
    backward read of the primary key, or of every person's records, reaches them last).
    Returns the run."""
    run = bulk_runs(["k-1"])[0]
    User.objects.create_user("alice")
    User.objects.create_user("bob")
    now = timezone.now()
    AuditRecord.objects.bulk_create(
        AuditRecord(run=run, seq=seq, action="resumed", actor_kind="user", actor_label=name,
                    created_at=now, prev_hash="p", hash="h")
        for seq, name in enumerate(["alice", "bob", "alice", "bob", "alice"], start=1))
    # One statement: the system's records as a year of steps leaves them, every NOT NULL
    # column given (the model's defaults are Python's, not the table's).
    with connection.cursor() as cursor:
        cursor.execute(
            f'INSERT INTO "{TABLE}" (run_id, seq, action, step_name, actor_kind, actor_label,'
            " reason, before, after, data, created_at, prev_hash, hash)"
            " SELECT %s, 5 + n, 'succeeded', 'charge', 'system', 'host:1', '', '{}', '{}',"
            " '{}', %s, 'p', 'h' FROM generate_series(1, %s) AS n",
            [run.pk, now, SYSTEM_RECORDS])
        # A busy person's records too: read along every person's records, alice's are
        # reached after all of carol's, as on a log where many people act.
        cursor.execute(
            f'INSERT INTO "{TABLE}" (run_id, seq, action, step_name, actor_kind, actor_label,'
            " reason, before, after, data, created_at, prev_hash, hash)"
            " SELECT %s, 5 + %s + n, 'resumed', '', 'user', 'carol', '', '{}', '{}',"
            " '{}', %s, 'p', 'h' FROM generate_series(1, %s) AS n",
            [run.pk, SYSTEM_RECORDS, now, PEOPLES_RECORDS])
    analyzed(TABLE, "runs_run", "auth_user")
    return run


def _scans(queryset) -> list[dict]:
    """The plan's scans of the audit table for `queryset` (the query as Django sends it)."""
    return _scans_of_plan(json.loads(queryset.explain(format="json"))[0]["Plan"])


def _scans_of_sql(sql: str) -> list[dict]:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql)
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return _scans_of_plan(plan[0]["Plan"])


def _scans_of_plan(plan: dict) -> list[dict]:
    found, nodes = [], [plan]
    while nodes:
        node = nodes.pop()
        if node.get("Relation Name") == TABLE:
            found.append(node)
        nodes.extend(node.get("Plans", []))
    return found


def _assert_read_along_the_person_index(queryset):
    _assert_along_the_person_index(_scans(queryset))


def _assert_along_the_person_index(plan_scans: list[dict]):
    scans = [(scan["Node Type"], scan.get("Index Name"), scan.get("Scan Direction"))
             for scan in plan_scans]
    assert scans, "the plan reads no audit record"
    assert not any(kind == "Seq Scan" for kind, _, _ in scans), scans
    assert not any(index == f"{TABLE}_pkey" for _, index, _ in scans), scans
    assert all(index == INDEX for _, index, _ in scans), scans


def test_a_page_of_a_persons_records_is_read_along_the_person_index(busy_log):
    page = audit_records(actor="alice")
    assert [r.actor_label for r in page[:100]] == ["alice"] * 3
    _assert_read_along_the_person_index(page[:100])


def test_the_next_page_and_the_csv_export_are_read_along_it_too(busy_log):
    newest = audit_records(actor="alice").first()
    _assert_read_along_the_person_index(audit_records(actor="alice").filter(
        pk__lt=newest.pk)[:100])
    _assert_read_along_the_person_index(audit_records(actor="alice"))


def test_a_person_filter_of_one_who_sees_some_workflows_only_is_read_along_it(busy_log):
    records = audit_records(actor="bob", workflow_ids=frozenset({busy_log.workflow_id}))
    assert [r.actor_label for r in records[:100]] == ["bob"] * 2
    _assert_read_along_the_person_index(records[:100])


def test_the_page_and_its_export_send_the_query_read_along_it(busy_log, client, admin_user):
    client.force_login(admin_user)
    with CaptureQueriesContext(connection) as sent:
        page = client.get(reverse("console:audit"), {"actor": "alice"})
        export = client.get(reverse("console:audit"), {"actor": "alice", "format": "csv"})
        lines = b"".join(export.streaming_content).decode().splitlines()
    assert [r.actor_label for r in page.context["records"]] == ["alice"] * 3
    assert len(lines) == 1 + 3
    # The export reads through a server-side cursor: DECLARE ... CURSOR FOR <its SELECT>.
    reads = [q["sql"][q["sql"].index("SELECT"):] for q in sent.captured_queries
             if f'FROM "{TABLE}"' in q["sql"]]
    # Each asks first whether people's records carry the name (audit.selectors.
    # actor_kind_of, one probe of the index), then reads its records.
    assert len(reads) == 4
    for sql in reads:
        _assert_along_the_person_index(_scans_of_sql(sql))


def test_a_person_whose_account_was_deleted_is_still_read_along_it(busy_log):
    User.objects.filter(username="alice").delete()
    analyzed("auth_user")
    page = audit_records(actor="alice")
    assert [r.actor_label for r in page[:100]] == ["alice"] * 3
    _assert_read_along_the_person_index(page[:100])


def test_a_system_actor_no_person_ever_was_is_still_found_under_its_label(busy_log):
    assert audit_records(actor="host:1").count() == SYSTEM_RECORDS
    assert audit_records(actor="host:1")[:1].get().actor_kind == "system"


def test_peoples_records_alone_are_read_along_the_index_of_peoples_records(busy_log):
    page = audit_records(by="user")[:100]
    assert {r.actor_kind for r in page} == {"user"} and len(page) == 100
    scans = [(scan["Node Type"], scan.get("Index Name")) for scan in _scans(page)]
    assert scans and all(index == "audit_person_idx" for _, index in scans), scans
