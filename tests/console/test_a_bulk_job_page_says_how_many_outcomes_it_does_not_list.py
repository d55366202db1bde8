"""A bulk job's page listed the first 200 runs it did not simply act on (refused, forbidden,
waiting for a second person) and said nothing of the rest: a job that refused 5,000 runs
read as one that refused 200. It now lists them OUTCOMES_LISTED at a time, says which of
how many it lists, and links the next and previous pages; the count comes from the job's
progress, which counts every outcome in one query, and the list reads one page of rows,
never all of them. The page the person is on is the page its polling asks for."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from approvals.bulk import start_bulk_job
from approvals.bulk_outcomes import OUTCOMES_LISTED
from approvals.models import BulkJob, BulkOutcome
from runs.models import RunStatus
from runs.reads.selectors import RunFilters
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

REFUSED, DONE = OUTCOMES_LISTED + 5, 3


@pytest.fixture
def job(operator) -> BulkJob:
    """olga's job, its worker having refused REFUSED runs and terminated DONE."""
    place(new_run(), status=RunStatus.COMPLETED)
    job, _ = start_bulk_job("terminate", RunFilters(status=RunStatus.COMPLETED),
                            user=operator, reason="cleanup")
    now = timezone.now()
    BulkOutcome.objects.bulk_create(
        [BulkOutcome(job=job, run_id=10_000 + n, outcome=BulkOutcome.Outcome.REFUSED,
                     message=f"refusal {n}", at=now) for n in range(REFUSED)]
        + [BulkOutcome(job=job, run_id=n + 1, outcome=BulkOutcome.Outcome.DONE, at=now)
           for n in range(DONE)])
    return job


def listed(page: str) -> list[int]:
    return [int(pk) for pk in re.findall(r">#(\d+)</a></td>", page)]


def test_the_page_lists_a_page_of_outcomes_and_says_how_many_more_there_are(
        client_for, operator, job):
    client = client_for(operator)
    url = reverse("console:bulk_job", args=[job.pk])

    with CaptureQueriesContext(connection) as queries:
        first = client.get(url).content.decode()

    assert listed(first) == [10_000 + n for n in range(OUTCOMES_LISTED)]
    assert f"Runs 1 to {OUTCOMES_LISTED} of the {REFUSED} not done, by run id." in first
    assert 'href="?outcomes_page=2">Next runs' in first and "Previous runs" not in first
    # The poll asks for the page shown: the first, by the page's own address.
    assert f'hx-get="{url}"' in first
    # Every query of the outcomes either counts them or reads one page of them.
    read = [q["sql"] for q in queries.captured_queries
            if '"approvals_bulkoutcome"' in q["sql"] and "COUNT(" not in q["sql"]]
    assert read and all(f"LIMIT {OUTCOMES_LISTED}" in sql for sql in read), read

    last = client.get(url, {"outcomes_page": "2"}).content.decode()

    assert listed(last) == [10_000 + n for n in range(OUTCOMES_LISTED, REFUSED)]
    assert f"Runs {OUTCOMES_LISTED + 1} to {REFUSED} of the {REFUSED} not done" in last
    assert 'href="?outcomes_page=1">Previous runs' in last and "Next runs" not in last
    assert f'hx-get="{url}?outcomes_page=2"' in last
    for given in ("99", "0", "abc", "-1", "\u0663"):
        page = client.get(url, {"outcomes_page": given}).content.decode()
        assert listed(page) == (listed(last) if given == "99" else listed(first))


def test_a_job_whose_outcomes_fit_one_page_has_no_paging(client_for, operator, job):
    BulkOutcome.objects.filter(job=job, run_id__gte=10_000 + OUTCOMES_LISTED).delete()

    page = client_for(operator).get(reverse("console:bulk_job", args=[job.pk])) \
        .content.decode()

    assert len(listed(page)) == OUTCOMES_LISTED
    assert "outcomes_page" not in page and "not done, by run id" not in page
