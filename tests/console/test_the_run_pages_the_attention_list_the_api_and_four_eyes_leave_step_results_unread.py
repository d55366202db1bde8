"""What a person or a caller reads of a run's steps (the run page and its poll, its
investigation, the attention list's actions, the API's run, the effects a four-eyes request
shows) is their state, keys, references and errors, never their results: a result is kept
inline up to 64 KB, and each of these read every step's at every view and every poll. A
tool call's result, which the page does show, is read with its conversation."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from api.tokens import token_create
from approvals.four_eyes import bulk_effects
from runs.models import Step, StepStatus

pytestmark = pytest.mark.django_db

BIG = {"blob": "x" * 60_000}
# A statement that reads the steps table's result column (Django names it in full).
READS_RESULT = re.compile(r'"runs_step"\."result"')


def _step_reads(queries) -> list[str]:
    return [q["sql"] for q in queries if 'FROM "runs_step"' in q["sql"]]


@pytest.fixture
def run_with_big_results(stuck_run):
    """A run in attention whose two first steps succeeded with results of 60 KB each."""
    Step.objects.filter(run=stuck_run, status=StepStatus.SUCCEEDED).update(result=BIG)
    assert Step.objects.filter(run=stuck_run, result=BIG).count() == 2
    return stuck_run


@pytest.mark.parametrize("page", ["console:run", "console:investigation"])
def test_a_run_page_reads_its_steps_without_their_results(
        client_for, operator, run_with_big_results, page):
    client = client_for(operator)
    with CaptureQueriesContext(connection) as queries:
        response = client.get(reverse(page, args=[run_with_big_results.pk]))
    assert response.status_code == 200
    assert b"create-task" in response.content  # the steps are drawn
    reads = _step_reads(queries)
    assert reads, "the page read no steps at all"
    assert not [sql for sql in reads if READS_RESULT.search(sql)]
    assert b"x" * 100 not in response.content


def test_the_attention_list_reads_its_runs_steps_without_their_results(
        client_for, operator, run_with_big_results):
    client = client_for(operator)
    with CaptureQueriesContext(connection) as queries:
        response = client.get(reverse("console:attention"))
    assert response.status_code == 200
    assert run_with_big_results.business_key.encode() in response.content
    reads = _step_reads(queries)
    assert reads and not [sql for sql in reads if READS_RESULT.search(sql)]


def test_the_apis_run_reads_its_steps_without_their_results(client, run_with_big_results):
    _, plaintext = token_create(name="erp", workflows=["test-orders"], rate_limit=None)
    with CaptureQueriesContext(connection) as queries:
        response = client.get(f"/api/runs/{run_with_big_results.pk}",
                              HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 200
    assert response.json()["steps_done"] == 2
    reads = _step_reads(queries)
    assert reads and not [sql for sql in reads if READS_RESULT.search(sql)]


def test_the_effects_a_four_eyes_request_shows_are_read_without_results(run_with_big_results):
    Step.objects.filter(run=run_with_big_results, name="create-task").update(
        status=StepStatus.UNKNOWN)  # the tracker may have a task: a low-impact effect
    Step.objects.filter(run=run_with_big_results, name="post-ledger").update(
        status=StepStatus.SUCCEEDED, remote_ref="LEDGER-7")
    with CaptureQueriesContext(connection) as queries:
        effects = bulk_effects([run_with_big_results.pk])
    assert effects == [f"run {run_with_big_results.pk}: post-ledger: succeeded"]
    reads = _step_reads(queries)
    assert reads and not [sql for sql in reads if READS_RESULT.search(sql)]
