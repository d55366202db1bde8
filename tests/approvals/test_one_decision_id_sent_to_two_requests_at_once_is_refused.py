"""One decision id sent with decisions on two requests at the same moment (a client that
reuses its id, two tabs of a page built from one cached form): the first to commit records
its decision; the other is refused as a reused decision id, with its sentence, and writes
nothing. It met the unique decision id in the database and raised an IntegrityError (a 500
page, a traceback) instead: the check that the id is unused reads only committed
decisions, so both passed it."""

import threading
import uuid

import pytest

from approvals import decisions
from approvals.models import ApprovalRequest, RequestStatus
from audit.models import AuditRecord
from tests.approvals.conftest import open_request, waiting_run
from tests.approvals.run_lock_order import blocked_on_a_lock, session

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_second_decision_with_the_same_id_is_refused_and_writes_nothing(approvers, ann,
                                                                          t0):
    first, second = (open_request(waiting_run(), t0) for _ in range(2))
    decision_id = uuid.uuid4()
    records = AuditRecord.objects.filter(run_id=second.run_id).count()
    # The first decision, recorded and not committed yet, in a session of its own.
    other = session()
    other.execute("UPDATE approvals_approvalrequest SET decision_id = %s WHERE id = %s",
                  [str(decision_id), first.pk])
    outcome = []

    def decide_second():
        from django.db import connection
        try:
            outcome.append(decisions.decide(second.pk, user=ann, approved=True,
                                            decision_id=decision_id))
        except Exception as exc:  # what the page would have shown as a 500
            outcome.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=decide_second)
    thread.start()
    try:
        assert blocked_on_a_lock(), "the second decision never met the first one's id"
    finally:
        other.commit()
        other.close()
        thread.join(timeout=30)

    (result,) = outcome
    assert isinstance(result, decisions.Decision), repr(result)
    assert result.outcome == decisions.DECISION_ID_REUSED
    assert f"already used for a decision on approval request {first.pk}" in result.message
    second.refresh_from_db()
    assert second.status == RequestStatus.PENDING and second.decision_id is None
    assert second.decided_at is None and second.settled_at is None
    assert AuditRecord.objects.filter(run_id=second.run_id).count() == records
    assert ApprovalRequest.objects.filter(decision_id=decision_id).get().pk == first.pk
