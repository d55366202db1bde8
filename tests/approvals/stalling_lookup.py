"""A workflow whose lookup by key stalls until the test lets it go: its reconcile function
waits for a PostgreSQL advisory lock (LOOKUP_LOCK) that the test holds, then answers that it
could not tell, naming the process that asked. Worker processes declare it through
tests.approvals.stalling_lookup_workflow (RUNS_EXTRA_WORKFLOW_MODULES); a test declares it
in its own process for its length only (declared(), then registry.unregister)."""

import os

from django.db import connection

from runs.definitions.definition import Contract, Undetermined, Workflow
from tests.workflows import OrderIn

NAME = "test-stalling-lookup"
STEP = "post-entry"
LOOKUP_LOCK = 7_340_021


def asked_by(pid: int) -> str:
    """What the lookup answers in process `pid`: the evidence its record keeps."""
    return f"the ledger did not answer process {pid}"


def declared() -> Workflow:
    flow = Workflow(NAME, version=1, input=OrderIn)

    @flow.write(STEP, honours_key=True,
                contract=Contract(evidence="entry id", rule="reconcile by key", owner="ops"))
    def post_entry(ctx):
        raise AssertionError("never sent: the tests place its outcome unknown")

    @post_entry.reconcile
    def find_entry(ctx):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [LOOKUP_LOCK])
            cursor.execute("SELECT pg_advisory_unlock(%s)", [LOOKUP_LOCK])
        return Undetermined(asked_by(os.getpid()))

    return flow
