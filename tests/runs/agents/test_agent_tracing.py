"""An agent's trace: each model call, tool call and lookup by key is a span of its run's one
trace, with the call's idempotency key and attempt. The demo's triage agent against the
sandbox over real HTTP, its ledger posting answered too late to know (a lookup settles it)."""

import pytest
from opentelemetry.trace import StatusCode

from demo.sandbox import faults
from demo.sandbox.models import LedgerEntry
from runs.models import RunStatus, ToolCall
from tests.agent_runs import advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)


def test_model_calls_tool_calls_and_lookups_are_spans_of_the_runs_trace(spans, live_sandbox):
    # The ledger commits the posting, then holds its answer past the client's timeout.
    faults.add("ledger.post", faults.COMMIT_THEN_TIMEOUT)
    run = advance(start_triage())
    assert run.status == RunStatus.COMPLETED, run.status_message
    assert LedgerEntry.objects.count() == 1

    finished = sorted(spans.get_finished_spans(), key=lambda s: s.start_time)
    assert len({s.context.trace_id for s in finished}) == 1
    root = next(s for s in finished if s.name == "run invoice-triage")
    assert all(s.parent.span_id == root.context.span_id for s in finished if s is not root)
    assert [s.name for s in finished if s.name.startswith("model call")] == [
        "model call triage"] * 5
    calls = {c.tool: c for c in ToolCall.objects.filter(step__run=run)}
    tools = [s for s in finished if s.name.startswith("tool ")]
    assert [s.name for s in tools] == [
        "tool read-invoice triage", "tool lookup-vendor triage",
        "tool open-approval-task triage", "tool post-ledger triage"]
    for span in tools:
        call = calls[span.name.split()[1]]
        assert span.attributes["idempotency.key"] == call.idempotency_key
        assert span.attributes["attempt"] == 1
    post = tools[-1]
    assert post.attributes["outcome"] == "unknown"
    assert post.status.status_code == StatusCode.ERROR
    (lookup,) = [s for s in finished if s.name.startswith("lookup ")]
    assert lookup.name == "lookup post-ledger triage"
    assert lookup.attributes["idempotency.key"] == calls["post-ledger"].idempotency_key
    assert lookup.attributes["lookup.verdict"] == "Found"
    assert lookup.start_time > post.end_time
