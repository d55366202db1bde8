"""One builder of a step's context, for the executor, an operator's lookup, approval
snapshots and undo previews: it closes the clients it opens, every time."""

import pytest

from audit.chain import Actor
from runs.definitions import definition
from runs.definitions.definition import Found, Workflow
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import UnknownOutcome
from runs.models import Run, RunStatus
from runs.operator.reconciliation import reconcile_step
from tests.workflows import OrderIn

pytestmark = pytest.mark.django_db


class Clients:
    opened = closed = 0

    def __init__(self):
        Clients.opened += 1

    def close(self):
        Clients.closed += 1


@pytest.fixture
def counted():
    workflow = Workflow("test-counted-clients", version=1, input=OrderIn, services=Clients)

    @workflow.write("post", impact="high")
    def post(ctx):
        raise UnknownOutcome("timeout after send")

    @post.reconcile
    def find(ctx):
        return Found("P-1")

    Clients.opened = Clients.closed = 0
    yield workflow
    definition.registry.unregister(workflow)


def test_every_context_closes_the_clients_it_opened(counted):
    run, _ = transitions.start_run(workflow="test-counted-clients", business_key="k-1",
                                   input={"order": "o"}, actor=Actor.system("test"))
    executor.advance_run(run.pk, worker="w1")  # sends, unknown, looks up: found, completes
    assert Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED
    assert Clients.opened >= 1 and Clients.closed == Clients.opened

    other, _ = transitions.start_run(workflow="test-counted-clients", business_key="k-2",
                                     input={"order": "o"}, actor=Actor.system("test"))
    Run.objects.filter(pk=other.pk).update(status=RunStatus.ATTENTION)
    other.steps.filter(name="post").update(status="unknown")
    before = Clients.opened
    reconcile_step(other.pk, step_name="post", actor=Actor.system("ops"), reason="check")
    assert Clients.opened == before + 1 and Clients.closed == Clients.opened
