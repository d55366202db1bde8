"""A model may answer a turn with megabytes of text. A turn's text is kept on its row up to
RUNS_AGENT_TEXT_MAX_CHARS characters, cut past it saying how long it was, and the model is
sent back only what is kept. A final answer is the step's result, and a result is never cut:
one longer than the bound is kept whole as an artifact, read whole by the steps after it; one
over RUNS_RESULT_MAX_BYTES is never stored, and the run stops naming size and limit. The
demo's triage agent, its model scripted, against the sandbox over real HTTP."""

import json

import pytest

from audit.models import AuditRecord
from demo.sandbox.models import LedgerEntry, Task
from runs.agent_models import AgentTurn, ToolCall
from runs.machine import artifacts
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import AttentionReason, ErrorClass, RunStatus, Step
from tests.agent_runs import advance, start_triage
from tests.runs.agents.scripted_model import scripted

pytestmark = pytest.mark.django_db(transaction=True)

MEGABYTE = 1024 * 1024
BOUND = 65_536  # the default


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def test_a_megabyte_of_thought_is_kept_cut_and_the_model_sent_back_the_cut(monkeypatch):
    thought = "thinking " * (MEGABYTE // 9 + 1)
    seen = scripted(
        monkeypatch,
        ModelTurn(content=thought, tool_calls=[{"id": "r", "name": "read-invoice",
                                                "arguments": '{"number": "INV-2001"}'}]),
        ModelTurn(content="Read it.", tool_calls=[]))
    run = advance(start_triage(), times=20)
    assert run.status == RunStatus.COMPLETED, run.status_message
    step = Step.objects.get(run=run, name="triage")
    first = AgentTurn.objects.filter(step=step).order_by("index").first()
    # The row keeps the start, saying how long the text was.
    assert len(first.content) < BOUND + 100 and first.content.startswith(thought[:BOUND])
    assert first.content.endswith(f"(cut: {len(thought):,} characters in all)")
    assert first.transcript is None
    # The call of the cut turn was made as asked; the model is sent back only the cut text.
    assert ToolCall.objects.get(step=step).status == "succeeded"
    assert len(json.dumps(seen[1])) < 2 * BOUND
    notes = AuditRecord.objects.get(run=run, action="agent_turn_stored",
                                    data__turn=first.index).data["stored_otherwise"]
    assert f"content of {len(thought):,} characters cut to its {BOUND:,} " \
        "(RUNS_AGENT_TEXT_MAX_CHARS)" in notes


def test_a_final_answer_past_the_bound_is_the_steps_result_whole(monkeypatch, settings):
    settings.RUNS_AGENT_TEXT_MAX_CHARS = bound = 2000
    # The step after the agent messages its answer, which the messenger takes up to 20,000
    # characters: an answer longer than the bound that still fits.
    answer = "".join(f"line {i} of the summary.\n" for i in range(500))
    scripted(monkeypatch, ModelTurn(content=answer, tool_calls=[]))
    run = advance(start_triage(), times=20)
    assert run.status == RunStatus.COMPLETED, run.status_message
    step = Step.objects.get(run=run, name="triage")
    turn = AgentTurn.objects.get(step=step)
    assert len(turn.content) < bound + 100 and turn.content.startswith(answer[:bound])
    assert f"(cut: {len(answer):,} characters in all)" in turn.content
    # Whole in its artifact, and whole in the step's result the next step read.
    assert artifacts.is_artifact(turn.transcript)
    assert json.loads(artifacts.read(turn.transcript)) == answer
    assert artifacts.Results({"triage": step.result})["triage"]["answer"] == answer
    notes = AuditRecord.objects.get(run=run, action="agent_turn_stored").data[
        "stored_otherwise"]
    assert f"content of {len(answer):,} characters cut to its {bound:,} " \
        "(RUNS_AGENT_TEXT_MAX_CHARS), kept whole as an artifact" in notes


def test_an_answer_over_the_result_limit_is_never_stored(monkeypatch, settings):
    settings.RUNS_RESULT_MAX_BYTES = 100_000
    scripted(monkeypatch, ModelTurn(content="z" * 200_000, tool_calls=[]))
    tasks, entries = Task.objects.count(), LedgerEntry.objects.count()
    run = advance(start_triage(), times=20)
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR
    step = Step.objects.get(run=run, name="triage")
    assert step.error_class == ErrorClass.PERMANENT
    assert "200,002 bytes, over the limit of 100,000 bytes (RUNS_RESULT_MAX_BYTES)" in \
        step.error_message
    assert not AgentTurn.objects.filter(step=step).exists()
    assert "z" * 1000 not in json.dumps(step.result)
    assert Task.objects.count() == tasks and LedgerEntry.objects.count() == entries
