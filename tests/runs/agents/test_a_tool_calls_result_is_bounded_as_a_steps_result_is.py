"""A tool call's result is bounded by the rule of a step's result (runs.machine.artifacts):
over RUNS_RESULT_INLINE_BYTES it is written once as an artifact, the call keeping its
reference, and the model, sent the whole conversation at every turn, is shown its start
with its size and sha256, never the whole; over RUNS_RESULT_MAX_BYTES it is refused: a
write's effect is held for a person as unknown (it was made, once), a read fails. The demo's
triage agent against the sandbox over real HTTP, whose tracker and invoice endpoints answer
padded on demand."""

import hashlib
import json

import pytest
from django.contrib.auth import get_user_model

from audit.chain import Actor
from demo.sandbox import faults
from demo.sandbox.models import LedgerEntry, ModelCall, Task
from runs.machine import artifacts, transitions
from runs.models import AttentionReason, ErrorClass, RunStatus, Step, ToolCall
from tests.agent_runs import advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)

INLINE = 64 * 1024


@pytest.fixture(autouse=True)
def sandbox(live_sandbox, settings):
    # Small enough to reach over HTTP in a test, and still far above every other result.
    settings.RUNS_RESULT_MAX_BYTES = 256 * 1024
    settings.RUNS_RESULT_INLINE_BYTES = INLINE
    return live_sandbox


def _call(run, tool: str) -> ToolCall:
    return ToolCall.objects.get(step__run=run, tool=tool)


def test_a_large_result_is_kept_apart_and_the_model_is_shown_its_start_size_and_sha256():
    faults.add("tracker.create", faults.LARGE_ANSWER)
    run = advance(start_triage(), times=20)
    assert run.status == RunStatus.COMPLETED, run.status_message
    call = _call(run, "open-approval-task")
    assert call.status == "succeeded" and call.remote_ref.startswith("TASK-")
    # The row keeps the reference; the artifact the result, whole.
    assert artifacts.is_artifact(call.result) and call.result["size"] > INLINE
    kept = artifacts.load(call.result)
    assert kept["id"] == call.remote_ref and len(kept["padding"]) == INLINE + 1
    assert Task.objects.count() == 1 and LedgerEntry.objects.count() == 1
    # Every later request to the model carries the bounded form, never the padding.
    prompts = [json.loads(p) for p in ModelCall.objects.order_by("created_at", "pk")
               .values_list("prompt", flat=True)]
    told = [next((m["content"] for m in p if m.get("role") == "tool"
                  and m.get("tool_call_id") == call.call_id), None) for p in prompts]
    shown = [t for t in told if t is not None]
    assert len(shown) >= 2  # the turn after the call, and the ones after that
    for content in shown:
        assert len(content.encode()) <= INLINE
        message = json.loads(content)
        about = message["result_kept_apart"]
        assert about["size_bytes"] == call.result["size"]
        assert about["sha256"] == call.result["sha256"] == hashlib.sha256(
            artifacts.read(call.result)).hexdigest()
        assert message["result_start"].startswith('{"id":"' + call.remote_ref)
    assert all("x" * (INLINE + 1) not in json.dumps(p) for p in prompts)


def test_a_writes_result_over_the_limit_holds_its_effect_for_a_person_made_once():
    faults.add("tracker.create", faults.OVERSIZED_ANSWER)
    run = advance(start_triage(), times=20)
    assert run.status == RunStatus.ATTENTION, run.status_message
    assert run.attention_reason == AttentionReason.UNCLASSIFIED_ERROR
    call = _call(run, "open-approval-task")
    # It was made: unknown, never failed; nothing of the result stored.
    assert call.status == "unknown" and call.error_class == ErrorClass.UNCLASSIFIED
    assert "over the limit of 262,144 bytes (RUNS_RESULT_MAX_BYTES)" in call.error_message
    assert call.result is None
    step = Step.objects.get(run=run, name="triage")
    assert step.status == "unknown"
    assert Task.objects.count() == 1 and LedgerEntry.objects.count() == 0
    assert not ToolCall.objects.filter(step__run=run, tool="post-ledger").exists()
    # A person's resume settles it by its key, as any unknown effect: found, never made again.
    person = Actor.for_user(get_user_model().objects.create_user("operator"))
    transitions.resume(run.pk, actor=person, reason="the tracker answered too much; go on")
    run = advance(run, times=20)
    assert run.status == RunStatus.COMPLETED, run.status_message
    call.refresh_from_db()
    assert call.status == "succeeded" and call.remote_ref == Task.objects.get().ref
    assert Task.objects.count() == 1 and LedgerEntry.objects.count() == 1


def test_a_reads_result_over_the_limit_fails_it_with_nothing_made():
    faults.add("invoices.read", faults.OVERSIZED_ANSWER)
    run = advance(start_triage(), times=20)
    assert run.status == RunStatus.ATTENTION, run.status_message
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR
    call = _call(run, "read-invoice")
    assert call.status == "failed" and call.error_class == ErrorClass.PERMANENT
    assert "over the limit of 262,144 bytes (RUNS_RESULT_MAX_BYTES)" in call.error_message
    assert Task.objects.count() == 0 and LedgerEntry.objects.count() == 0
