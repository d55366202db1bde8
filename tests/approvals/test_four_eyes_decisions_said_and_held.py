"""A second person's decision on an operator action is always in the run's log, and only
those who may still take the action decide it: a rejection, a timeout with nobody deciding
and an approval that cannot be applied each leave one record naming who decided (or that
nobody did) and that nothing was taken; an approver asked because they held the action's
permission cannot approve once it is taken away; and a request for another step of the same
action is refused, never answered with the request for the first one. A bulk job's one
request is replaced when what may have happened in its runs changes, as a single run's is."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.urls import reverse

from approvals import four_eyes, schedule
from approvals.bulk import bulk_progress, run_bulk_job, start_bulk_job
from approvals.models import ApprovalRequest
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.execution import executor
from runs.models import Run, RunStatus, Step, StepStatus
from runs.reads.selectors import RunFilters
from tests.approvals.conftest import later
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture
def ops(db):
    ensure_roles(Group, Permission)
    operators = Group.objects.get(name="operators")
    olga = User.objects.create_user("olga", email="olga@example.com", password="pw")
    omar = User.objects.create_user("omar", email="omar@example.com", password="pw")
    operators.user_set.add(olga, omar)
    return olga, omar


@pytest.fixture
def stopped_run(script):
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    return place(run, status=RunStatus.ATTENTION)


def decide(client, user, request, decision, comment=""):
    client.force_login(user)
    return client.post(reverse("approvals:decide", kwargs={"pk": request.pk}), {
        "decision": decision, "comment": comment, "decision_id": str(uuid.uuid4())})


def decided(run):
    return list(AuditRecord.objects.filter(run=run, action="approval_decided"))


def test_a_rejection_is_recorded_on_the_run_naming_who_rejected(client, ops, stopped_run):
    olga, omar = ops
    request, _ = four_eyes.request_operator_action(stopped_run, action="terminate",
                                                   requested_by=olga, reason="duplicate")
    decide(client, omar, request, "reject", comment="not a duplicate")
    (record,) = decided(stopped_run)
    assert (record.actor_label, record.actor_user_id) == ("omar", omar.pk)
    assert record.reason == "not a duplicate"
    assert (record.data["decision"], record.data["taken"]) == ("rejected", False)
    assert Run.objects.get(pk=stopped_run.pk).status == RunStatus.ATTENTION
    assert not AuditRecord.objects.filter(run=stopped_run, action="terminated").exists()


def test_a_timeout_is_recorded_naming_no_person(ops, stopped_run, t0):
    olga, _ = ops
    four_eyes.request_operator_action(stopped_run, action="terminate", requested_by=olga,
                                      reason="duplicate", now=t0)
    schedule.sweep(now=later(t0, days=2))
    (record,) = decided(stopped_run)
    assert record.actor_kind == "system" and record.actor_user_id is None
    assert (record.data["decision"], record.data["taken"]) == ("expired", False)
    schedule.sweep(now=later(t0, days=3))
    assert len(decided(stopped_run)) == 1


def test_an_approval_that_cannot_be_applied_says_who_approved_and_why_nothing_followed(
        client, ops, stopped_run):
    olga, omar = ops
    request, _ = four_eyes.request_operator_action(stopped_run, action="terminate",
                                                   requested_by=olga, reason="duplicate")
    # Her role was taken away: her request is not taken in her name. (Her account
    # deactivated withdraws the request instead: tests/approvals/test_an_operator_actions_
    # request_whose_requester_can_no_longer_act_is_withdrawn.py.)
    olga.groups.clear()
    decide(client, omar, request, "approve")
    (record,) = decided(stopped_run)
    assert (record.actor_label, record.data["decision"]) == ("omar", "approved")
    assert "olga may no longer terminate" in record.data["not_applied"]
    assert Run.objects.get(pk=stopped_run.pk).status == RunStatus.ATTENTION


def test_an_approver_whose_role_was_taken_away_cannot_approve(client, ops, stopped_run):
    olga, omar = ops
    request, _ = four_eyes.request_operator_action(stopped_run, action="terminate",
                                                   requested_by=olga, reason="duplicate")
    Group.objects.get(name="operators").user_set.remove(omar)
    omar = User.objects.get(pk=omar.pk)  # no cached permissions
    # No longer an approver, he may not see it either: answered as a request that is none.
    assert decide(client, omar, request, "approve").status_code == 404
    request.refresh_from_db()
    assert request.status == "pending"
    assert Run.objects.get(pk=stopped_run.pk).status == RunStatus.ATTENTION
    assert not decided(stopped_run)


def test_a_rerun_from_another_step_is_refused_while_one_from_the_first_waits(ops, script):
    olga, omar = ops
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    first, created = four_eyes.request_operator_action(
        run, action="rerun_from_step", requested_by=olga, reason="ledger lost it",
        params={"step": "post-ledger"})
    assert created
    with pytest.raises(ValueError, match=f"approval request {first.pk} already asks for "
                                         f"Re-run from step of run {run.pk} at step "
                                         "'post-ledger'"):
        four_eyes.request_operator_action(run, action="rerun_from_step", requested_by=omar,
                                          reason="redo all", params={"step": "fetch"})
    assert ApprovalRequest.objects.filter(run=run).count() == 1
    again, created = four_eyes.request_operator_action(
        run, action="rerun_from_step", requested_by=omar, reason="same ask",
        params={"step": "post-ledger"})
    assert (again.pk, created) == (first.pk, False)


def test_a_bulk_jobs_approval_never_applies_to_effects_its_approver_was_not_shown(
        client, ops, script):
    """The bulk job's one request lists each run's high-impact effects with its state; if
    what may have happened changes before the second person decides, the request is
    replaced, nothing is approved and no run is ended."""
    olga, omar = ops
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    place(run, status=RunStatus.ATTENTION)
    Step.objects.filter(run=run, name="post-ledger").update(status=StepStatus.UNKNOWN)
    job = run_bulk_job(start_bulk_job("terminate", RunFilters(status="attention"), user=olga,
                                      reason="duplicates")[0].pk)
    request = ApprovalRequest.objects.get(pk=job.approval_id)
    assert request.snapshot["high_impact_effects"] == [
        f"run {run.pk}: post-ledger: outcome unknown: may have happened"]
    # The unknown posting turns out to have been made.
    Step.objects.filter(run=run, name="post-ledger").update(status=StepStatus.SUCCEEDED)

    decide(client, omar, request, "approve")
    request.refresh_from_db()
    assert request.status == "superseded"
    new = ApprovalRequest.objects.get(status="pending")
    assert new.snapshot["high_impact_effects"] == [f"run {run.pk}: post-ledger: succeeded"]
    assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION

    decide(client, omar, new, "approve")
    run_bulk_job(job.pk)  # the job's worker applies the approval
    assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
    assert bulk_progress(job.pk).counts.get("done") == 1
