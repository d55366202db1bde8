"""Every scrape counts the turns and tool calls of the open and recently finished runs
(durable_agent_turns, durable_agent_tokens, durable_agent_tool_calls). Joined to their steps
and runs in one query, PostgreSQL read every turn and call and looked up the run of each,
whatever the runs' states: 1 to 1.7 s a scrape at a million runs. The agent steps of those
runs are found along step_agent_idx (none of the other steps), their turns and calls along
the unique indexes that start with the step. Here runs finished long ago hold OTHERS agent
steps, turns and calls; the OPEN open runs one of each (and ten other steps): the repeat
scrape reads those of the open runs."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runs.models import AgentTurn, Run, RunStatus, Step, ToolCall
from tests.admin.scale import analyzed, bulk_runs, rows_read
from tests.api.test_metrics import scrape, value

pytestmark = pytest.mark.django_db

OTHERS = 1500
OPEN = 40
WF = "test-agent"


def agent_steps(runs, *, writes: int = 1) -> None:
    """For each run, `writes` write steps and an agent step with one turn and one tool
    call."""
    now = timezone.now()
    Step.objects.bulk_create(
        Step(run=run, name=f"write-{n}", position=n, kind="write", impact="write", version=1,
             status="succeeded", idempotency_key=f"w{run.pk}-{n}", updated_at=now)
        for run in runs for n in range(writes))
    steps = Step.objects.bulk_create(
        Step(run=run, name="triage", position=writes, kind="agent", impact="write", version=1,
             status="succeeded", idempotency_key=f"a{run.pk}", updated_at=now)
        for run in runs)
    AgentTurn.objects.bulk_create(
        AgentTurn(step=step, index=0, prompt_tokens=10, completion_tokens=2, created_at=now)
        for step in steps)
    ToolCall.objects.bulk_create(
        ToolCall(step=step, turn=0, index=0, call_id="c0", tool="post-ledger", args_hash="h",
                 idempotency_key=f"t{step.pk}", status="succeeded", updated_at=now)
        for step in steps)


def test_the_repeat_scrape_reads_the_open_runs_turns_and_calls_not_every_one(client):
    others = bulk_runs((f"other-{n}" for n in range(OTHERS)), workflow=WF)
    Run.objects.filter(pk__in=[r.pk for r in others]).update(
        updated_at=timezone.now() - timedelta(hours=2))
    agent_steps(others)
    agent_steps(bulk_runs((f"open-{n}" for n in range(OPEN)), workflow=WF,
                          status=RunStatus.WAITING),
                writes=10)
    analyzed("runs_run", "runs_step", "runs_agentturn", "runs_toolcall")

    assert value(scrape(client), "durable_agent_turns", workflow=WF) == OTHERS + OPEN  # recount
    with CaptureQueriesContext(connection) as ctx:
        samples = scrape(client)
    assert value(samples, "durable_agent_turns", workflow=WF) == OTHERS + OPEN
    assert value(samples, "durable_agent_tokens", workflow=WF, type="prompt") == \
        10 * (OTHERS + OPEN)
    assert value(samples, "durable_agent_tool_calls", workflow=WF, tool="(undeclared)",
                 status="succeeded") == OTHERS + OPEN
    selects = [q["sql"] for q in ctx.captured_queries if q["sql"].startswith("SELECT")]
    reads = {sql: rows_read(sql) for sql in selects
             if 'FROM "runs_agentturn"' in sql or 'FROM "runs_toolcall"' in sql}
    assert len(reads) >= 2
    # The open runs' turns and calls: not the 1,500 of each of the other runs.
    assert max(reads.values()) <= OPEN, reads
    # Their agent steps are found among the agent steps (an index of those alone), never
    # among every step (10 more a run here).
    steps = [sql for sql in selects if '"runs_step"."kind" = \'agent\'' in sql]
    assert len(steps) == 1, selects
    assert rows_read(steps[0], "runs_step") <= OTHERS + OPEN
    assert "step_agent_idx" in plan(steps[0]), plan(steps[0])


def plan(sql: str) -> str:
    with connection.cursor() as cursor:
        # On tiny tables a scan of everything is cheapest: ask for the big tables' plan.
        cursor.execute("SET enable_seqscan = off")
        try:
            cursor.execute("EXPLAIN " + sql)
            return "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("RESET enable_seqscan")
