"""The advice on a run whose lookup found nothing too soon (its receiver ignores keys, so a
request in flight may still land) says to look again after the time the machine will trust
"not found", judged by the database's clock: drawn on a host ten minutes ahead it does not
say "look it up now" while the transition that records the lookup would still answer "not
found yet"."""

from datetime import timedelta

import pytest

from audit.chain import Actor
from runs import store
from runs.execution import executor
from runs.machine.errors import UnknownOutcome
from runs.models import RunStatus, Step, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from tests.factories import new_run, step
from tests.processes import manage

pytestmark = pytest.mark.django_db(transaction=True)
OLGA = Actor(kind="user", label="olga")
ASK = ActionInput(reason="look the posting up by its key", step="post-ledger", mode="ask")
ADVICE = ("import os; from runs.models import Run, Step; "
          "from runs.operator.guidance import recommend; "
          "run = Run.objects.get(pk=int(os.environ['RUN'])); "
          "advice = recommend(run, list(Step.objects.filter(run=run).order_by('position'))); "
          "print('ADVICE', advice.meant, advice.why)")


def test_a_host_ten_minutes_ahead_advises_looking_again_after_the_trusted_time(script):
    script.plan["post-ledger"] = [UnknownOutcome("timed out after sending")]
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    ACTIONS["reconcile"].perform(run.pk, actor=OLGA, given=ASK)
    # "Not found" is trusted five minutes from now by the database's clock.
    trusted_from = store.current().now() + timedelta(minutes=5)
    Step.objects.filter(run=run, name="post-ledger").update(next_attempt_at=trusted_from)

    process = manage("shell", "-c", ADVICE, RUN=run.pk, RUNS_TEST_CLOCK_OFFSET_SECONDS=600)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    advice = out[out.index("ADVICE "):]

    assert advice.startswith("ADVICE reconcile ")
    assert f"again after {trusted_from:%Y-%m-%d %H:%M:%S}" in advice
    assert "up by its key now" not in advice
    assert step(run, "post-ledger").status == StepStatus.UNKNOWN
