"""A run a person ended (cancelled, terminated, compensated) while it waited for an approval
or an event keeps that step `waiting`: the kept-event rules find the ended run by the wait it
still holds, a reopen waits on with it, and the approvals sweep withdraws the request
(kernel.end_waits). So the run page, its investigation card, the API's run state and
show_run say that the wait ended with the run, and how the run was ended, and the API gives
no time at which an ended event wait would time out; a wait that is still live, or live
again after a reopen, is not said to be over."""

import io
import itertools
import json

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from api.tokens import token_create
from audit.chain import Actor
from runs.definitions.definition import Workflow, registry
from runs.execution import executor
from runs.machine import transitions
from runs.models import RunStatus, StepStatus
from runs.operator.investigation import investigate, to_markdown
from tests.factories import new_run, step
from tests.workflows import FAST, OrderIn, scripted_call

pytestmark = pytest.mark.django_db
_tokens = itertools.count(1)
OLGA = Actor(kind="user", label="olga")


@pytest.fixture
def booked_then_approved():
    """A low-impact booking with an undo, then an approval: a run can be compensated while
    it waits for the approval."""
    workflow = Workflow("test-book-then-approve", version=1, input=OrderIn)

    @workflow.write("book", retry=FAST, honours_key=True)
    def book(ctx):
        return scripted_call(ctx, lambda: {"booked": ctx.input.order})

    @book.compensate
    def unbook(ctx):
        return scripted_call(ctx, lambda: {"unbooked": ctx.input.order})

    @workflow.approval("approve", approvers=("group:approvers",), on_timeout="reject")
    def approve(ctx):
        return {"order": ctx.input.order}

    yield workflow
    registry.unregister(workflow)


def _waiting(workflow: str):
    run = new_run(workflow)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    return run


def _shown(run) -> dict:
    out = io.StringIO()
    call_command("show_run", str(run.pk), "--json", stdout=out)
    return {s["name"]: s for s in json.loads(out.getvalue())["steps"]}


def _shown_text(run) -> str:
    out = io.StringIO()
    call_command("show_run", str(run.pk), stdout=out)
    return out.getvalue()


def _api(client, run) -> dict:
    _, plaintext = token_create(name=f"reader-{next(_tokens)}", workflows=[run.workflow_name])
    response = client.get(f"/api/runs/{run.pk}", HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 200, response.content
    return response.json()


def _page(client, run) -> str:
    boss = User.objects.filter(username="boss").first() or User.objects.create_superuser("boss")
    client.force_login(boss)
    response = client.get(f"/runs/{run.pk}/")
    assert response.status_code == 200
    return response.content.decode()


def test_a_cancelled_runs_approval_wait_is_said_to_have_ended_with_it(client, script):
    run = _waiting("test-approval")
    transitions.cancel(run.pk, actor=OLGA, reason="order withdrawn")
    run.refresh_from_db()
    assert run.status == RunStatus.TERMINATED
    # The step keeps its status, as the approvals sweep and a reopen need.
    assert step(run, "approve").status == StepStatus.WAITING
    said = "the wait ended with the run: it was cancelled"

    assert _shown(run)["approve"]["wait_ended"] == said
    assert said in _shown_text(run)
    body = _api(client, run)
    assert body["current_step"]["name"] == "approve"
    assert body["current_step"]["wait_ended"] == said
    assert said in _page(client, run)
    # The steps the end skipped, or that it left as they were done, say nothing of it.
    assert _shown(run)["prepare"]["wait_ended"] is None
    assert _shown(run)["pay"]["wait_ended"] is None


def test_a_terminated_runs_event_wait_is_said_to_have_ended_with_it(client, script):
    run = _waiting("test-payment-wait")
    transitions.terminate(run.pk, actor=OLGA, reason="duplicate order")
    assert step(run, "payment").status == StepStatus.WAITING
    said = "the wait ended with the run: it was terminated"
    assert _shown(run)["payment"]["wait_ended"] == said
    assert _api(client, run)["current_step"]["wait_ended"] == said
    assert said in _page(client, run)


def test_a_compensated_runs_approval_wait_is_said_to_have_ended_with_it(
        client, script, booked_then_approved):
    run = _waiting("test-book-then-approve")
    assert step(run, "approve").status == StepStatus.WAITING
    transitions.compensate(run.pk, actor=OLGA, reason="customer cancelled")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPENSATED
    assert step(run, "approve").status == StepStatus.WAITING
    said = "the wait ended with the run: it was compensated"
    assert _shown(run)["approve"]["wait_ended"] == said
    assert said in _page(client, run)


def test_a_live_wait_and_one_a_reopen_brought_back_are_not_said_to_be_over(client, script):
    run = _waiting("test-approval")
    assert _shown(run)["approve"]["wait_ended"] is None
    assert _api(client, run)["current_step"]["wait_ended"] is None
    assert "the wait ended" not in _page(client, run)

    transitions.terminate(run.pk, actor=OLGA, reason="by mistake")
    transitions.reopen(run.pk, actor=OLGA, reason="terminated by mistake")
    assert step(run, "approve").status == StepStatus.WAITING
    assert _shown(run)["approve"]["wait_ended"] is None
    assert "the wait ended" not in _shown_text(run)
    assert "the wait ended" not in _page(client, run)


def test_the_investigation_card_says_the_wait_ended_with_the_run(client, script):
    run = _waiting("test-approval")
    transitions.cancel(run.pk, actor=OLGA, reason="order withdrawn")
    run.refresh_from_db()
    said = "the wait ended with the run: it was cancelled"
    card = investigate(run)
    rows = {row.step: row for row in card.steps}
    assert rows["approve"].status == StepStatus.WAITING
    assert rows["approve"].wait_ended == said
    assert rows["prepare"].wait_ended == ""
    assert f"| waiting ({said}) |" in to_markdown(card)
    # The card on the run page, and on its own page, say so on the step's row.
    assert said in _page(client, run).split('id="investigation-steps"', 1)[1]
    own = client.get(f"/runs/{run.pk}/investigation/")
    assert own.status_code == 200
    assert said in own.content.decode()


def test_an_ended_event_waits_timeout_is_not_given_as_due(client, script):
    run = _waiting("test-payment-wait")
    assert _api(client, run)["current_step"]["next_attempt_at"] is not None
    transitions.terminate(run.pk, actor=OLGA, reason="duplicate order")
    # The row keeps its timeout (a reopen waits on until then); nothing happens at it now.
    assert step(run, "payment").next_attempt_at is not None
    current = _api(client, run)["current_step"]
    assert current["name"] == "payment"
    assert current["wait_ended"] == "the wait ended with the run: it was terminated"
    assert current["next_attempt_at"] is None
