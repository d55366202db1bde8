"""A search of the tool calls' or the agent turns' admin list reads the rows of the runs it
found, along the table's unique index (which leads with the step), never the whole table.
Through a join to the steps of the runs found, PostgreSQL expected a share of the steps and
rows on each of them, and read the whole table of tool calls (or turns) to match it against
the steps: here 20,200 rows for the 200 of a search's thousand runs, and a million on a table
of a million. The plans are PostgreSQL's after ANALYZE, the table scan out of its choices
(tests.admin.scale)."""


import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.admin import SEARCH_CAP
from runs.models import AgentTurn, ToolCall

from .scale import analyzed, bulk_runs, rows_read
from .test_admin_lists import admin_client  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db

# Runs the search finds (old ones), and how many of them have an agent's rows; newer runs
# the search does not find, each with an agent step and its rows.
FOUND, FOUND_WITH_ROWS, OTHERS = SEARCH_CAP, 100, 10_000
ROWS_PER_STEP = 2

# A step per position, the first an agent's; every NOT NULL column given.
STEPS = """INSERT INTO runs_step (run_id, name, position, kind, impact, version, status,
 idempotency_key, generation, attempt, budget_attempt_base, format_failures, intended_action,
 lookup_failures, approved_attempt, compensation_key, compensation_attempt, compensation_ref,
 remote_ref, error_class, error_message, lease_owner, updated_at)
 SELECT r.id, 'step-' || p, p, CASE WHEN p = 1 THEN 'agent' ELSE 'write' END, 'low', 1,
 'succeeded', md5(r.id || '-' || p), 0, 1, 0, 0, '', 0, 0, '', 0, '', '', '', '', '', now()
 FROM runs_run r, generate_series(1, 3) p"""

AGENT_STEPS = """FROM runs_step s JOIN runs_run r ON r.id = s.run_id,
 generate_series(1, %s) i WHERE s.kind = 'agent' AND r.business_key = ANY(%s)"""

TOOL_CALLS = """INSERT INTO runs_toolcall (step_id, generation, turn, index, call_id, tool,
 kind, impact, args_hash, status, idempotency_key, compensation_key, key_open_for_repeat,
 attempt, lookup_failures, compensation_attempt, approved_hash, approved_by, remote_ref,
 compensation_ref, error_class, error_message, updated_at)
 SELECT s.id, 0, 0, i, 'call', 'tool', '', '', 'h', 'succeeded', md5(s.id || 'k' || i), '',
 false, 1, 0, 0, '', '', '', '', '', '', now() """ + AGENT_STEPS

AGENT_TURNS = """INSERT INTO runs_agentturn (step_id, generation, index, content, tool_calls,
 finish_reason, model_ref, prompt_tokens, completion_tokens, summarises, created_at)
 SELECT s.id, 0, i, '', '[]', 'stop', 'model', 1, 1, 0, now() """ + AGENT_STEPS


@pytest.fixture
def agent_rows():
    """FOUND old runs "inv-2019-<n>", FOUND_WITH_ROWS of them with ROWS_PER_STEP tool calls
    and agent turns, then OTHERS newer runs with as many each."""
    found = [f"inv-2019-{n}" for n in range(FOUND)]
    others = [f"inv-2026-x{n}" for n in range(OTHERS)]
    bulk_runs(found)
    bulk_runs(others)
    with connection.cursor() as cursor:
        cursor.execute(STEPS)
        for keys in (found[:FOUND_WITH_ROWS], others):
            cursor.execute(TOOL_CALLS, [ROWS_PER_STEP, keys])
            cursor.execute(AGENT_TURNS, [ROWS_PER_STEP, keys])
    analyzed("runs_run", "runs_step", "runs_toolcall", "runs_agentturn")


@pytest.mark.parametrize("model", [ToolCall, AgentTurn], ids=["tool calls", "agent turns"])
def test_a_search_of_a_thousand_runs_reads_their_rows_not_the_table(admin_client,  # noqa: F811
                                                                     agent_rows, model):
    table = model._meta.db_table
    with CaptureQueriesContext(connection) as sent:
        page = admin_client.get(f"/admin/runs/{model._meta.model_name}/?q=inv-2019-")
    assert page.status_code == 200

    listed = page.context["cl"].result_list
    assert len(listed) == 50
    assert {row.step.run.business_key for row in listed} <= {
        f"inv-2019-{n}" for n in range(FOUND_WITH_ROWS)}
    reads = {q["sql"]: rows_read(q["sql"], table) for q in sent.captured_queries
             if q["sql"].startswith("SELECT") and f'FROM "{table}"' in q["sql"]}
    assert reads
    # The found runs' rows, each along its step's index; never the newer runs' 20,000.
    found_rows = FOUND_WITH_ROWS * ROWS_PER_STEP
    assert all(count <= found_rows for count in reads.values()), reads


def test_a_search_for_a_tool_calls_key_lists_that_call(admin_client):  # noqa: F811
    bulk_runs(["inv-2019-0", "inv-2019-1"])
    with connection.cursor() as cursor:
        cursor.execute(STEPS)
        cursor.execute(TOOL_CALLS, [ROWS_PER_STEP, ["inv-2019-0", "inv-2019-1"]])
    call = ToolCall.objects.select_related("step__run").order_by("pk").last()

    page = admin_client.get("/admin/runs/toolcall/", {"q": call.idempotency_key})

    assert page.status_code == 200
    listed = page.context["cl"].result_list
    assert call in listed
    assert {row.step.run_id for row in listed} == {call.step.run_id}
