"""The webhook deliveries' list filtered on pending ones (the status filter's "pending")
reads a page of them newest first along webhook_pending_idx, not the backlog: a receiver
down for a day leaves a delivery pending for each of its events, and the page read every one
of them (along webhook_due_idx, then sorted), or every delivery newer than them along the
primary key. The plan is PostgreSQL's own after ANALYZE, on a table where the pending
deliveries are the older half."""

import json

import pytest
from django.db import connection

from api.admin import WebhookDeliveryAdmin
from api.models import WebhookDelivery, WebhookSubscriber
from audit.admin import COUNT_CAP

from .scale import analyzed, page_reads
from .test_admin_lists import admin_client  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db

PENDING = DELIVERED = 10_000
TABLE = WebhookDelivery._meta.db_table
URL = "/admin/api/webhookdelivery/?status__exact=pending"


@pytest.fixture
def backlog():
    """PENDING deliveries to a receiver that was down, then DELIVERED newer ones to one that
    is up: the pending ones are the older half of the table, their ids all below the others.
    Returns the newest pending delivery's id."""
    down = WebhookSubscriber.objects.create(name="down", url="https://d.example/", secret="s")
    up = WebhookSubscriber.objects.create(name="up", url="https://u.example/", secret="s")
    # One statement each, every NOT NULL column given (the model's defaults are Python's).
    with connection.cursor() as cursor:
        for subscriber, status, count in ((down, "pending", PENDING),
                                          (up, "delivered", DELIVERED)):
            cursor.execute(
                f'INSERT INTO "{TABLE}" (subscriber_id, delivery_id, status, attempts,'
                " next_attempt_at, last_error, delivered_at)"
                " SELECT %s, gen_random_uuid(), %s, 1, now() + n * interval '1 second', '',"
                " CASE WHEN %s = 'delivered' THEN now() END FROM generate_series(1, %s) AS n",
                [subscriber.pk, status, status, count])
    analyzed(TABLE, WebhookSubscriber._meta.db_table)
    return WebhookDelivery.objects.filter(status="pending").order_by("-id").first().pk


def test_a_page_of_pending_deliveries_reads_that_page(admin_client, backlog):  # noqa: F811
    page, reads = page_reads(admin_client, URL, TABLE)

    listed = [d.pk for d in page.context["cl"].result_list]
    per_page = WebhookDeliveryAdmin.list_per_page
    assert listed == list(range(backlog, backlog - per_page, -1))
    pages = [sql for sql in reads if "ORDER BY" in sql]
    assert pages, reads
    # The page's deliveries, and the row of the receiver they go to.
    assert all(reads[sql] <= per_page + 1 for sql in pages), reads
    # The count stops at COUNT_CAP + 1 rows, and says "about" past them.
    assert max(reads.values()) <= COUNT_CAP + 1, reads


def test_the_planner_reads_the_page_along_the_pending_index(admin_client,  # noqa: F811
                                                             backlog):
    _, reads = page_reads(admin_client, URL, TABLE)
    sql = next(sql for sql in reads if "ORDER BY" in sql)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql)
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    scans, nodes = [], [plan[0]["Plan"]]
    while nodes:
        node = nodes.pop()
        if node.get("Relation Name") == TABLE:
            scans.append((node["Node Type"], node.get("Index Name")))
        nodes.extend(node.get("Plans", []))
    assert scans == [("Index Scan", "webhook_pending_idx")], scans
