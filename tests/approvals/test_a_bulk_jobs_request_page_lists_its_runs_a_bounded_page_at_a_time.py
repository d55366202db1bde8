"""The page of a bulk job's request listed every run of the job, every high-impact effect of
each, and the runs once more in its params: a job of ten thousand runs made a page of
megabytes for the approver to load. It now lists PAGE_RUNS_LISTED runs at a time, each with
its effects, with the way to the next and previous runs and to the job's page; the count of
runs is exact, and the hash is of the whole snapshot, as before."""

import re

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.urls import reverse

from approvals.models import ApprovalRequest
from approvals.selectors import PAGE_RUNS_LISTED
from console.roles import ensure_roles
from tests.approvals.bulk_requests import bulk_terminate, copies_of, run_with_an_effect

pytestmark = pytest.mark.django_db

RUNS = PAGE_RUNS_LISTED + 7


@pytest.fixture
def people(db):
    """olga decides, carl asks."""
    ensure_roles(Group, Permission)
    users = [User.objects.create_user(name) for name in ("olga", "carl")]
    for user in users:
        user.groups.add(Group.objects.get(name="operators"))
    return users


def listed(page: str) -> tuple[list[int], list[int]]:
    """The run ids the page lists, and those whose effects it lists."""
    runs = [int(pk) for pk in re.findall(r"<li>(\d+)</li>", page)]
    effects = sorted({int(pk) for pk in re.findall(r"<li>run (\d+): ", page)})
    return runs, effects


@pytest.fixture
def request_page(people, client):
    olga, carl = people
    first = run_with_an_effect()
    copies_of(first, RUNS - 1)
    job = bulk_terminate(user=carl)
    approval = ApprovalRequest.objects.get(pk=job.approval_id)
    assert len(approval.bulk_runs) == RUNS
    client.force_login(olga)
    url = reverse("approvals:detail", args=[approval.pk])

    def page(query: str = "") -> str:
        response = client.get(f"{url}{query}")
        assert response.status_code == 200
        return response.content.decode()
    return job, sorted(approval.bulk_runs), page


def test_the_first_page_lists_the_first_runs_with_their_effects_and_counts_them_all(
        request_page, client):
    job, runs, page = request_page

    first = page()

    assert listed(first) == (runs[:PAGE_RUNS_LISTED], runs[:PAGE_RUNS_LISTED])
    assert f"{RUNS} runs of bulk job {job.pk}, listed below a page at a time" in first
    assert f"Runs 1 to {PAGE_RUNS_LISTED} of {RUNS}, with their effects." in first
    assert "<dt>Run count</dt>\n    <dd>" + str(RUNS) in first
    assert '"runs"' not in first.replace("&quot;", '"')  # the params repeat none
    assert 'href="?runs_page=2">Next runs' in first and "Previous runs" not in first
    job_page = reverse("console:bulk_job", args=[job.pk])
    assert f'href="{job_page}"' in first
    assert client.get(job_page).status_code == 200  # she may decide it: she may follow it
    assert 'value="approve"' in first  # and decide it here


def test_the_last_page_lists_the_rest_and_a_page_past_either_end_is_the_nearest(
        request_page):
    _, runs, page = request_page

    last = page("?runs_page=2")

    assert listed(last) == (runs[PAGE_RUNS_LISTED:], runs[PAGE_RUNS_LISTED:])
    assert f"Runs {PAGE_RUNS_LISTED + 1} to {RUNS} of {RUNS}, with their effects." in last
    assert 'href="?runs_page=1">Previous runs' in last and "Next runs" not in last
    past = page("?runs_page=99")
    assert listed(past) == listed(last) and f"to {RUNS} of {RUNS}" in past
    for given in ("0", "abc", "-1", "\u0663"):
        assert listed(page(f"?runs_page={given}"))[0] == runs[:PAGE_RUNS_LISTED]
