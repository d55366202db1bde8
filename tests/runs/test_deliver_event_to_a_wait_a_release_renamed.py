"""A release renamed the event step a run waits on (no new version): a person delivering
the event by hand is refused, with a message naming the step, since the code no longer has
the schema to check the payload against; nothing is delivered and nothing changes. Once the
code has the step again, the same delivery is accepted and the run goes on."""

import pytest

from audit.chain import Actor
from audit.models import AuditRecord
from runs.definitions.definition import registry
from runs.execution import executor
from runs.machine.errors import TransitionNotAllowed
from runs.models import ExternalEvent, Run, RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
OLGA = Actor(kind="user", label="olga")
BY_HAND = ActionInput(reason="the provider confirmed it by phone",
                      evidence='{"amount": 5, "reference": "PSP-9"}')


def _waiting():
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    return Run.objects.get(pk=run.pk)


def _state(run):
    run = Run.objects.get(pk=run.pk)
    return (run.status, run.status_message, run.audit_seq,
            [(s.name, s.status, s.remote_ref, s.result) for s in run.steps.order_by("position")],
            AuditRecord.objects.filter(run=run).count(), ExternalEvent.objects.count())


def test_delivering_an_event_to_a_step_a_release_renamed_is_refused_naming_it(
        script, monkeypatch):
    run = _waiting()
    monkeypatch.setattr(registry.get("test-payment-wait", 1).step("payment"), "name",
                        "payment-v2")
    before = _state(run)
    # Not offered (console, API, CLI read the one table), and refused if asked for anyway.
    run.refresh_from_db()
    offered = ACTIONS["event_received"].refusal(run, list(run.steps.all()))
    assert "here has no step 'payment', which the run waits on" in offered

    with pytest.raises(TransitionNotAllowed) as refused:
        ACTIONS["event_received"].perform(run.pk, actor=OLGA, given=BY_HAND)
    message = str(refused.value)
    assert message == offered  # one rule, one wording, whichever path asks
    assert "test-payment-wait v1" in message and "no step 'payment'" in message
    assert "nothing was delivered" in message

    assert _state(run) == before
    assert step(run, "payment").status == StepStatus.WAITING
    assert not AuditRecord.objects.filter(run=run, action="event_received").exists()
    assert [name for name, *_ in script.calls] == ["invoice"]

    # The code has the step again: the same delivery is accepted and the run goes on.
    monkeypatch.undo()
    assert ACTIONS["event_received"].perform(run.pk, actor=OLGA, given=BY_HAND).status == \
        RunStatus.QUEUED
    assert step(run, "payment").result == {"amount": 5, "reference": "PSP-9"}
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert [name for name, *_ in script.calls] == ["invoice", "book"]
