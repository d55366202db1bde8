"""An agent's tool call is undone as a step is, and its undo's answer is checked as a step's
undo's is: a reference the database cannot store (a NUL) fails that undo once, for a
person, instead of failing the checkpoint, and sending the undo again, at every attempt."""

import pytest

from runs.agents import agent_loop
from runs.execution import executor
from runs.machine import transitions
from runs.models import ErrorClass, RunStatus, ToolCall
from tests.agent_runs import ACTOR
from tests.workflows import note_then_charge, script


class RefsWithANul(dict):
    """The undo's remote system answers every key with a reference holding a NUL."""

    def setdefault(self, key, default=None):
        return "DEL-\x00-1"


@pytest.mark.django_db
def test_an_undo_answering_a_reference_with_a_nul_fails_once(monkeypatch):
    script.reset()
    monkeypatch.setattr(script, "compensations", RefsWithANul())
    monkeypatch.setattr(agent_loop, "ask_model", note_then_charge())
    run, _ = transitions.start_run(workflow="test-agent-saga", business_key="saga-nul",
                                   input={"order": "o-1"}, actor=ACTOR, wake=False)
    # The charge fails for good, so the policy undoes the agent's calls, the note first.
    status = executor.advance_run(run.pk, worker="w1")
    assert status == RunStatus.COMPENSATION_FAILED
    run.refresh_from_db()
    note = ToolCall.objects.get(step__run=run, tool="write-note")
    assert note.error_class == ErrorClass.UNCLASSIFIED
    assert "NUL characters cannot be stored" in note.error_message
    assert "\x00" not in note.remote_ref
    undos = [c for c in script.calls if c[0] == "write-note:compensate"]
    assert len(undos) == 1
    # Nothing is sent again by the same worker loop: the run waits for a person.
    executor.advance_run(run.pk, worker="w1")
    assert len([c for c in script.calls if c[0] == "write-note:compensate"]) == 1
