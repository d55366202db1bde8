"""POST /api/bulk without a start key, whose connection is cut as the job's COMMIT is under
way, is answered as PostgreSQL says afterwards (runs.execution.lost_commit): told "it was
done" (`done_answer_lost`, no Retry-After) when the server committed and its answer was lost,
so that the client does not start a second job on the same runs; told "it was not done; try
again" when the COMMIT never reached the server, and no job exists until it is sent again."""

import pytest
from django.db import connection

from approvals.models import BulkJob
from runs.models import RunStatus
from tests import cuttable_proxy
from tests.api.test_a_bulk_start_sent_again_with_its_start_key_starts_one_job import (
    START,
    bearer_for_an_operator,
    start,
)
from tests.factories import new_run, place

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_broker")]
WITHOUT_A_KEY = {k: v for k, v in START.items() if k != "start_key"}


@pytest.mark.parametrize("reaches_server", [True, False], ids=["answer lost", "commit lost"])
def test_a_bulk_start_whose_commit_lost_its_link_is_told_as_the_database_answers(
        client, reaches_server):
    headers = bearer_for_an_operator()
    client.raise_request_exception = False
    place(new_run(), status=RunStatus.ATTENTION)
    with cuttable_proxy.database_behind_a_cuttable_link() as proxy:
        proxy.lose_next_commit(reaches_server=reaches_server)
        response = start(client, headers, WITHOUT_A_KEY)
        assert proxy.commits_lost == ["answered" if reaches_server else "sent"]
    connection.close()
    assert response.status_code == 503, response.content
    body = response.json()
    assert "may have been done" not in body["detail"]
    if reaches_server:
        assert body["error"] == "done_answer_lost" and "Retry-After" not in response
        assert "the database says it committed it: it was done" in body["detail"]
        assert BulkJob.objects.count() == 1
        return
    assert body["error"] == "database_unavailable" and response["Retry-After"] == "30"
    assert "the database says it did not commit it: it was not done; try again" in \
        body["detail"]
    assert BulkJob.objects.count() == 0
    again = start(client, headers, WITHOUT_A_KEY)
    assert again.status_code == 202, again.content
    assert BulkJob.objects.count() == 1
