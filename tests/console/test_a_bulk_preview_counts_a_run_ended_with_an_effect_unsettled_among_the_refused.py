"""A run ended while an effect's outcome was unknown stays in attention until it is settled,
and refuses every action but settling it (operator_rules.held_to_settle). The bulk preview
asks the same rule the transition refuses by: such a run is not counted among those that
accept Terminate (the job refuses it), it is named as refused, and the count the preview
gives is the number of runs the job then acts on. For Reconcile, which it allows, it is
counted as accepting. bulk_action preview counts it alike."""

import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from approvals.bulk import bulk_preview, bulk_progress, run_bulk_job, start_bulk_job
from audit.chain import Actor
from runs.machine import transitions
from runs.models import AttentionReason, Run, RunStatus, StepStatus
from runs.reads.selectors import RunFilters
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db
ATTENTION = RunFilters(status=RunStatus.ATTENTION)


def _failed():
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.FAILED})


def _ended_unsettled():
    run = place(new_run(), status=RunStatus.ATTENTION,
                attention_reason=AttentionReason.UNKNOWN_OUTCOME, current_step="create-task",
                step_statuses={"fetch": StepStatus.SUCCEEDED, "classify": StepStatus.SUCCEEDED,
                               "create-task": StepStatus.UNKNOWN})
    transitions.terminate(run.pk, actor=Actor.system("ops"), reason="vendor fraud")
    run.refresh_from_db()
    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.ENDED_UNSETTLED)
    return run


def test_the_preview_counts_it_as_refused_and_names_it(client_for, operator):
    plain = [_failed() for _ in range(2)]
    held = _ended_unsettled()

    preview = bulk_preview("terminate", ATTENTION, user=operator)
    assert (preview.matching, preview.may_act, preview.acceptable) == (3, 3, 2)
    assert (preview.held_to_settle, preview.held_named) == (1, (held.pk,))

    page = client_for(operator).get(reverse("console:bulk_preview"),
                                    {"status": "attention", "action": "terminate"})
    text = page.content.decode()
    assert "<strong>2</strong> of those are in a state that accepts it now" in text
    assert f'href="{reverse("console:run", args=[held.pk])}">run {held.pk}</a>' in text
    assert "wait only for it to be settled" in text
    for run in plain:
        assert f">run {run.pk}</a>" not in text
    out = io.StringIO()
    call_command("bulk_action", "preview", "terminate", "--user", operator.username,
                 "--status", "attention", "--json", stdout=out)
    assert json.loads(out.getvalue()) == {"matching": 3, "may_act": 3, "acceptable": 2,
                                          "held_to_settle": 1}

    # The job does what the preview counted: two terminated, the held one refused.
    job, _ = start_bulk_job("terminate", ATTENTION, user=operator, reason="vendor incident")
    run_bulk_job(job.pk)
    assert bulk_progress(job.pk).counts == {"done": 2, "refused": 1}
    assert all(Run.objects.get(pk=r.pk).status == RunStatus.TERMINATED for r in plain)
    assert Run.objects.get(pk=held.pk).attention_reason == AttentionReason.ENDED_UNSETTLED


def test_reconcile_which_it_allows_counts_it_as_accepting(client_for, operator):
    _failed()
    _ended_unsettled()
    preview = bulk_preview("reconcile", ATTENTION, user=operator)
    assert (preview.acceptable, preview.held_to_settle, preview.held_named) == (2, 0, ())
    page = client_for(operator).get(reverse("console:bulk_preview"),
                                    {"status": "attention", "action": "reconcile"})
    assert 'id="held-to-settle"' not in page.content.decode()
