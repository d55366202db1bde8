"""POST /api/bulk refuses a reason that fits a person's text alone but not once each run's
record adds the job's mark (" [bulk job N]") as it refuses every other bad reason: 422 with
`errors` naming `reason`, and no job left behind (the job made to learn its number is rolled
back with the refusal)."""

import pytest

from approvals.models import BulkJob, BulkOutcome
from runs.machine.storable import PERSON_TEXT_MAX
from runs.models import RunStatus
from tests.api.test_a_bulk_start_sent_again_with_its_start_key_starts_one_job import (
    bearer_for_an_operator,
    start,
)
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def test_the_reason_is_named_and_no_job_is_recorded(client):
    headers = bearer_for_an_operator()
    place(new_run(), status=RunStatus.ATTENTION)

    response = start(client, headers, {"action": "terminate",
                                       "reason": "x" * (PERSON_TEXT_MAX - 5),
                                       "filters": {"workflow": "test-orders"}})

    assert response.status_code == 422, response.content
    body = response.json()
    assert body["error"] == "invalid_request"
    assert [e["loc"] for e in body["errors"]] == [["reason"]]
    assert "bulk job" in body["errors"][0]["msg"]
    assert not BulkJob.objects.exists()
    assert not BulkOutcome.objects.exists()


def test_a_reason_leaving_room_for_the_mark_starts_the_job(client):
    headers = bearer_for_an_operator()
    place(new_run(), status=RunStatus.ATTENTION)

    response = start(client, headers, {"action": "terminate",
                                       "reason": "x" * (PERSON_TEXT_MAX - 16),
                                       "filters": {"workflow": "test-orders"}})

    assert response.status_code == 202, response.content
    assert BulkJob.objects.count() == 1
