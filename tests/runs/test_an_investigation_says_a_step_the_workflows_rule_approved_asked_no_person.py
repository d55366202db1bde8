"""An investigation card says of an approval step the workflow's rule approved what the run
page says: approved by the workflow's rule, no person was asked, on its console page and in
its markdown, of that step only (its reference names only who approved)."""

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

import tests.approvals.workflows  # noqa: F401  (registers test-approval-by-rule)
from runs.execution import executor
from runs.models import RunStatus
from runs.operator.investigation import investigate, to_markdown
from tests.factories import new_run

pytestmark = pytest.mark.django_db

SAID = "approved by the workflow's rule; no person was asked"


@pytest.fixture
def run(script):
    script.reset()
    run = new_run("test-approval-by-rule", amount=20)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    return run


def test_the_card_says_it_of_that_step_only(run):
    card = investigate(run)
    assert {s.step: s.approved_unasked for s in card.steps} == {
        "prepare": "", "approve": SAID, "pay": ""}
    (row,) = [line for line in to_markdown(card).splitlines()
              if line.startswith("| approve |")]
    assert f"| succeeded ({SAID}) |" in row


def test_the_investigation_page_says_it(run, client):
    client.force_login(User.objects.create_superuser("root"))
    page = client.get(reverse("console:investigation", args=[run.pk])).content.decode()
    assert page.count(SAID.replace("'", "&#x27;")) == 1
