"""The batch that opens approval requests when its database connection dies mid-batch (the
server restarted, the session was terminated): one log line, the dead connection closed,
the batch stopped; the next pass opens every request left."""

import logging

import pytest
from django.db import connection

from approvals import requests
from approvals.models import ApprovalRequest
from runs.models import ApprovalWait
from tests.approvals.conftest import waiting_run
from tests.cancelled_statement import end_session

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_connection_killed_mid_batch_logs_one_line_and_the_next_pass_opens_the_rest(
        approvers, monkeypatch, caplog):
    runs = [waiting_run(amount=100 + i) for i in range(4)]
    assert ApprovalWait.objects.count() == 4
    real_open = requests.open_request
    killed = []

    def open_then_kill_the_session(*args, **kwargs):
        opened = real_open(*args, **kwargs)
        if not killed:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                (pid,) = cursor.fetchone()
            end_session(pid)
            killed.append(pid)
        return opened

    monkeypatch.setattr(requests, "open_request", open_then_kill_the_session)
    caplog.set_level(logging.INFO, logger="approvals")

    assert requests.open_pending_requests() == 1
    problems = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(problems) == 1, [r.getMessage() for r in problems]
    assert problems[0].exc_info is None and "connection lost after 1 opened" in \
        problems[0].getMessage()
    assert killed

    # The next pass, on a new connection, opens the three left, each once.
    caplog.clear()
    assert requests.open_pending_requests() == 3
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert sorted(ApprovalRequest.objects.values_list("run_id", flat=True)) == \
        sorted(run.pk for run in runs)
    assert requests.open_pending_requests() == 0
    assert ApprovalRequest.objects.count() == 4
