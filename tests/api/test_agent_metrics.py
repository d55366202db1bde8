"""The agent metrics: turns, tokens and tool calls (by tool and state) per workflow, counted
like the finished runs: the turns and calls of runs finished long ago once per recount, those
of open and recently finished runs at every scrape."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from observability.metrics import recount_history
from runs.models import Run, RunStatus
from tests.api.test_metrics import scrape, value
from tests.console.test_agent_conversation_page import agent_run

pytestmark = pytest.mark.django_db(transaction=True)
WF = "invoice-triage"


def finished_long_ago(run):
    long_ago = timezone.now() - timedelta(hours=2)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.COMPLETED, updated_at=long_ago,
                                         finished_at=long_ago)


def test_turns_tokens_and_tool_calls_by_tool_and_state_per_workflow(client):
    agent_run(3, note="open")  # open (queued): 3 turns of 100..102 + 7 tokens
    samples = scrape(client)
    assert value(samples, "durable_agent_turns", workflow=WF) == 3
    assert value(samples, "durable_agent_tokens", workflow=WF, type="prompt") == 303
    assert value(samples, "durable_agent_tokens", workflow=WF, type="completion") == 21
    assert value(samples, "durable_agent_tool_calls", workflow=WF, tool="post-ledger",
                 status="succeeded") == 3
    # The states a person acts on have a series for each declared tool, zeros included.
    assert ("durable_agent_tool_calls", frozenset({"workflow": WF, "tool": "open-approval-task",
                                                   "status": "unknown"}.items())) in samples


def test_old_finished_runs_are_counted_once_then_only_open_and_recent_ones(client, settings):
    settings.METRICS_FINISHED_RECOUNT_SECONDS = 600
    old = agent_run(4, note="old")
    finished_long_ago(old)
    assert value(scrape(client), "durable_agent_turns", workflow=WF) == 4
    # A run that finished long ago is not read again until the next recount ...
    finished_long_ago(agent_run(2, note="old2"))
    assert value(scrape(client), "durable_agent_turns", workflow=WF) == 4
    # ... while an open run's turns are counted at once.
    agent_run(1, note="new")
    with CaptureQueriesContext(connection) as ctx:
        samples = scrape(client)
    assert value(samples, "durable_agent_turns", workflow=WF) == 5
    assert value(samples, "durable_agent_tool_calls", workflow=WF, tool="post-ledger",
                 status="succeeded") == 5
    # The agent steps of the open and recently finished runs (found first), then their turns
    # and calls.
    agent_sql = [q["sql"] for q in ctx.captured_queries
                 if re.search(r'FROM "runs_(agentturn|toolcall)"', q["sql"])]
    assert len(agent_sql) == 2
    steps_sql = [q["sql"] for q in ctx.captured_queries
                 if '"runs_step"."kind" = \'agent\'' in q["sql"]]
    assert len(steps_sql) == 1 and '"runs_step"."run_id" IN' in steps_sql[0], steps_sql
    recount_history()
    assert value(scrape(client), "durable_agent_turns", workflow=WF) == 7
