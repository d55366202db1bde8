"""An event wait's correlate() is the workflow's code, and it may give a key no event can
carry: empty, longer than the door takes (300 characters), text the database cannot store
(a NUL, a lone surrogate), or blank or holding a control character (a line break, a
bidirectional override, an invisible format character), which the door refuses as it
refuses such an event id (runs.machine.storable.identifier_problem). Waiting under it, the
run would wait for an event no sender can deliver, or fail its checkpoint at every worker in
turn (a NUL in the step's reference). A start whose input makes it give such a key is
refused, naming the step and why and not the key, and nothing is written; where the code
gives it only after the start (a release changed it), the step fails when the run reaches
it, naming the same. A key of 300 characters, or of any other Unicode text, still waits
and takes its event."""

import pytest

from audit.chain import Actor
from runs.definitions.definition import Workflow, registry
from runs.execution import executor
from runs.machine.errors import InvalidInput
from runs.models import AttentionReason, Run, RunStatus, StepStatus
from runs.waiting import events
from tests.factories import new_run, step
from tests.workflows import OrderIn

pytestmark = pytest.mark.django_db
NO_KEY = [
    ("", "it is empty"),
    ("k" * 10_000, "it is 10000 characters long, an event's at most 300"),
    ("a\x00b", "NUL characters cannot be stored"),
    ("a\ud800b", "a lone surrogate"),
    ("  \u3000", "blank (only spaces)"),
    ("a\nb", "contains control characters"),
    ("a\u202eb", "contains control characters"),
    ("ключ-🔑-\u200b-客户", "contains control characters"),
]


@pytest.fixture
def waits_under():
    """Declare "test-keyed-wait", whose one step waits for "e" under the key given."""
    declared = []

    def declare(key: str) -> Workflow:
        flow = Workflow("test-keyed-wait", version=1, input=OrderIn)
        flow.wait_for_event("wait", event="e", correlate=lambda data: key)
        declared.append(flow)
        return flow

    yield declare
    for flow in declared:
        registry.unregister(flow)


@pytest.mark.parametrize("key, why", NO_KEY)
def test_a_start_whose_wait_no_event_could_reach_is_refused_naming_why(waits_under, key, why):
    waits_under(key)
    with pytest.raises(InvalidInput) as refused:
        new_run("test-keyed-wait")
    message = str(refused.value)
    assert "step 'wait': its correlate(input) returned a key no event can carry: " in message
    assert why in message and "kkkkkkkkkk" not in message
    assert not Run.objects.exists()


@pytest.mark.parametrize("key, why", NO_KEY)
def test_a_wait_its_code_gives_such_a_key_after_the_start_fails_naming_why(
        script, waits_under, monkeypatch, key, why):
    flow = waits_under("k-1")
    run = new_run("test-keyed-wait")
    monkeypatch.setattr(flow.step("wait"), "correlate", lambda data: key)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run = Run.objects.get(pk=run.pk)
    assert run.attention_reason == AttentionReason.UNCLASSIFIED_ERROR
    assert "correlate(input)" in run.status_message and why in run.status_message
    assert "kkkkkkkkkk" not in run.status_message and run.next_wake_at is None
    wait = step(run, "wait")
    assert (wait.status, wait.remote_ref) == (StepStatus.FAILED, "")


@pytest.mark.parametrize("key", ["k" * 300, "ключ-🔑-客户 a b"])
def test_a_key_an_event_can_carry_waits_and_takes_its_event(script, waits_under, key):
    waits_under(key)
    run = new_run("test-keyed-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    receipt = events.receive_event(workflow="test-keyed-wait", event="e", key=key,
                                   event_id="evt-1", source="psp", payload={"ok": True},
                                   actor=Actor.system("payments"))
    assert receipt == events.Receipt("delivered", run.pk)
    assert step(run, "wait").result == {"ok": True}
