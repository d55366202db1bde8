"""Webhook deliveries stay in the hot tables as long as their runs (one per event and
subscriber: millions), and the few that failed for good are counted at every scrape
(durable_webhook_failed). The count reads an index holding exactly the failed ones, never the
whole table, in the plan PostgreSQL picks for a big table."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

pytestmark = pytest.mark.django_db


def _plan(sql: str) -> str:
    with connection.cursor() as cursor:
        # On a tiny table a scan of everything is cheapest: ask for the big table's plan.
        cursor.execute("SET enable_seqscan = off")
        try:
            cursor.execute("EXPLAIN " + sql)
            return "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("RESET enable_seqscan")


def test_the_failed_deliveries_are_counted_without_reading_every_delivery(client):
    with CaptureQueriesContext(connection) as ctx:
        assert client.get("/metrics").status_code == 200
    counts = [q["sql"] for q in ctx.captured_queries
              if 'FROM "api_webhookdelivery"' in q["sql"] and "'failed'" in q["sql"]]
    assert len(counts) == 1
    plan = _plan(counts[0])
    assert "Seq Scan" not in plan and "webhook_failed_idx" in plan, plan
