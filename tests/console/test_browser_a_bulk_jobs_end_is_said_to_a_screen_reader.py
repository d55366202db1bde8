"""In a real browser, as a screen reader hears it: a bulk job's page refreshes its progress
every 2 s, and when the job ends (or its state otherwise changes) the page's status region
says so; the counts that change at each refresh are not read out each time. Before, the
progress was swapped in silently: nothing told a person who cannot see the page that the
job had ended."""

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from approvals.bulk import run_bulk_job
from approvals.models import BulkJob
from tests.console.test_browser import browser, sign_in  # noqa: F401
from tests.factories import new_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_end_of_a_bulk_job_is_said(browser, live_server, roles):  # noqa: F811
    User.objects.create_superuser("root", password="pw-root")
    for _ in range(2):
        new_run(wake=False)
    page = sign_in(browser, live_server, "root")
    page.goto(f"{live_server.url}/runs/bulk/preview/?action=terminate")
    page.get_by_label("Reason (recorded on every run)").fill("cleanup")
    page.get_by_role("button", name="Terminate 2 runs in the background").click()
    page.wait_for_url("**/runs/bulk/jobs/*/")
    job = BulkJob.objects.get()
    progress = page.locator("#bulk-progress")
    expect(progress).to_contain_text("Status: running")
    said = page.get_by_role("status").filter(has_text=f"Bulk job {job.pk}")
    expect(said).to_have_count(0)  # nothing changed yet: nothing said

    assert run_bulk_job(job.pk).status == "done"
    expect(progress).to_contain_text("Status: done", timeout=10_000)
    expect(said).to_have_text(f"Bulk job {job.pk} done: 2 of 2 runs handled.")
