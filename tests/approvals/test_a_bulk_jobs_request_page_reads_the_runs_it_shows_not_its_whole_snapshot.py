"""The page of a bulk job's request shows PAGE_RUNS_LISTED of its runs at a time, but read the
request's whole snapshot and params from the database to do it: every run of the job twice
and each run's high-impact effects (megabytes for a job of 100,000 runs), for each approver
at each look, and so did the link from the mail on its way to the page. The page now reads
the request without those lists, which the database counts, and takes the page's runs and
their effects in SQL (runs.store's json parts); the link reads neither; and the inboxes
(the console's and GET /api/approvals), which read each listed request whole too, list a
bulk job's request by the count the database takes: what they fetch follows the page, not
the job. The page still shows the first runs with their effects,
the exact count, and the hash of the whole snapshot."""

import json
import re

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from api.tokens import token_create
from approvals.bulk import start_bulk_job
from approvals.four_eyes import request_bulk_operator_action
from approvals.models import ApprovalRequest, BulkOutcome
from approvals.selectors import PAGE_RUNS_LISTED
from approvals.tokens import approval_link_token
from console.roles import ensure_roles
from runs.models import RunStatus
from runs.reads.selectors import RunFilters
from tests.approvals.bulk_requests import copies_of, run_with_an_effect

pytestmark = pytest.mark.django_db

RUNS = 3_000


@pytest.fixture
def people(db):
    """olga decides, carl asks."""
    ensure_roles(Group, Permission)
    users = [User.objects.create_user(name) for name in ("olga", "carl")]
    for user in users:
        user.groups.add(Group.objects.get(name="operators"))
    return users


@pytest.fixture
def approval(people) -> ApprovalRequest:
    """carl's bulk terminate of RUNS runs, each with high-impact effects, all waiting for a
    second person in one request: written as the job's worker writes them (an outcome
    each, then the request at the job's end), in a few inserts."""
    first = run_with_an_effect()
    runs = [first, *copies_of(first, RUNS - 1)]
    job, _ = start_bulk_job("terminate", RunFilters(status=RunStatus.ATTENTION),
                            user=people[1], reason="incident 42")
    BulkOutcome.objects.bulk_create([
        BulkOutcome(job=job, run_id=run.pk, outcome=BulkOutcome.Outcome.SECOND_PERSON,
                    at=timezone.now()) for run in runs])
    made = request_bulk_operator_action(job, [run.pk for run in runs])
    return ApprovalRequest.objects.get(pk=made.pk)


class BytesFetched:
    """The bytes of every value the database sends back, query by query (psycopg's result
    of each statement, read as it arrives, before Django reads its rows)."""

    def __init__(self):
        self.total = 0

    def __call__(self, execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        fetched = context["cursor"].cursor.pgresult
        if fetched is not None:
            self.total += sum(len(fetched.get_value(row, column) or b"")
                              for row in range(fetched.ntuples)
                              for column in range(fetched.nfields))
        return result


def test_the_page_fetches_a_page_of_runs_not_the_whole_snapshot(approval, people, client):
    whole = len(json.dumps(approval.snapshot)) + len(json.dumps(approval.params))
    assert whole > 100_000  # what the page read before, for each look
    client.force_login(people[0])
    fetched = BytesFetched()

    with connection.execute_wrapper(fetched):
        response = client.get(reverse("approvals:detail", args=[approval.pk]))

    assert response.status_code == 200
    assert fetched.total < whole / 10, (fetched.total, whole)
    page = response.content.decode()
    runs = sorted(approval.bulk_runs)
    first = runs[:PAGE_RUNS_LISTED]
    assert [int(pk) for pk in re.findall(r"<li>(\d+)</li>", page)] == first
    assert sorted({int(pk) for pk in re.findall(r"<li>run (\d+): ", page)}) == first
    assert f"{RUNS} runs of bulk job {approval.params['bulk_job']}, listed below" in page
    assert f"Runs 1 to {PAGE_RUNS_LISTED} of {RUNS}, with their effects." in page
    assert approval.snapshot_hash in page
    assert '"runs"' not in page.replace("&quot;", '"')  # the params repeat none
    assert f"is taken on each of the {RUNS} runs listed" in page  # what follows
    assert 'value="approve"' in page


def test_a_later_page_fetches_its_own_runs_and_their_effects(approval, people, client):
    client.force_login(people[0])
    fetched = BytesFetched()

    with connection.execute_wrapper(fetched):
        page = client.get(reverse("approvals:detail", args=[approval.pk]),
                          {"runs_page": "7"}).content.decode()

    runs = sorted(approval.bulk_runs)[6 * PAGE_RUNS_LISTED:7 * PAGE_RUNS_LISTED]
    assert [int(pk) for pk in re.findall(r"<li>(\d+)</li>", page)] == runs
    assert sorted({int(pk) for pk in re.findall(r"<li>run (\d+): ", page)}) == runs
    effects = [effect for effect in approval.snapshot["high_impact_effects"]
               if int(effect.split(":")[0].removeprefix("run ")) in runs]
    assert all(effect in page for effect in effects) and len(effects) >= len(runs)
    assert fetched.total < len(json.dumps(approval.snapshot)) / 10


def test_the_link_from_the_mail_fetches_neither_whole(approval, people, client):
    client.force_login(people[0])
    fetched = BytesFetched()

    with connection.execute_wrapper(fetched):
        response = client.get(reverse("approvals:link", kwargs={
            "pk": approval.pk, "token": approval_link_token.make_token(approval)}),
            follow=True)

    assert response.redirect_chain[0][0] == reverse("approvals:detail", args=[approval.pk])
    assert 'value="approve"' in response.content.decode()
    assert fetched.total < len(json.dumps(approval.snapshot)) / 10


def test_the_inboxes_list_it_by_its_count_without_reading_its_runs(approval, people, client):
    olga = people[0]
    client.force_login(olga)
    _, plaintext = token_create(name="ops-olga", workflows=["test-orders"], acting_user=olga)
    fetched = BytesFetched()

    with connection.execute_wrapper(fetched):
        page = client.get(reverse("approvals:inbox")).content.decode()
        listed = client.get("/api/approvals", HTTP_AUTHORIZATION=f"Bearer {plaintext}")

    bulk_job = approval.params["bulk_job"]
    assert f"{RUNS} runs (bulk job {bulk_job})" in page
    assert listed.status_code == 200, listed.content
    [row] = listed.json()["requests"]
    assert (row["bulk_job"], row["run_count"], row["reason"], row["requested_by"]) == (
        bulk_job, RUNS, "incident 42", "carl")
    assert fetched.total < len(json.dumps(approval.snapshot)) / 10
