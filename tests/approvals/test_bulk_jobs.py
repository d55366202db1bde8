"""Bulk by filter: a preview with the count and how many the person may act on, a durable
job that acts once per run (one audit record each) through the one function every caller
uses, one four-eyes request for the runs that need a second person, cancel, and a worker
killed with SIGKILL mid-job whose successor neither skips nor repeats a run."""

import io
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from guardian.shortcuts import assign_perm

from approvals.bulk import (
    BulkForbidden,
    BulkRefused,
    bulk_preview,
    bulk_progress,
    cancel_bulk_job,
    marked,
    run_bulk_job,
    start_bulk_job,
)
from approvals.bulk_lease import LEASE
from approvals.decisions import decide
from approvals.models import ApprovalRequest, BulkJob, BulkOutcome
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus, StepStatus, Workflow
from runs.reads.selectors import RunFilters
from tests.factories import new_run, place
from tests.processes import manage

ATTENTION = RunFilters(status=RunStatus.ATTENTION)


@pytest.fixture
def people(db):
    ensure_roles(Group, Permission)
    operators = Group.objects.get(name="operators")
    olga, carl = (User.objects.create_user("olga", password="pw"),
                  User.objects.create_user("carl", password="pw"))
    for user in (olga, carl):
        user.groups.add(operators)
    return olga, carl


def failed_run(workflow="test-orders"):
    return place(new_run(workflow), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.FAILED}
                 if workflow == "test-orders" else None)


def _effected():
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.SUCCEEDED,
                                "post-ledger": StepStatus.SUCCEEDED})


def marked_records(job, run):
    return AuditRecord.objects.filter(run=run, reason=marked(job.reason, job.pk)).count()


@pytest.mark.django_db
def test_the_preview_counts_what_matches_and_what_the_person_may_act_on(people):
    orders = [failed_run() for _ in range(3)]
    [failed_run("test-saga") for _ in range(2)]
    place(new_run(), status=RunStatus.COMPLETED)
    viewer = User.objects.create_user("vera")
    viewer.user_permissions.add(Permission.objects.get(codename="view_runs"))
    assign_perm("runs.terminate_run", viewer, Workflow.objects.get(name="test-orders"))
    assert bulk_preview("terminate", ATTENTION, user=viewer).matching == 5
    assert bulk_preview("terminate", ATTENTION, user=viewer).may_act == 3
    everything = bulk_preview("reopen", RunFilters(), user=people[0])
    assert (everything.matching, everything.may_act, everything.acceptable) == (6, 6, 0)
    assert Run.objects.filter(pk__in=[r.pk for r in orders],
                              status=RunStatus.ATTENTION).count() == 3


@pytest.mark.django_db
def test_a_job_acts_once_per_run_and_sends_the_rest_to_one_four_eyes_request(people):
    olga, carl = people
    plain = [failed_run() for _ in range(4)]
    effected = [_effected() for _ in range(2)]
    job, _ = start_bulk_job("terminate", ATTENTION, user=olga, reason="vendor fraud")
    assert job.total == 6
    job = run_bulk_job(job.pk)
    progress = bulk_progress(job.pk)
    assert job.status == "done" and progress.counts == {"done": 4, "second_person": 2}
    for run in plain:
        assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
        assert marked_records(job, run) == 1
    request = ApprovalRequest.objects.get(pk=job.approval_id)
    assert request.snapshot["runs"] == sorted(r.pk for r in effected)
    assert ApprovalRequest.objects.count() == 1
    assert all(Run.objects.get(pk=r.pk).status == RunStatus.ATTENTION for r in effected)

    with pytest.raises(Exception, match="may not decide"):
        decide(request.pk, user=olga, approved=True, decision_id=uuid.uuid4())
    decide(request.pk, user=carl, approved=True, decision_id=uuid.uuid4())
    # The approver's request only hands the job back to its worker.
    assert all(Run.objects.get(pk=r.pk).status == RunStatus.ATTENTION for r in effected)
    assert run_bulk_job(job.pk).status == "done"
    for run in effected:
        assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
        record = AuditRecord.objects.get(run=run, action="terminated")
        assert record.actor_label == "olga" and record.data["approved_by"] == "carl"
    assert bulk_progress(job.pk).counts == {"done": 6}
    # Running it again changes nothing.
    run_bulk_job(job.pk)
    assert all(marked_records(job, r) == 1 for r in plain + effected)


@pytest.mark.django_db
def test_the_search_narrows_the_job_to_the_runs_the_list_shows(people):
    """A search (q) is part of the filter: the preview counts, and the job acts on, only
    the runs it matches; the others are left exactly as they were."""
    olga, _ = people
    wanted, others = failed_run(), [failed_run() for _ in range(3)]
    search = RunFilters(status=RunStatus.ATTENTION, q=wanted.business_key)
    assert bulk_preview("terminate", search, user=olga).matching == 1
    job, _ = start_bulk_job("terminate", search, user=olga, reason="only this one")
    assert job.total == 1
    job = run_bulk_job(job.pk)
    assert bulk_progress(job.pk).counts == {"done": 1}
    assert Run.objects.get(pk=wanted.pk).status == RunStatus.TERMINATED
    for run in others:
        assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION
        assert not AuditRecord.objects.filter(run=run, action="terminated").exists()
    # A search nothing matches acts on nothing (not on everything): no job is made of it.
    nothing = RunFilters(status=RunStatus.ATTENTION, q="no-such-key-anywhere")
    assert bulk_preview("terminate", nothing, user=olga).matching == 0
    with pytest.raises(BulkRefused, match="q='no-such-key-anywhere'.* matches no run"):
        start_bulk_job("terminate", nothing, user=olga, reason="none")
    assert BulkJob.objects.count() == 1


def test_a_cancelled_job_stops_and_what_it_did_stays(people):
    olga, _ = people
    runs = [failed_run() for _ in range(3)]
    job, _ = start_bulk_job("terminate", ATTENTION, user=olga, reason="stop it")
    assert cancel_bulk_job(job.pk, user=olga)
    assert run_bulk_job(job.pk).status == "cancelled"
    assert not BulkOutcome.objects.filter(job=job).exists()
    assert all(Run.objects.get(pk=r.pk).status == RunStatus.ATTENTION for r in runs)
    assert not cancel_bulk_job(job.pk, user=olga)


def test_a_workflow_filter_that_names_no_workflow_is_refused_not_an_empty_job(people):
    olga, _ = people
    failed_run()
    with pytest.raises(BulkRefused, match="no workflow's name contains 'test-ordres'"):
        start_bulk_job("terminate", RunFilters(workflow="test-ordres"), user=olga,
                       reason="typo")
    assert not BulkJob.objects.exists()
    assert start_bulk_job("terminate", RunFilters(workflow="test-ord"), user=olga,
                          reason="part of a name")[0].total == 1


def test_only_its_owner_or_a_superuser_cancels_a_job_from_any_caller(people, monkeypatch):
    olga, carl = people
    monkeypatch.setenv("CLI_PASSWORD", "pw")
    failed_run()
    job, _ = start_bulk_job("terminate", ATTENTION, user=olga, reason="stop it")
    with pytest.raises(BulkForbidden, match="another person's"):
        cancel_bulk_job(job.pk, user=carl)
    with pytest.raises(CommandError, match="another person's"):
        call_command("bulk_action", "cancel", str(job.pk), "--user", "carl",
                     stdout=io.StringIO())
    job.refresh_from_db()
    assert job.status == "running" and job.cancelled_by is None
    root = User.objects.create_superuser("root")
    assert cancel_bulk_job(job.pk, user=root)


def test_the_command_refuses_a_person_without_the_permission_in_a_sentence(people,
                                                                          monkeypatch):
    User.objects.create_user("auditor-less", password="pw")
    monkeypatch.setenv("CLI_PASSWORD", "pw")
    with pytest.raises(CommandError, match="may not terminate any run"):
        call_command("bulk_action", "start", "terminate", "--user", "auditor-less",
                     "--reason", "x", stdout=io.StringIO())
    assert not BulkJob.objects.exists()


@pytest.mark.django_db
def test_refusals_and_missing_permissions_are_outcomes_not_failures(people):
    olga, _ = people
    fin = User.objects.create_user("fin")
    fin.user_permissions.add(Permission.objects.get(codename="view_runs"))
    assign_perm("runs.resume_run", fin, Workflow.objects.get_or_create(name="test-orders")[0])
    orders, saga = failed_run(), failed_run("test-saga")
    job = run_bulk_job(start_bulk_job("resume", ATTENTION, user=fin, reason="retry all")[0].pk)
    outcomes = dict(BulkOutcome.objects.filter(job=job).values_list("run_id", "outcome"))
    assert outcomes == {orders.pk: "done", saga.pk: "forbidden"}
    assert Run.objects.get(pk=saga.pk).status == RunStatus.ATTENTION


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("point", ["bulk_claimed", "bulk_acted"])
def test_a_worker_killed_mid_job_is_taken_over_without_skipping_or_repeating(people,
                                                                              point):
    olga, _ = people
    runs = [failed_run() for _ in range(6)]
    job, _ = start_bulk_job("terminate", ATTENTION, user=olga, reason="incident 42")
    victim = runs[2]
    worker = manage("bulk_action", "run", str(job.pk), RUNS_CRASH_AT=f"{point}:{victim.pk}",
                    RUNS_CRASH_MODE="self")
    worker.communicate(timeout=120)
    assert worker.returncode == -9  # SIGKILL, at that point
    claimed = dict(BulkOutcome.objects.filter(job=job).values_list("run_id", "outcome"))
    assert claimed == {runs[0].pk: "done", runs[1].pk: "done", victim.pk: "claimed"}
    assert marked_records(job, victim) == (1 if point == "bulk_acted" else 0)

    # Another worker, once the dead one's lease is over.
    assert run_bulk_job(job.pk).status == "running"  # the lease still holds: nothing done
    job = run_bulk_job(job.pk, now=timezone.now() + LEASE + timedelta(seconds=1))
    assert job.status == "done"
    assert bulk_progress(job.pk).counts == {"done": 6}
    for run in runs:
        assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
        assert marked_records(job, run) == 1, run.pk
        assert AuditRecord.objects.filter(run=run, action="terminated").count() == 1


@pytest.mark.django_db
def test_a_job_over_a_time_range_keeps_its_range_and_acts_only_within_it(people):
    olga, _ = people
    inside = failed_run()
    earlier = failed_run()
    Run.objects.filter(pk=earlier.pk).update(created_at=timezone.now() - timedelta(days=3))
    since = timezone.now() - timedelta(days=1)
    job, _ = start_bulk_job("terminate", RunFilters(status=RunStatus.ATTENTION,
                                                    time_field="created", since=since),
                            user=olga, reason="the last day only")
    job = run_bulk_job(job.pk)
    assert RunFilters.from_json(job.filters).since == since
    assert dict(BulkOutcome.objects.filter(job=job).values_list("run_id", "outcome")) == {
        inside.pk: "done"}
    assert Run.objects.get(pk=earlier.pk).status == RunStatus.ATTENTION
