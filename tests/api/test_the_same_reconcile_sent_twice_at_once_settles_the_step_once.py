"""A reconcile recording "it did not happen" sent twice at the same instant over the API (a
client's retry, or two operators who read the same unknown step): the first settles the
step as not done; the second finds it failed already and is refused with 409 saying so, and
the run's chain holds one record of the settlement. Before, a failed step passed the
reconcile's check under the lock as well as an unknown one did, so both were recorded."""

import threading

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db import connection
from django.test import Client

from api.tokens import token_create
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import AttentionReason, RunStatus, Step, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def tokens(db):
    """The bearer headers of two operators' tokens for test-orders."""
    ensure_roles(Group, Permission)
    headers = []
    for name in ("olga", "carl"):
        user = User.objects.create_user(name)
        user.groups.add(Group.objects.get(name="operators"))
        _, plaintext = token_create(name=f"{name}-erp", workflows=["test-orders"],
                                    acting_user=user)
        headers.append({"HTTP_AUTHORIZATION": f"Bearer {plaintext}"})
    return headers


def _unknown_write():
    return place(new_run(), status=RunStatus.ATTENTION,
                 attention_reason=AttentionReason.UNKNOWN_OUTCOME,
                 step_statuses={"fetch": StepStatus.SUCCEEDED,
                                "classify": StepStatus.SUCCEEDED,
                                "create-task": StepStatus.UNKNOWN})


def _at_once(run, headers: list[dict]) -> list:
    """POST the same not-found reconcile with each header, every request released at once,
    each from its own thread (and so its own database connection)."""
    barrier, answers = threading.Barrier(len(headers)), []

    def send(header):
        try:
            client = Client()
            barrier.wait()
            answers.append(client.post(
                f"/api/runs/{run.pk}/actions/reconcile",
                {"reason": "checked the tracker", "step": "create-task", "mode": "not_found",
                 "evidence": "no task under the key in the tracker"},
                content_type="application/json", **header))
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(h,)) for h in headers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return answers


@pytest.mark.parametrize("who", ["one client sending twice", "two operators"])
def test_one_settlement_is_recorded_and_the_other_is_refused_saying_why(tokens, who):
    run = _unknown_write()
    headers = [tokens[0], tokens[0]] if who == "one client sending twice" else tokens
    answers = _at_once(run, headers)

    assert sorted(a.status_code for a in answers) == [200, 409], [a.content for a in answers]
    refused = next(a for a in answers if a.status_code == 409).json()
    assert refused["error"] == "refused"
    assert "create-task" in refused["detail"]
    assert "already settled as not done" in refused["detail"]
    assert AuditRecord.objects.filter(run_id=run.pk, action="reconciled").count() == 1
    step = Step.objects.get(run=run, name="create-task")
    assert step.status == StepStatus.FAILED
    run.refresh_from_db()
    # Left where the next action (Retry step) takes it on.
    assert run.status == RunStatus.ATTENTION
