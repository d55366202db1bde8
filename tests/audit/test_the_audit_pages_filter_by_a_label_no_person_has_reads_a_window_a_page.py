"""The audit page filtered by an actor label no person has (a typo, a worker, an API token)
has no index to read along: each page reads at most SCAN_WINDOW records back, newest
first, and says where it stopped, where it read the log backwards to its start (millions of
rows at a million runs) for a label on no record at all. Following "Older" reads on, a
window a page, to the log's start; a label's old records are found there, and no page
lists a record of another actor. A filter with a run's number reads that run's records,
however old, and a person's name reads along the person index, as before."""

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import Max, Min
from django.urls import reverse
from django.utils import timezone

from audit import selectors
from audit.models import AuditRecord
from tests.admin.scale import analyzed, bulk_runs, page_reads

pytestmark = pytest.mark.django_db

RECORDS = 20_000
WINDOW = 5_000
TABLE = AuditRecord._meta.db_table


@pytest.fixture(autouse=True)
def _small_window(monkeypatch):
    monkeypatch.setattr(selectors, "SCAN_WINDOW", WINDOW)


@pytest.fixture
def log(client, admin_user):
    """An old run whose log holds three records of an API token and one of alice's, then
    RECORDS of a worker on a newer run; the client logged in as someone who sees every
    workflow."""
    old, new = bulk_runs(["k-old", "k-new"])
    User.objects.create_user("alice")
    now = timezone.now()
    AuditRecord.objects.bulk_create(
        AuditRecord(run=old, seq=seq, action="event_received" if seq < 4 else "resumed",
                    actor_kind="system" if seq < 4 else "user",
                    actor_label="api-token:psp" if seq < 4 else "alice", created_at=now,
                    prev_hash="p", hash="h")
        for seq in (1, 2, 3, 4))
    with connection.cursor() as cursor:
        cursor.execute(
            f'INSERT INTO "{TABLE}" (run_id, seq, action, step_name, actor_kind, actor_label,'
            " reason, before, after, data, created_at, prev_hash, hash)"
            " SELECT %s, n, 'succeeded', 'charge', 'system', 'host:1', '', '{}', '{}',"
            " '{}', %s, 'p', 'h' FROM generate_series(1, %s) AS n",
            [new.pk, now, RECORDS])
    analyzed(TABLE, "runs_run", "auth_user")
    client.force_login(admin_user)
    return old


def _pages(client, actor: str, **more):
    """Each page of the filter by `actor`, following Older to the end: (records, the most
    rows of the audit table one query of the page read, the page)."""
    url, before, pages = reverse("console:audit"), None, []
    while True:
        query = {"actor": actor, **more, **({"before": before} if before else {})}
        page, reads = page_reads(client, f"{url}?{'&'.join(f'{k}={v}' for k, v in query.items())}",
                                 TABLE)
        pages.append((page.context["records"], max(reads.values(), default=0), page))
        before = page.context["next_before"]
        if not before:
            return pages
        assert len(pages) < 20, "the pages never end"


def test_a_label_on_no_record_reads_a_window_a_page_to_the_start_and_finds_nothing(log, client):
    pages = _pages(client, "hots:1")

    assert all(records == [] for records, _, _ in pages)
    assert all(read <= WINDOW + 1 for _, read, _ in pages), [read for _, read, _ in pages]
    # Every record was read once, window by window.
    ids = AuditRecord.objects.aggregate(low=Min("pk"), high=Max("pk"))
    assert len(pages) == -(-(ids["high"] - ids["low"] + 1) // WINDOW) > 1
    first = pages[0][2].content.decode()
    assert "each page reads at most 5,000 records back" in first
    assert "this one stopped at record" in first
    assert "stopped at record" not in pages[-1][2].content.decode()


def test_a_rare_labels_old_records_are_found_by_reading_on(log, client):
    pages = _pages(client, "api-token:psp")

    found = [record for records, _, _ in pages for record in records]
    assert [(r.run_id, r.seq) for r in found] == [(log.pk, 3), (log.pk, 2), (log.pk, 1)]
    assert all(read <= WINDOW + 1 for _, read, _ in pages)


def test_a_busy_labels_page_is_a_full_page_of_it_and_nothing_else(log, client):
    page, _ = page_reads(client, f"{reverse('console:audit')}?actor=host:1", TABLE)
    records = page.context["records"]
    assert len(records) == selectors.PAGE_SIZE
    assert {r.actor_label for r in records} == {"host:1"}
    assert page.context["next_before"] == records[-1].pk
    assert "stopped at record" not in page.content.decode()


def test_a_run_number_with_the_label_reads_that_runs_records_however_old(log, client):
    page, _ = page_reads(client, f"{reverse('console:audit')}?actor=api-token:psp&run={log.pk}",
                         TABLE)
    assert [r.seq for r in page.context["records"]] == [3, 2, 1]
    assert page.context["next_before"] == ""


def test_a_persons_name_is_not_windowed(log, client):
    """Alice's one record is older than every worker's: read along the person index, the
    first page finds it, where a window from the top would not reach it."""
    page, _ = page_reads(client, f"{reverse('console:audit')}?actor=alice", TABLE)
    assert [(r.actor_label, r.seq) for r in page.context["records"]] == [("alice", 4)]
    assert "stopped at record" not in page.content.decode()


def test_a_page_below_an_id_far_above_the_log_starts_at_its_newest_record(log, client):
    pages = _pages(client, "api-token:psp", before=10**17)
    assert len(pages) == len(_pages(client, "api-token:psp"))
