"""A bulk job's request hangs on one of its runs, and that run's page lists the run's
requests (approvals.selectors.requests_for_run): it read each of them whole, a bulk job's
snapshot and params with every run of the job twice and their effects (megabytes for a job
of 100,000 runs), at each look and each refresh of the live page. It now reads them as the
inbox and the request's page do (without_bulk_lists): what it fetches follows the page, not
the job. The row still names the request and links it for its approver."""

import json

import pytest
from django.db import connection
from django.urls import reverse

from tests.approvals.test_a_bulk_jobs_request_page_reads_the_runs_it_shows_not_its_whole_snapshot import (  # noqa: E501
    BytesFetched,
    approval,
    people,
)

pytestmark = pytest.mark.django_db

__all__ = ["approval", "people"]


def test_the_run_page_lists_it_without_fetching_its_runs(approval, people, client):
    whole = len(json.dumps(approval.snapshot)) + len(json.dumps(approval.params))
    assert whole > 100_000
    client.force_login(people[0])
    fetched = BytesFetched()

    with connection.execute_wrapper(fetched):
        response = client.get(reverse("console:run", args=[approval.run_id]))

    assert response.status_code == 200
    page = response.content.decode()
    assert f"(request #{approval.pk})" in page
    assert reverse("approvals:detail", args=[approval.pk]) in page
    assert fetched.total < whole / 10, (fetched.total, whole)
