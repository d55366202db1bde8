"""A person's change whose COMMIT answer is lost, and which the database says it committed
(runs.execution.lost_commit), runs what was to follow its commit: Django drops a
transaction's on_commit hooks with the COMMIT's error, so a resumed run's wake-up hint never
went out (the run waited for the sweeper's requeue) and a bulk job was never handed over.
Now the hooks run once, when the database says it was done; never when it says it was not,
and never twice. The link to PostgreSQL runs through the test's TCP forwarder, which cuts it
as the server answers the COMMIT."""

import json

import pytest
from celery.signals import before_task_publish

from api.tokens import token_create
from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests import cuttable_proxy

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]


@pytest.fixture
def database_behind_a_cuttable_link():
    with cuttable_proxy.database_behind_a_cuttable_link() as proxy:
        yield proxy


@pytest.fixture
def hints():
    sent = []

    def count(sender=None, body=None, headers=None, **kwargs):
        sent.append(int(headers["argsrepr"].strip("(),")))

    before_task_publish.connect(count, weak=False)
    yield sent
    before_task_publish.disconnect(count)


def _resume(client, run, plaintext):
    client.raise_request_exception = False
    return client.post(f"/api/runs/{run.pk}/actions/resume",
                       json.dumps({"reason": "fixed the tracker"}),
                       content_type="application/json",
                       HTTP_AUTHORIZATION=f"Bearer {plaintext}")


@pytest.mark.parametrize("reaches_server", [True, False])
def test_a_resume_whose_commit_answer_is_lost_sends_its_hint_once_if_it_was_done(
        reaches_server, operator, stuck_run, client, hints, database_behind_a_cuttable_link):
    proxy = database_behind_a_cuttable_link
    _, plaintext = token_create(name="erp", workflows=["test-orders"], acting_user=operator)
    # Used once before: its last-used stamp is not the COMMIT that loses its answer.
    assert client.get(f"/api/runs/{stuck_run.pk}",
                      HTTP_AUTHORIZATION=f"Bearer {plaintext}").status_code == 200
    proxy.lose_next_commit(reaches_server=reaches_server, stay_cut=False)
    response = _resume(client, stuck_run, plaintext)
    proxy.restore()
    assert response.status_code == 503, response.content
    resumed = AuditRecord.objects.filter(run=stuck_run, action="resumed").count()
    if reaches_server:
        assert response.json()["error"] == "done_answer_lost"
        assert resumed == 1
        assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.QUEUED
        assert hints == [stuck_run.pk]
    else:
        assert resumed == 0
        assert hints == []
