"""Drill 5a's verdict (a restart after an agent's model turn was stored) holds each tool call
of the run to one send, as drills 2a and 8 do: a call sent twice is an effect that may have
been made twice, whatever became of the stored turns. Its words say how many times.

The verdict judges the run alone (drills.restart_after_turn_verdict, given the turns stored
before the crash), so it is judged here on runs of the demo's invoice-triage agent made
in this process against the sandbox, its first turn given as the one stored: one whose
ledger posting was really sent twice (the ledger answered 503 the first time, before it
changed anything, and the call was sent again with its key), beside one whose calls each
went once."""

import pytest

from demo.sandbox import faults
from demo.sandbox.models import LedgerEntry
from runs.models import AgentTurn, Run, RunStatus, ToolCall
from runs.operator.drill_results import restart_after_turn_verdict
from tests.agent_runs import advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)


def judged(run: Run) -> tuple[str, bool]:
    first = list(AgentTurn.objects.filter(step__run=run, index=0)
                 .values_list("index", "tool_calls"))
    assert len(first) == 1
    return restart_after_turn_verdict(run, first)


def test_drill_5a_fails_a_run_whose_posting_was_sent_twice(live_sandbox):
    faults.add("ledger.post", faults.UNAVAILABLE, times=1)
    run = advance(start_triage(key="tenant-42:posting-sent-twice"))
    assert run.status == RunStatus.COMPLETED, run.status_message
    posting = ToolCall.objects.get(step__run=run, tool="post-ledger")
    assert (posting.status, posting.attempt) == ("succeeded", 2)
    assert list(ToolCall.objects.filter(step__run=run).exclude(pk=posting.pk)
                .values_list("attempt", flat=True)) == [1, 1, 1]

    observed, passed = judged(run)

    assert passed is False
    assert observed == ("1 turn stored before the crash, reused; 5 turns in all; sent more "
                        f"than once: triage/{posting.ref} post-ledger 2x; run completed")
    # The verdict reads; it changes nothing.
    assert ToolCall.objects.get(pk=posting.pk).attempt == 2
    assert LedgerEntry.objects.count() == 1


def test_drill_5a_passes_a_run_whose_tool_calls_each_went_once(live_sandbox):
    run = advance(start_triage(key="tenant-42:each-sent-once"))
    assert run.status == RunStatus.COMPLETED, run.status_message
    assert list(ToolCall.objects.filter(step__run=run).values_list("attempt", flat=True)) == \
        [1, 1, 1, 1]

    observed, passed = judged(run)

    assert passed is True
    assert observed == ("1 turn stored before the crash, reused; 5 turns in all; 4 tool calls, "
                        "each sent once; run completed")
