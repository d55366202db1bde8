"""The drill kit approves what its runs wait for as its own account, "drill", which nobody
signs in with. A person whose account bears that name (one made by an admin, with a
password) was granted the decide permission on the drill's requests and recorded as having
approved them: the run's audit trail named a person who never saw what was approved. Such
an account is refused, with nothing opened, granted or decided."""

import pytest
from django.contrib.auth.models import User
from guardian.shortcuts import get_perms

from approvals.drill import approve_for_drill
from approvals.models import ApprovalRequest, RequestStatus
from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.approvals.conftest import open_request, waiting_run

pytestmark = pytest.mark.django_db


def _drill_run():
    run = waiting_run()
    Run.objects.filter(pk=run.pk).update(drill=True)  # as the drill kit starts its runs
    run.refresh_from_db()
    return run


@pytest.mark.parametrize("rights", [{"password": "a person's"},
                                    {"is_staff": True}, {"is_superuser": True}])
def test_an_account_named_drill_that_a_person_uses_is_never_the_drills_approver(
        approvers, rights):
    person = User.objects.create_user("drill", email="drill@example.com",
                                      password=rights.get("password"))
    User.objects.filter(pk=person.pk).update(is_staff=rights.get("is_staff", False),
                                             is_superuser=rights.get("is_superuser", False))
    run = _drill_run()
    request = open_request(run)  # as the sweeper opens it
    records = AuditRecord.objects.filter(run=run).count()

    with pytest.raises(ValueError, match=r"the account 'drill' .* is a person's"):
        approve_for_drill(run)

    run.refresh_from_db()
    assert run.status == RunStatus.WAITING
    request.refresh_from_db()
    assert request.status == RequestStatus.PENDING and request.decided_by is None
    assert not AuditRecord.objects.filter(run=run, actor_user_id=person.pk).exists()
    assert AuditRecord.objects.filter(run=run).count() == records
    assert get_perms(person, request) == []


def test_the_drills_own_account_still_approves(approvers):
    run = _drill_run()
    assert approve_for_drill(run) is True
    approver = ApprovalRequest.objects.get(run=run).decided_by
    assert approver.username == "drill" and not approver.has_usable_password()
    # Made once, and taken again as its own on the next drill.
    assert approve_for_drill(_drill_run()) is True
    assert User.objects.filter(username="drill").count() == 1
