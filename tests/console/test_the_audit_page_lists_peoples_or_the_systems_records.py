"""The audit page and the access log choose whose records they show: a person's (an
operator's action, an approver's decision, a grant given), the system's (workers, the
sweeper, API tokens, commands), or anyone's. "What did people do last night?" was a filter
by each name in turn. The choice holds beside the other filters, on the next page and in
the CSV export; a choice the form does not offer is refused naming it, and lists nothing."""

import csv
import html
import io

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from api.tokens import token_create
from audit.models import AccessRecord, AuditRecord
from tests.admin.scale import bulk_runs

pytestmark = pytest.mark.django_db

# (actor kind, label) of each record, oldest first.
WRITTEN = [("user", "alice"), ("system", "sweeper"), ("user", "bob"), ("system", "host:1"),
           ("user", "alice"), ("system", "sweeper")]


@pytest.fixture
def records():
    User.objects.create_user("alice")
    User.objects.create_user("bob")
    run = bulk_runs(["k-1"])[0]
    now = timezone.now()
    written = AuditRecord.objects.bulk_create(
        AuditRecord(run=run, seq=seq, action="resumed", actor_kind=kind, actor_label=label,
                    created_at=now, prev_hash="p", hash="h")
        for seq, (kind, label) in enumerate(WRITTEN, start=1))
    newest_first = sorted(written, key=lambda r: -r.pk)
    return {kind: [r.pk for r in newest_first if r.actor_kind == kind]
            for kind in ("user", "system")}


def _listed(client, **query) -> list[int]:
    page = client.get(reverse("console:audit"), query)
    assert page.status_code == 200
    return [record.pk for record in page.context["records"]]


def test_people_only_or_the_system_only_or_anyone(client_for, auditor, records):
    client = client_for(auditor)
    assert _listed(client, by="user") == records["user"]
    assert _listed(client, by="system") == records["system"]
    assert sorted(_listed(client, by="")) == sorted(records["user"] + records["system"])


def test_the_choice_holds_beside_an_actors_name(client_for, auditor, records):
    client = client_for(auditor)
    alice = list(AuditRecord.objects.filter(actor_label="alice").order_by("-pk")
                 .values_list("pk", flat=True))
    assert _listed(client, by="user", actor="alice") == alice
    assert _listed(client, by="system", actor="alice") == []
    assert _listed(client, by="user", actor="sweeper") == []


def test_the_csv_export_takes_the_choice(client_for, auditor, records):
    response = client_for(auditor).get(reverse("console:audit"),
                                       {"by": "user", "format": "csv"})
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode()
                                           if response.streaming else
                                           response.content.decode())))
    assert sorted(row["actor"] for row in rows) == ["alice", "alice", "bob"]


def test_a_choice_not_offered_is_refused_naming_it_and_lists_nothing(client_for, auditor,
                                                                     records):
    client = client_for(auditor)
    page = client.get(reverse("console:audit"), {"by": "robots"})
    assert page.status_code == 200
    text = html.unescape(page.content.decode())
    assert "by (By): Select a valid choice. robots is not one of the available choices." \
        in text
    assert not page.context.get("records")
    export = client.get(reverse("console:audit"), {"by": "robots", "format": "csv"})
    assert export.status_code == 400


def test_the_access_log_takes_the_choice(client_for, records):
    root = User.objects.create_superuser("root", password="pw")
    token_create(name="by-a-person", workflows=["test-orders"], created_by=root)
    token_create(name="by-the-system", workflows=["test-orders"])
    client = client_for(root)

    def subjects(by):
        page = client.get(reverse("console:audit"), {"log": "access", "by": by})
        assert page.status_code == 200
        return [record.subject for record in page.context["access"]]

    assert subjects("user") == ["token by-a-person"]
    assert subjects("system") == ["token by-the-system"]
    assert AccessRecord.objects.count() == 2
