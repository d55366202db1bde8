"""A write whose outcome stayed unknown after its lookups by key failed leaves its run in
attention, for a person; its step kept the time its next lookup was due. The run page's
"Next try" column showed that time, minutes past, and went on showing it once the run was
terminated: nothing tries the step again until a person acts, yet the page said a try was
coming. The API's run state gave the same time as the step's next_attempt_at. Both now say
no next try while the run waits for a person or has ended (runs.reads.step_rows.next_try_at)."""

import re

import pytest
from django.urls import reverse

from api.tokens import token_create
from runs.machine.errors import TransientError
from runs.machine.transitions import terminate
from runs.models import AttentionReason, Run, RunStatus, Step
from tests.factories import SYSTEM, advance_once, make_due, new_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def unsettled(script):
    """test-orders in attention: create-task committed, then its answer was lost, and each
    lookup by its key failed."""
    script.plan["create-task"] = ["effect-then-raise"]
    script.lookup_errors.extend([TransientError("tracker down")] * 10)
    run = new_run()
    while run.status != RunStatus.ATTENTION:
        make_due(run)
        run = advance_once(run)
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME, run.status_message
    assert Step.objects.get(run=run, name="create-task").next_attempt_at is not None
    return run


def _next_try_cell(page: str) -> str:
    row = re.search(r'<tr id="step-3">(.*?)</tr>', page, re.S).group(1)
    assert "create-task" in row
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    # #, step, kind, does, status, tries, key, ref, error, next try, took
    return cells[9].strip()


def test_the_run_page_shows_no_next_try_while_the_run_waits_for_a_person(
        client_for, operator, unsettled):
    client = client_for(operator)
    page = client.get(reverse("console:run", args=[unsettled.pk])).content.decode()
    assert _next_try_cell(page) == ""

    terminate(unsettled.pk, actor=SYSTEM, reason="given up")
    assert Run.objects.get(pk=unsettled.pk).attention_reason == AttentionReason.ENDED_UNSETTLED
    page = client.get(reverse("console:run", args=[unsettled.pk])).content.decode()
    assert _next_try_cell(page) == ""


def test_the_api_gives_no_next_attempt_while_the_run_waits_for_a_person(client, unsettled):
    _, plaintext = token_create(name="erp", workflows=["test-orders"], rate_limit=None)
    body = client.get(f"/api/runs/{unsettled.pk}",
                      HTTP_AUTHORIZATION=f"Bearer {plaintext}").json()
    assert body["current_step"]["name"] == "create-task"
    assert body["current_step"]["status"] == "unknown"
    assert body["current_step"]["next_attempt_at"] is None
