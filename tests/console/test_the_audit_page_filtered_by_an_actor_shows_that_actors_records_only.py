"""The audit page filtered by an actor shows that actor's records and no other's, newest
first, whether the actor is a person (an account's username: read along the person index),
a system actor (a worker, the sweeper) or a person whose account is gone; the next page and
the CSV export are filtered alike, and one who sees some workflows only sees their records
only."""

import csv
import io

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditRecord
from tests.admin.scale import bulk_runs

pytestmark = pytest.mark.django_db

# (actor kind, label) of each record, oldest first; "carol"'s account is gone.
WRITTEN = [("user", "alice"), ("system", "sweeper"), ("user", "bob"), ("system", "host:1"),
           ("user", "alice"), ("user", "carol"), ("system", "sweeper"), ("user", "alice"),
           ("user", "bob")]


@pytest.fixture
def records():
    """WRITTEN on two runs of test-orders, then on a run of test-saga. Returns each label's
    record ids newest first: of every run, and of the test-orders runs only."""
    User.objects.create_user("alice")
    User.objects.create_user("bob")
    orders = bulk_runs(["k-1", "k-2"])
    saga = bulk_runs(["k-3"], workflow="test-saga")[0]
    now = timezone.now()
    written = AuditRecord.objects.bulk_create(
        AuditRecord(run=run, seq=seq, action="resumed", actor_kind=kind, actor_label=label,
                    created_at=now, prev_hash="p", hash="h")
        for run in (*orders, saga) for seq, (kind, label) in enumerate(WRITTEN, start=1))
    every: dict[str, list[int]] = {}
    of_orders: dict[str, list[int]] = {}
    for record in sorted(written, key=lambda r: -r.pk):
        every.setdefault(record.actor_label, []).append(record.pk)
        if record.run_id != saga.pk:
            of_orders.setdefault(record.actor_label, []).append(record.pk)
    return every, of_orders


def _listed(client, **query) -> list[int]:
    page = client.get(reverse("console:audit"), query)
    assert page.status_code == 200
    return [record.pk for record in page.context["records"]]


@pytest.mark.parametrize("label", ["alice", "bob", "sweeper", "host:1", "carol"])
def test_the_page_lists_exactly_the_actors_records_newest_first(client_for, auditor, records,
                                                                label):
    every, _ = records
    assert _listed(client_for(auditor), actor=label) == every[label]


def test_a_persons_filter_shows_no_other_persons_or_systems_record(client_for, auditor,
                                                                   records):
    client = client_for(auditor)
    listed = _listed(client, actor="alice")
    assert len(listed) == 9
    assert set(AuditRecord.objects.filter(pk__in=listed).values_list(
        "actor_label", flat=True)) == {"alice"}
    assert _listed(client, actor="nobody") == []


def test_the_next_page_goes_on_with_the_same_persons_older_records(client_for, auditor,
                                                                   records):
    every, _ = records
    older = _listed(client_for(auditor), actor="alice", before=every["alice"][0])
    assert older == every["alice"][1:]


def test_the_csv_export_of_a_persons_filter_holds_their_records_only(client_for, auditor,
                                                                     records):
    every, _ = records
    export = client_for(auditor).get(reverse("console:audit"),
                                     {"actor": "alice", "format": "csv"})
    assert export.status_code == 200
    rows = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    assert [int(row["id"]) for row in rows] == every["alice"]
    assert {row["actor"] for row in rows} == {"alice"}


@pytest.mark.parametrize("label", ["alice", "sweeper"])
def test_one_who_sees_some_workflows_sees_an_actors_records_of_those_only(
        client_for, finance_operator, records, label):
    _, of_orders = records
    assert _listed(client_for(finance_operator), actor=label) == of_orders[label]
