"""POST /api/bulk refuses a reason no record may keep, and a step no version of the workflow
declares, as a run action refuses them: 422 with `errors` naming the field, and no job
recorded (a job with an unknown step would be refused on every one of its runs)."""

import pytest

from approvals.models import BulkJob
from runs.models import RunStatus
from tests.api.test_a_bulk_start_sent_again_with_its_start_key_starts_one_job import (
    bearer_for_an_operator,
    start,
)
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("body", "field"), [
    ({"action": "terminate", "reason": "   "}, "reason"),
    ({"action": "terminate", "reason": "tenant \u202eleft"}, "reason"),
    ({"action": "retry_step", "reason": "tracker back", "step": "no-such-step"}, "step"),
])
def test_the_field_is_named_and_no_job_is_recorded(client, body, field):
    headers = bearer_for_an_operator()
    place(new_run(), status=RunStatus.ATTENTION)

    response = start(client, headers, {**body, "filters": {"workflow": "test-orders"}})

    assert response.status_code == 422, response.content
    assert response.json()["error"] == "invalid_request"
    assert [e["loc"] for e in response.json()["errors"]] == [[field]]
    assert not BulkJob.objects.exists()


def test_a_step_the_workflow_declares_still_starts_the_job(client):
    headers = bearer_for_an_operator()
    place(new_run(), status=RunStatus.ATTENTION)

    response = start(client, headers, {"action": "retry_step", "reason": "tracker back",
                                       "step": "create-task",
                                       "filters": {"workflow": "test-orders"}})

    assert response.status_code == 202, response.content
    assert BulkJob.objects.get().params == {"step": "create-task"}
