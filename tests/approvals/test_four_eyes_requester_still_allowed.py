"""An approved four-eyes action is taken in the asking person's name only while they still
may take it: a person whose permission or account was taken away after they asked has
nothing done in their name by the second person's approval. The decision stays recorded,
with why it was not applied."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals import decisions, four_eyes
from approvals.bulk import bulk_progress, run_bulk_job, start_bulk_job
from approvals.models import ApprovalRequest, RequestStatus
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.execution import executor
from runs.models import Run, RunStatus
from runs.reads.selectors import RunFilters
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def roles(db):
    ensure_roles(Group, Permission)


@pytest.fixture
def stopped_run(script):
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    return place(run, status=RunStatus.ATTENTION)


def person(name):
    user = User.objects.create_user(name, email=f"{name}@example.com", password="pw")
    user.groups.add(Group.objects.get(name="operators"))
    return user


def _approve(request, by):
    return decisions.decide(request.pk, user=by, approved=True, comment="agreed",
                            decision_id=uuid.uuid4())


def _terminate_request(run, olga):
    request, _ = four_eyes.request_operator_action(run, action="terminate",
                                                   requested_by=olga, reason="duplicate")
    return request


def test_an_approval_does_not_act_for_a_person_who_lost_the_permission_since_asking(
        stopped_run):
    olga, omar = person("olga"), person("omar")
    request = _terminate_request(stopped_run, olga)
    olga.groups.clear()
    result = _approve(request, omar)
    assert result.recorded  # omar's decision is kept...
    request.refresh_from_db()
    assert request.status == RequestStatus.APPROVED and request.settled_at is not None
    assert "olga may no longer terminate run" in request.apply_error
    # ...and nothing was done in olga's name.
    assert Run.objects.get(pk=stopped_run.pk).status == RunStatus.ATTENTION
    assert not AuditRecord.objects.filter(run=stopped_run, action="terminated").exists()
    assert "may no longer" in result.message


def test_a_request_of_a_person_whose_account_was_deactivated_since_is_withdrawn(
        stopped_run):
    """No decision is recorded of what could be taken in nobody's name: the request is no
    longer awaited (approvals.withdrawal.no_longer_awaited), and is withdrawn instead."""
    olga, omar = person("olga"), person("omar")
    request = _terminate_request(stopped_run, olga)
    olga.is_active = False
    olga.save()
    result = _approve(request, omar)
    assert not result.recorded
    request.refresh_from_db()
    assert request.status == RequestStatus.WITHDRAWN and request.decided_by_id is None
    assert "their account is no longer active" in request.comment
    assert Run.objects.get(pk=stopped_run.pk).status == RunStatus.ATTENTION
    assert not AuditRecord.objects.filter(run=stopped_run, action="terminated").exists()


def test_while_the_person_may_still_act_the_approval_acts_for_them(stopped_run):
    olga, omar = person("olga"), person("omar")
    _approve(_terminate_request(stopped_run, olga), omar)
    assert Run.objects.get(pk=stopped_run.pk).status == RunStatus.TERMINATED
    record = AuditRecord.objects.get(run=stopped_run, action="terminated")
    assert record.actor_label == "olga" and record.data["approved_by"] == "omar"


def test_a_bulk_jobs_runs_are_not_acted_on_for_a_person_who_lost_the_right(stopped_run):
    olga, omar = person("olga"), person("omar")
    job = run_bulk_job(start_bulk_job("terminate", RunFilters(status="attention"), user=olga,
                                      reason="duplicates")[0].pk)
    request = ApprovalRequest.objects.get(pk=job.approval_id)
    olga.groups.clear()
    _approve(request, omar)
    run_bulk_job(job.pk)  # the job's worker applies the approval
    assert Run.objects.get(pk=stopped_run.pk).status == RunStatus.ATTENTION
    assert bulk_progress(job.pk).counts == {"forbidden": 1}
    assert not AuditRecord.objects.filter(run=stopped_run, action="terminated").exists()


def test_an_approval_never_applies_to_effects_its_approver_was_not_shown(stopped_run):
    """What may have happened changed while the request waited (the payment whose outcome
    was unknown turned out to have been made): the request is replaced by one that shows
    it, and nothing is done until someone approves that one."""
    from runs.models import Step, StepStatus

    olga, omar = person("olga"), person("omar")
    Step.objects.filter(run=stopped_run, name="post-ledger").update(status=StepStatus.UNKNOWN)
    request = _terminate_request(stopped_run, olga)
    Step.objects.filter(run=stopped_run, name="post-ledger").update(
        status=StepStatus.SUCCEEDED)
    result = _approve(request, omar)
    assert result.outcome == "superseded" and result.new_request is not None
    assert Run.objects.get(pk=stopped_run.pk).status == RunStatus.ATTENTION
    new = result.new_request
    assert new.requested_by_id == olga.pk and new.snapshot["reason"] == "duplicate"
    assert new.snapshot["high_impact_effects"] != request.snapshot["high_impact_effects"]
    # Nobody is named as having asked again: olga asked once.
    opened = AuditRecord.objects.filter(run=stopped_run, action="approval_opened")
    assert [r.actor_label for r in opened.order_by("seq")][-1] != "olga"
    # The run's passing through another state alone replaces nothing.
    _approve(new, omar)
    assert Run.objects.get(pk=stopped_run.pk).status == RunStatus.TERMINATED
    assert AuditRecord.objects.get(run=stopped_run, action="terminated").data[
        "approved_by"] == "omar"
