"""An archive file's page shows how many chain heads the file holds and the first few by run
id, escaped, never the whole heads JSON: a file of thousands of runs made a page of
megabytes. One run's head is on its tombstone's page, and the lists that name a file (the
tombstones', the removals', the files') read no heads at all. The runs a file kept in the
hot tables are shown the same way: how many, and the first few, each a link to its console
page."""


import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from archive.admin import HEADS_SHOWN
from archive.models import ArchivedRun, ArchiveFile, ArchiveRemoval
from runs.admin import console_run_url
from runs.models import Workflow
from tests.archive.conftest import triggers_off

pytestmark = pytest.mark.django_db

RUNS = 5000


def digest(run_id: int) -> str:
    return f"{run_id:064x}"


@pytest.fixture
def big_file():
    """A file of RUNS runs (ids 1 to RUNS, stored in no order of theirs), one of them with a
    hash that is markup, a removal of all of them, and the tombstone of run RUNS."""
    heads = {str(n): [n + 7, digest(n)] for n in range(RUNS, 0, -1)}
    heads["2"] = [9, "<b>bold</b>"]
    now = timezone.now()
    archive = ArchiveFile.objects.create(name="runs/big.jsonl.gz", sha256="a" * 64, size=1,
                                         run_count=RUNS, record_count=RUNS, heads=heads,
                                         created_at=now, created_by="test")
    ArchiveRemoval.objects.create(archive_file=archive, removed_at=now, actor="test",
                                  run_count=RUNS, heads=heads)
    flow, _ = Workflow.objects.get_or_create(name="test-orders", defaults={"created_at": now})
    ArchivedRun.objects.create(original_run_id=RUNS, workflow=flow, workflow_name=flow.name,
                               workflow_version=1, business_key="k-last", input_hash="h",
                               final_status="completed", created_at=now, archived_at=now,
                               archive_file=archive)
    return archive


@pytest.fixture
def admin(client):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "x"))
    return client


@pytest.mark.parametrize("page", ["archivefile", "archiveremoval"])
def test_the_page_says_how_many_heads_and_lists_the_first_by_run_id(big_file, admin, page):
    pk = big_file.pk if page == "archivefile" else ArchiveRemoval.objects.get().pk
    shown = admin.get(f"/admin/archive/{page}/{pk}/change/")

    assert shown.status_code == 200
    text = shown.text
    assert f"{RUNS:,} chain heads" in text
    listed = [n for n in range(1, RUNS + 1) if digest(n) in text]
    assert listed == [n for n in range(1, HEADS_SHOWN + 1) if n != 2]
    assert f"{RUNS - HEADS_SHOWN:,} more" in text
    # Stored data, shown as text.
    assert "&lt;b&gt;bold&lt;/b&gt;" in text and "<b>bold</b>" not in text
    assert len(text) < 100_000


def test_a_tombstones_page_shows_its_runs_head(big_file, admin):
    tombstone = ArchivedRun.objects.get()
    shown = admin.get(f"/admin/archive/archivedrun/{tombstone.pk}/change/")

    assert shown.status_code == 200
    assert f"seq {RUNS + 7}, hash {digest(RUNS)}" in shown.text
    assert digest(1) not in shown.text


def test_a_tombstones_page_reads_its_runs_head_alone_from_the_file(big_file, admin):
    """The file's heads are thousands of runs': the page asks the database for one key, by
    its text (a run id is no array index)."""
    tombstone = ArchivedRun.objects.get()
    with CaptureQueriesContext(connection) as sent:
        shown = admin.get(f"/admin/archive/archivedrun/{tombstone.pk}/change/")

    assert shown.status_code == 200 and f"hash {digest(RUNS)}" in shown.text
    heads_read = [q["sql"] for q in sent.captured_queries if '."heads"' in q["sql"]]
    one_key = 'jsonb_extract_path("archive_archivefile"."heads", '
    assert heads_read
    assert all(sql.count('."heads"') == sql.count(one_key) for sql in heads_read)


def test_a_tombstone_whose_run_is_not_in_its_files_heads_says_so(big_file, admin):
    tombstone = ArchivedRun.objects.get()
    heads = ArchiveFile.objects.get().heads
    del heads[str(RUNS)]
    with triggers_off():  # archive file records are kept as written (archive 0006)
        ArchiveFile.objects.update(heads=heads)
    shown = admin.get(f"/admin/archive/archivedrun/{tombstone.pk}/change/")

    assert shown.status_code == 200
    assert "(not in its file&#x27;s heads)" in shown.text


@pytest.mark.parametrize("page", ["archivefile", "archiveremoval", "archivedrun"])
def test_a_list_naming_the_file_reads_no_heads(big_file, admin, page):
    with CaptureQueriesContext(connection) as sent:
        listed = admin.get(f"/admin/archive/{page}/")

    assert listed.status_code == 200 and big_file.name in listed.text
    assert not [q["sql"] for q in sent.captured_queries
                if '."heads"' in q["sql"] or '."kept_run_ids"' in q["sql"]]


def test_the_runs_a_file_kept_are_counted_and_the_first_listed_by_id(big_file, admin):
    # Kept in no order of theirs, as batches of a removal append them.
    with triggers_off():
        ArchiveFile.objects.filter(pk=big_file.pk).update(
            kept_run_ids=list(range(RUNS, RUNS - 3000, -1)))
    shown = admin.get(f"/admin/archive/archivefile/{big_file.pk}/change/")

    assert shown.status_code == 200
    text = shown.text
    assert "3,000 runs stayed in the hot tables" in text
    first = RUNS - 2999
    listed = [n for n in range(first, RUNS + 1) if f'href="{console_run_url(n)}"' in text]
    assert listed == list(range(first, first + HEADS_SHOWN))
    assert f"{3000 - HEADS_SHOWN:,} more" in text
    assert len(text) < 100_000


def test_a_file_that_kept_no_run_says_none(big_file, admin):
    shown = admin.get(f"/admin/archive/archivefile/{big_file.pk}/change/")
    assert shown.status_code == 200
    assert "stayed in the hot tables" not in shown.text
    assert ">none<" in shown.text.replace("\n", "").replace(" ", "")
