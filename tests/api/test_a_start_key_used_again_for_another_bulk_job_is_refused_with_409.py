"""A start key names one start: sent with another action, reason, filters or step it is
refused (409 start_key_reused), never answered with the job it started as if that were
the new one, and nothing is started."""

import pytest

from approvals.models import BulkJob
from runs.models import RunStatus
from tests.api.test_a_bulk_start_sent_again_with_its_start_key_starts_one_job import (
    START,
    bearer_for_an_operator,
    start,
)
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("changed", [{"action": "resume"}, {"reason": "another reason"},
                                     {"filters": {"workflow": "test-orders"}}])
def test_a_key_sent_with_another_body_starts_nothing(client, changed):
    headers = bearer_for_an_operator()
    place(new_run(), status=RunStatus.ATTENTION)
    first = start(client, headers)
    assert first.status_code == 202, first.content

    again = start(client, headers, {**START, **changed})

    assert again.status_code == 409, again.content
    assert again.json()["error"] == "start_key_reused"
    assert str(first.json()["id"]) in again.json()["detail"]
    assert list(BulkJob.objects.values_list("pk", flat=True)) == [first.json()["id"]]
    job = BulkJob.objects.get()
    assert (job.action, job.reason) == ("terminate", "the tenant left")
