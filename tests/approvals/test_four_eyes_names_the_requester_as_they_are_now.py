"""The record of an approved four-eyes action names the person who asked by their account as
it is when the action is taken: a requester renamed between asking and the approval is
named by their new username, with their user id. The request keeps the name they had when
they asked: that is what the second person was shown."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals import decisions, four_eyes
from approvals.bulk import run_bulk_job, start_bulk_job
from approvals.models import ApprovalRequest
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
    """A test-orders run in attention after its high-impact step succeeded: ending it needs
    a second person."""
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    return place(run, status=RunStatus.ATTENTION)


def person(name):
    user = User.objects.create_user(name, email=f"{name}@example.com", password="pw")
    user.groups.add(Group.objects.get(name="operators"))
    return user


def rename(user, new_name):
    user.username = new_name
    user.save(update_fields=["username"])


def _approve(request, by):
    return decisions.decide(request.pk, user=by, approved=True, comment="agreed",
                            decision_id=uuid.uuid4())


def test_a_requester_renamed_before_the_approval_is_named_by_their_new_username(
        stopped_run):
    olga, omar = person("olga"), person("omar")
    request, _ = four_eyes.request_operator_action(stopped_run, action="terminate",
                                                   requested_by=olga, reason="duplicate")
    rename(olga, "olga.berg")

    assert _approve(request, omar).recorded

    assert Run.objects.get(pk=stopped_run.pk).status == RunStatus.TERMINATED
    record = AuditRecord.objects.get(run=stopped_run, action="terminated")
    assert (record.actor_kind, record.actor_label, record.actor_user_id) == (
        "user", "olga.berg", olga.pk)
    assert record.data["approved_by"] == "omar"
    # What omar was shown, and approved, still says who asked as they were then.
    request.refresh_from_db()
    assert request.snapshot["requested_by"] == "olga" and request.requested_by_id == olga.pk


def test_a_bulk_jobs_requester_renamed_before_the_approval_is_named_by_their_new_username(
        stopped_run):
    olga, omar = person("olga"), person("omar")
    job = run_bulk_job(start_bulk_job("terminate", RunFilters(status="attention"), user=olga,
                                      reason="duplicates")[0].pk)
    request = ApprovalRequest.objects.get(pk=job.approval_id)
    rename(olga, "olga.berg")

    assert _approve(request, omar).recorded
    run_bulk_job(job.pk)  # the job's worker applies the approval

    record = AuditRecord.objects.get(run=stopped_run, action="terminated")
    assert (record.actor_label, record.actor_user_id) == ("olga.berg", olga.pk)
    assert record.data["approved_by"] == "omar"
