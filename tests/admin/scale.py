"""Rows in bulk for the admin's tests at scale, and what PostgreSQL reads to answer a query:
how many rows its scans touched (EXPLAIN ANALYZE), with the table scan taken out of its
choices, as on a big table, where a few thousand rows would let it read them all."""

import json
from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runs.models import Run, RunStatus, Workflow


def bulk_runs(keys, *, workflow: str = "test-orders", status: str = RunStatus.COMPLETED,
              **fields) -> list[Run]:
    """Runs of `workflow` with the business keys `keys`, each a second older than the next,
    written in one statement (start_run writes a run, its steps and its audit record)."""
    flow, _ = Workflow.objects.get_or_create(name=workflow,
                                             defaults={"created_at": timezone.now()})
    now = timezone.now()
    keys = list(keys)
    return Run.objects.bulk_create(
        Run(workflow=flow, workflow_name=workflow, workflow_version=1, business_key=key,
            input={}, input_hash="h", status=status, created_at=now - timedelta(seconds=n),
            updated_at=now - timedelta(seconds=n), **fields)
        for n, key in zip(range(len(keys), 0, -1), keys, strict=True))


def analyzed(*tables: str) -> None:
    """Fresh statistics for `tables`, as autovacuum keeps them on a live database."""
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f'ANALYZE "{table}"')


def rows_read(sql: str, table: str | None = None) -> int:
    """The rows the scans of `sql` touched (kept or filtered out), or its scans of `table`
    only, PostgreSQL not allowed to read a table whole when another way exists."""
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        try:
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql)
            plan = cursor.fetchone()[0]
        finally:
            cursor.execute("RESET enable_seqscan")
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return scanned(plan[0]["Plan"], table)


def scanned(node: dict, table: str | None = None) -> int:
    here = 0
    if node["Node Type"].endswith("Scan") and "Relation Name" in node and \
            table in (None, node["Relation Name"]):
        here = (node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
                + node.get("Rows Removed by Index Recheck", 0)) * node.get("Actual Loops", 1)
    return here + sum(scanned(child, table) for child in node.get("Plans", []))


def page_reads(client, url: str, table: str) -> tuple[object, dict[str, int]]:
    """The page at `url`, and the rows each of its queries of `table` read."""
    with CaptureQueriesContext(connection) as ctx:
        page = client.get(url)
    assert page.status_code == 200, (url, page.status_code)
    return page, {q["sql"]: rows_read(q["sql"]) for q in ctx.captured_queries
                  if q["sql"].startswith("SELECT") and f'FROM "{table}"' in q["sql"]}
