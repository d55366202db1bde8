"""The agent metrics (durable_agent_turns, _tokens, _tool_calls) count the turns and calls of
the agent steps of the open runs at every scrape, and of the finished runs at each recount.
Found by joining the agent steps to the runs in one query, PostgreSQL read every open run at
every scrape (18,684 at a million runs, about 0.25 s) and every finished run at each recount
(about 1 s), whatever few of them have an agent step. Now a scrape reads the open runs of the
workflows that have agent steps (run_open_work_idx) and their agent steps (step_agent_idx);
a recount reads the agent steps and the run of each. Here many open and finished runs of a
workflow without an agent step sit beside a few runs with one: the rows read follow the
latter. An open run of a workflow no longer registered may hold agent steps: still counted."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from observability.metrics import recount_history
from runs.models import Run, RunStatus
from tests.admin.scale import analyzed, bulk_runs, rows_read
from tests.api.test_metrics import scrape, value
from tests.observability.test_a_scrape_counts_the_agent_turns_and_tool_calls_of_open_runs_along_an_index import (  # noqa: E501
    agent_steps,
)

pytestmark = pytest.mark.django_db

PLAIN = 2000  # open runs, and as many finished ones, of a workflow without an agent step
AGENT_OPEN = 30
AGENT_DONE = 200
WF = "test-agent"


def long_ago(runs) -> None:
    Run.objects.filter(pk__in=[r.pk for r in runs]).update(
        updated_at=timezone.now() - timedelta(hours=2))


RUNS_READ = 'SELECT "runs_run"."id" AS "id", "runs_run"."workflow_name" AS "workflow_name" '


def reads(client) -> dict[str, int]:
    """The rows of runs_run and runs_step that a scrape read to find the agent steps (a
    query naming the agent steps, or one of the runs' ids), summed over those queries."""
    with CaptureQueriesContext(connection) as ctx:
        scrape(client)
    finding = [q["sql"] for q in ctx.captured_queries
               if '"runs_step"."kind" = \'agent\'' in q["sql"] or q["sql"].startswith(RUNS_READ)]
    assert finding
    return {table: sum(rows_read(sql, table) for sql in finding)
            for table in ("runs_run", "runs_step")}


def test_a_scrape_and_a_recount_read_the_runs_with_agent_steps(client):
    bulk_runs((f"open-{n}" for n in range(PLAIN)), status=RunStatus.WAITING)
    long_ago(bulk_runs(f"done-{n}" for n in range(PLAIN)))
    agent_steps(bulk_runs((f"a-open-{n}" for n in range(AGENT_OPEN)), workflow=WF,
                          status=RunStatus.WAITING))
    done = bulk_runs((f"a-done-{n}" for n in range(AGENT_DONE)), workflow=WF)
    long_ago(done)
    agent_steps(done)
    agent_steps(bulk_runs(["gone-1"], workflow="test-unregistered", status=RunStatus.ATTENTION))
    analyzed("runs_run", "runs_step", "runs_agentturn", "runs_toolcall")

    samples = scrape(client)
    assert value(samples, "durable_agent_turns", workflow=WF) == AGENT_OPEN + AGENT_DONE
    assert value(samples, "durable_agent_tool_calls", workflow=WF, tool="(undeclared)",
                 status="succeeded") == AGENT_OPEN + AGENT_DONE
    assert value(samples, "durable_agent_turns", workflow="test-unregistered") == 1

    scraped = reads(client)
    # The open runs with agent steps and their agent steps, not the PLAIN other open runs.
    assert scraped["runs_run"] <= AGENT_OPEN + 1, scraped
    assert scraped["runs_step"] <= AGENT_OPEN + 1, scraped

    recount_history()
    recounted = reads(client)
    # Every agent step and its run (and the scrape's part), not the PLAIN finished runs.
    agents = AGENT_OPEN + AGENT_DONE + 1
    assert recounted["runs_run"] <= agents + AGENT_OPEN + 1, recounted
    assert recounted["runs_step"] <= agents + AGENT_OPEN + 1, recounted
