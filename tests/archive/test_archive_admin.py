import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from archive.models import ArchivedRun, ArchiveFile, ArchiveRemoval

pytestmark = pytest.mark.django_db


def test_admins_see_archive_files_removals_and_tombstones_but_cannot_change_them(
        finished_run, client):
    run = finished_run(days=40)
    call_command("archive_runs")
    archive = ArchiveFile.objects.get()
    tombstone = ArchivedRun.objects.get(original_run_id=run.pk)
    admin = User.objects.create_superuser("root", "root@example.com", "x")
    client.force_login(admin)

    listing = client.get("/admin/archive/archivefile/")
    assert listing.status_code == 200 and archive.sha256 in listing.text
    tombstones = client.get(f"/admin/archive/archivedrun/?q={run.business_key}")
    assert tombstones.status_code == 200 and run.business_key in tombstones.text
    assert client.get("/admin/archive/archiveremoval/").status_code == 200

    # Read-only, even for a superuser: no add page, the change page shows no save, and a
    # delete through the admin is refused.
    assert client.get("/admin/archive/archivefile/add/").status_code == 403
    change = client.get(f"/admin/archive/archivedrun/{tombstone.pk}/change/")
    assert change.status_code == 200 and 'name="_save"' not in change.text
    deleted = client.post(f"/admin/archive/archivefile/{archive.pk}/delete/", {"post": "yes"})
    assert deleted.status_code == 403
    assert ArchiveFile.objects.count() == 1 and ArchivedRun.objects.count() == 1
    assert ArchiveRemoval.objects.filter(archive_file=archive).exists()
