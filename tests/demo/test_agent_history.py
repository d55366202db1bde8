"""An agent's conversation kept within its context budget (runs.agents.agent_history): the
invoice-triage agent with a small budget (tests.workflows.summarised_triage) against the
sandbox's model over real HTTP. Past the budget, the older turns are summarised by a model
call that is a stored turn, reused after a crash (a worker SIGKILLed right after it was
stored) and never asked for again; the model is then sent the summary instead of those
turns, which stay stored and on the run page. The model requests are counted at the
sandbox."""

import json

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from demo.sandbox.models import LedgerEntry, ModelCall, Task
from runs.agents import agent_history
from runs.models import AgentTurn, RunStatus, ToolCall
from tests.agent_runs import advance, start_summarised
from tests.processes import kill_hard, until_status, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = ["read-invoice", "lookup-vendor", "open-approval-task", "post-ledger"]


def sent(call: ModelCall) -> list[dict]:
    """The messages the model was sent in one request, as the sandbox recorded them."""
    return json.loads(call.prompt)


def is_summary_request(call: ModelCall) -> bool:
    return sent(call)[0]["content"] == agent_history.SUMMARY_INSTRUCTIONS


def assert_summarised_once(run):
    """Four tool turns, one summary of the first three, the answer: each asked once."""
    turns = list(AgentTurn.objects.filter(step__run=run).order_by("index"))
    assert [t.summarises for t in turns] == [0, 0, 0, 0, 3, 0]
    summary = turns[4]
    assert summary.tool_calls == [] and "earlier turns" in summary.content
    requests = list(ModelCall.objects.order_by("pk"))
    assert len(requests) == len(turns) == 6
    assert [is_summary_request(r) for r in requests] == [False] * 4 + [True, False]
    # The full turns stay: every tool call, as a row, once each.
    calls = list(ToolCall.objects.filter(step__run=run).order_by("turn", "index"))
    assert [c.tool for c in calls] == TOOLS and all(c.status == "succeeded" for c in calls)
    assert Task.objects.count() == 1 and LedgerEntry.objects.count() == 1
    return turns, requests


def test_a_long_conversation_is_summarised_once_and_later_turns_get_the_summary(
        live_sandbox, settings, client):
    settings.EXTERNAL_TIMEOUT_SECONDS = 15
    run = advance(start_summarised("tenant-42:summarised"), times=20)
    assert run.status == RunStatus.COMPLETED, run.status_message
    turns, requests = assert_summarised_once(run)

    # The summary request carried the turns it summarises (0-2), and no tools were offered.
    asked = sent(requests[4])
    transcript = asked[1]["content"]
    assert transcript.startswith(agent_history.TRANSCRIPT_HEADING)
    assert all(tool in transcript for tool in TOOLS[:3]) and "post-ledger" not in transcript

    # Before the summary, the model was sent every turn; after it, the summary in place of
    # turns 0-2, then turn 3 (the ledger posting) and its result only.
    before = sent(requests[3])
    after = sent(requests[5])
    assert sum(m["role"] == "assistant" for m in before) == 3
    assert [m["role"] for m in after] == ["system", "user", "user", "assistant", "tool"]
    assert after[2]["content"].startswith("Summary of the conversation's turns 0-2")
    # It was sent as the model wrote it: the vendor's IBAN it names is masked in the stored
    # turn people read, not in what the model reads.
    assert agent_history.written(turns[4]) in after[2]["content"]
    assert "[redacted]" in turns[4].content and "[redacted]" not in after[2]["content"]
    assert [c["function"]["name"] for c in after[3]["tool_calls"]] == ["post-ledger"]
    assert "ledger entry LE-" in turns[5].content

    # The run page lists every turn in full, and the summary as one.
    admin = User.objects.create_superuser("root", password="pw")
    client.force_login(admin)
    page = client.get(reverse("console:run", args=[run.pk])).content.decode()
    assert "summary of turns 0-2" in page
    for tool in TOOLS:
        assert tool in page


def test_a_worker_killed_after_the_summary_was_stored_never_asks_for_it_again(
        sandbox_and_broker, settings, worker, tmp_path):
    settings.EXTERNAL_TIMEOUT_SECONDS = 15
    run = start_summarised("tenant-42:summarised-crash", wake=True)
    marker = tmp_path / "crash-after-summary"
    doomed = worker("doomed", RUNS_CRASH_AT="after_summary:triage", RUNS_CRASH_MARKER=marker)
    try:
        wait_for(marker.exists, timeout=90, what="the worker to store the summary")
    finally:
        kill_hard(doomed)
    assert doomed.returncode == -9
    assert AgentTurn.objects.filter(step__run=run, summarises=3).count() == 1
    assert sum(is_summary_request(r) for r in ModelCall.objects.all()) == 1
    assert ModelCall.objects.count() == 5

    worker("rescuer")
    run = until_status(run, RunStatus.COMPLETED, timeout=120)
    assert_summarised_once(run)
    assert sum(is_summary_request(r) for r in ModelCall.objects.all()) == 1
