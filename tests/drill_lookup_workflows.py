"""A workflow whose lookup by key times out at first once its run has completed, for the
drill kit's test of what it makes of a lookup that fails (imported by worker processes
through RUNS_WORKFLOW_MODULES; the drill's own lookups are made in the test's process)."""

import httpx

from demo.clients import build_services
from runs.definitions.definition import Workflow
from runs.models import Run, RunStatus
from tests.drill_wait_workflows import LEDGER, find_in_the_ledger, post_to_the_ledger
from tests.workflows import OrderIn

# How many lookups of a completed run time out before one answers; the test sets it.
TIMEOUTS_AFTER_COMPLETION = {"count": 0}
# Lookups asked of each completed run, by run id.
asked_after_completion: dict[int, int] = {}

times_out = Workflow("test-drill-lookup-times-out", version=1, input=OrderIn,
                     services=build_services, example={"order": "drill"})
post = times_out.write("post", honours_key=True, system="the ledger",
                       contract=LEDGER)(post_to_the_ledger)


@post.reconcile
def find_post(ctx):
    if Run.objects.filter(pk=ctx.run_id, status=RunStatus.COMPLETED).exists():
        asked = asked_after_completion[ctx.run_id] = asked_after_completion.get(ctx.run_id, 0) + 1
        if asked <= TIMEOUTS_AFTER_COMPLETION["count"]:
            raise httpx.ReadTimeout("timed out")
    return find_in_the_ledger(ctx)
