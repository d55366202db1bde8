"""The runs list's bulk form has no step field: a step action taken in bulk (a reconcile) aims
at the first step of each run it applies to. For a run with no such step the operator is
told that the action applies to none of its steps, never asked to "choose the step" the form
cannot choose; nothing is done to the run. A run the person may not act on is told of as a
run that does not exist, whatever its steps."""

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.factories import drawn, new_run, place

pytestmark = pytest.mark.django_db


def _messages(response) -> list[tuple[str, str]]:
    return [(m.level_tag, m.message) for m in get_messages(response.wsgi_request)]


def _state(run):
    run = Run.objects.get(pk=run.pk)
    return (run.status, run.audit_seq, sorted(run.steps.values_list("name", "status")),
            AuditRecord.objects.filter(run=run).count())


def test_a_run_with_no_step_to_reconcile_is_told_so_without_choose_the_step(client_for,
                                                                             operator):
    # In attention with every step pending: no step failed or is unknown, none to reconcile.
    run = place(new_run(), status=RunStatus.ATTENTION)
    before = _state(run)
    response = client_for(operator).post(reverse("console:bulk"), {
        "action": "reconcile", "reason": "checked the tracker", "run": [str(run.pk)],
        **drawn(run)})
    assert response.status_code == 302
    shown = _messages(response)
    assert shown == [("error", f"Reconcile refused for runs {run.pk} (reconcile "
                               "applies to none of its steps).")]
    assert not any("choose" in message.lower() for _, message in shown)
    assert _state(run) == before


def test_a_run_one_may_not_act_on_is_not_told_of_by_its_steps(client_for, finance_operator):
    foreign = new_run("customer-onboarding", email="b@example.com", name="B", plan="free")
    Run.objects.filter(pk=foreign.pk).update(status=RunStatus.ATTENTION)
    before = _state(foreign)
    response = client_for(finance_operator).post(reverse("console:bulk"), {
        "action": "reconcile", "reason": "checked", "run": [str(foreign.pk)], **drawn(foreign)})
    assert _messages(response) == [
        ("error", f"Reconcile not done: no run you may act on has the id {foreign.pk}.")]
    assert _state(foreign) == before
