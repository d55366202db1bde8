"""A healthy subscriber is told of a run in the order things happened: the run started, each
step's outcome, then the run completed, not every status change first and the step outcomes
after the run's completion. Status changes and step outcomes are read along two cursors;
their deliveries are queued in the order they were written, a step's outcome before the
status change it led to (both written by one transaction). The receiver is a real HTTP
server."""

import json

import pytest

from api import webhook_cursors, webhooks
from api.models import WebhookSubscriber
from runs.execution import executor
from tests.factories import new_run
from tests.receiver import ScriptedReceiver

pytestmark = pytest.mark.django_db


class RecordingReceiver(ScriptedReceiver):
    """The scripted receiver, keeping each body as it arrived."""

    def __init__(self):
        super().__init__()
        self.bodies: list[dict] = []
        handler = self.server.RequestHandlerClass
        receiver = self

        def do_POST(request):
            body = request.rfile.read(int(request.headers["Content-Length"]))
            receiver.bodies.append(json.loads(body))
            request.send_response(204)
            request.send_header("Content-Length", "0")
            request.end_headers()

        handler.do_POST = do_POST


@pytest.fixture
def receiver():
    with RecordingReceiver() as r:
        yield r


def _told(body: dict) -> str:
    if body["type"] == "run.step_completed":
        return f"{body['step']['name']} {body['step']['outcome']}"
    return f"run {body['to']}"


def test_a_run_that_completed_in_one_pass_is_told_step_by_step(receiver, script):
    WebhookSubscriber.objects.create(name="crm", url=f"{receiver.url}/hooks", secret="k",
                                     **webhook_cursors.cursors_at_head())
    run = new_run()
    executor.advance_run(run.pk, worker="w1")

    report = webhooks.publish()

    assert (report.queued, report.delivered, report.failed) == (7, 7, 0)
    assert [_told(b) for b in receiver.bodies] == [
        "run queued", "run running", "fetch succeeded", "classify succeeded",
        "create-task succeeded", "post-ledger succeeded", "run completed"]
    assert [b["at"] for b in receiver.bodies] == sorted(b["at"] for b in receiver.bodies)


def test_two_runs_are_each_told_in_order(receiver, script):
    WebhookSubscriber.objects.create(name="crm", url=f"{receiver.url}/hooks", secret="k",
                                     **webhook_cursors.cursors_at_head())
    first, second = new_run(), new_run()
    executor.advance_run(second.pk, worker="w1")
    executor.advance_run(first.pk, worker="w1")

    webhooks.publish()

    for run in (first, second):
        told = [_told(b) for b in receiver.bodies if b["run"]["id"] == run.pk]
        assert told == ["run queued", "run running", "fetch succeeded", "classify succeeded",
                        "create-task succeeded", "post-ledger succeeded", "run completed"]
