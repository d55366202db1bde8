"""GET /api/runs/{id}: every run status maps to one state of the API's finite model, with
the current step (n of m), what a waiting run waits for, the attention reason, the last
error class and the links."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.execution import executor
from runs.machine.errors import PermanentError
from runs.models import RunStatus, Step
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def _state(client, run):
    response = client.get(f"/api/runs/{run.pk}")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def client_all(client, make_token):
    _, plaintext = make_token("reader", workflows=["test-orders", "test-approval"])
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {plaintext}"
    return client


@pytest.mark.parametrize(("status", "state", "final"), [
    (RunStatus.QUEUED, "accepted", False),
    (RunStatus.RUNNING, "running", False),
    (RunStatus.WAITING, "waiting", False),
    (RunStatus.ATTENTION, "needs_attention", False),
    (RunStatus.COMPENSATING, "compensating", False),
    (RunStatus.COMPLETED, "completed", True),
    (RunStatus.COMPENSATED, "compensated", True),
    (RunStatus.COMPENSATION_FAILED, "compensation_failed", False),
    (RunStatus.TERMINATED, "terminated", True),
])
def test_every_run_status_has_one_state(client_all, status, state, final):
    run = place(new_run(), status=status)
    body = _state(client_all, run)
    assert (body["state"], body["final"]) == (state, final)


def test_every_run_status_is_mapped():
    from api.schemas import State
    from api.selectors import STATE_OF_STATUS

    assert set(STATE_OF_STATUS) == set(RunStatus)
    assert set(STATE_OF_STATUS.values()) == set(State.__args__)


def test_a_new_run_is_accepted_before_its_first_step(client_all):
    run = new_run()
    body = _state(client_all, run)
    assert body["state"] == "accepted" and body["step_count"] == 4
    assert body["current_step"]["name"] == "fetch" and body["current_step"]["number"] == 1
    assert body["status_url"].endswith(f"/api/runs/{run.pk}")
    assert body["console_url"].endswith(f"/runs/{run.pk}/")


def test_a_running_run_says_which_step_of_how_many(client_all):
    run = place(new_run(), status=RunStatus.RUNNING, current_step="create-task", steps_done=2,
                step_statuses={"fetch": "succeeded", "classify": "succeeded",
                               "create-task": "running"})
    body = _state(client_all, run)
    assert body["state"] == "running" and body["steps_done"] == 2
    assert body["current_step"]["number"] == 3 and body["current_step"]["status"] == "running"
    assert body["description"] == "running step 3 of 4 (create-task)"


def test_a_waiting_run_says_it_waits_to_retry_and_until_when(client_all):
    due = timezone.now() + timedelta(seconds=30)
    run = place(new_run(), status=RunStatus.WAITING, current_step="fetch", next_wake_at=due,
                step_statuses={"fetch": "scheduled"})
    Step.objects.filter(run=run, name="fetch").update(next_attempt_at=due)
    body = _state(client_all, run)
    assert (body["state"], body["waiting_for"]) == ("waiting", "retry")
    assert body["current_step"]["next_attempt_at"] is not None
    assert body["description"].startswith("waiting to retry step 1 of 4")


def test_a_waiting_run_says_it_waits_for_approval(client_all):
    run = place(new_run("test-approval", order="o"), status=RunStatus.WAITING,
                current_step="approve", step_statuses={"prepare": "succeeded",
                                                       "approve": "waiting"})
    body = _state(client_all, run)
    assert (body["state"], body["waiting_for"]) == ("waiting", "approval")
    assert body["description"] == "waiting for approval at step 2 of 3 (approve)"


@pytest.mark.parametrize("reason", ["unknown_outcome", "permanent_error", "budget_exhausted",
                                    "approval_timed_out", "definition_missing", "reopened"])
def test_a_run_in_attention_says_why(client_all, reason):
    run = place(new_run(), status=RunStatus.ATTENTION, attention_reason=reason,
                status_message="the message")
    body = _state(client_all, run)
    assert (body["state"], body["attention_reason"]) == ("needs_attention", reason)
    assert body["message"] == "the message" and body["waiting_for"] is None


def test_a_failed_compensation_carries_its_reason(client_all):
    run = place(new_run(), status=RunStatus.COMPENSATION_FAILED,
                attention_reason="compensation_failed", current_step="create-task")
    body = _state(client_all, run)
    assert (body["state"], body["attention_reason"]) == ("compensation_failed",
                                                         "compensation_failed")


def test_the_last_error_class_of_a_real_failure(client_all, script):
    script.plan["create-task"] = [PermanentError("403 from the tracker")]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    body = _state(client_all, run)
    assert body["state"] == "needs_attention"
    assert body["attention_reason"] == "permanent_error"
    assert body["last_error"] == {"error_class": "permanent", "step": "create-task"}
    assert body["current_step"]["name"] == "create-task"


def test_a_completed_run_has_no_current_step(client_all):
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == "completed"
    body = _state(client_all, run)
    assert body["state"] == "completed" and body["final"] is True
    assert body["current_step"] is None and body["steps_done"] == 4
    assert body["finished_at"] is not None and body["last_error"] is None
    assert body["description"] == "completed all 4 steps"


@pytest.mark.parametrize("path", ["/api/runs/0", "/api/runs/99999999",
                                  "/api/runs/99999999999999999999", "/api/runs/abc"])
def test_missing_or_malformed_run_ids_are_404_or_422(client_all, path):
    assert client_all.get(path).status_code in (404, 422)
