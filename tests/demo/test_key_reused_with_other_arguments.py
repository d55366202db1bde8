"""A write whose key the receiver already holds with other arguments (a task opened by an
earlier version of the step, say): the receiver refuses it (HTTP 422, code
idempotency_key_reused); the run stops for a person after that one send, with an error that
names the key and both arguments' hashes, and nothing is sent again. A person's lookup by
that key finds the earlier request's task, which is not this step's effect: it settles
nothing, and the run keeps waiting for a person."""

import pytest
from django.core.signals import request_started

from audit.actions import AuditAction
from audit.models import AuditRecord
from demo.sandbox.models import Task
from runs.execution import executor
from runs.machine import transitions
from runs.machine.keys import step_key
from runs.models import AttentionReason, ErrorClass, Run, RunStatus, Step
from runs.operator.reconciliation import reconcile_step
from tests.factories import SYSTEM

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def task_posts():
    """The POSTs the sandbox's tracker received (counted by the receiving server)."""
    seen = []

    def count(sender, environ, **kwargs):
        if environ.get("REQUEST_METHOD") == "POST" and \
                environ.get("PATH_INFO", "").endswith("/tracker/tasks"):
            seen.append(environ.get("HTTP_IDEMPOTENCY_KEY"))

    request_started.connect(count, weak=False)
    yield seen
    request_started.disconnect(count)


@pytest.fixture(autouse=True)
def patient(settings):
    # A slow answer on a busy machine would be an unknown outcome: not these tests' case.
    settings.EXTERNAL_TIMEOUT_SECONDS = 15


def started_under_a_held_key(workflow: str, business_key: str) -> tuple[Run, str]:
    """A run of `workflow` whose create-task key the tracker already holds, first sent with
    another title; the run and that key."""
    key = step_key(workflow, business_key, "create-task", 1)
    Task.objects.create(idempotency_key=key, title="an earlier title", assignee="ops")
    run, _ = transitions.start_run(workflow=workflow, business_key=business_key,
                                   input={"order": business_key}, actor=SYSTEM, wake=False)
    return run, key


def test_a_write_refused_for_a_reused_key_goes_to_attention_after_one_send(live_sandbox,
                                                                          task_posts):
    run, key = started_under_a_held_key("test-tracker-a", "tenant-1:reused")

    for _ in range(3):  # whatever a worker does next, nothing is sent again
        executor.advance_run(run.pk, worker="w1")

    run = Run.objects.get(pk=run.pk)
    step = Step.objects.get(run=run, name="create-task")
    assert run.status == RunStatus.ATTENTION, run.status_message
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR
    assert task_posts == [key]
    assert step.status == "failed" and step.attempt == 1 and step.next_attempt_at is None
    assert step.error_class == ErrorClass.KEY_REUSED
    assert f"idempotency key {key} was used before with other arguments" in \
        step.error_message
    assert step.error_message.count("sha256 ") == 2
    # The receiver holds the one task it had, unchanged.
    assert list(Task.objects.values_list("idempotency_key", "title")) == [
        (key, "an earlier title")]
    assert not AuditRecord.objects.filter(run=run, action__in=[
        AuditAction.RETRY_SCHEDULED, AuditAction.RECONCILE_SCHEDULED]).exists()


def test_a_lookup_by_the_reused_key_settles_nothing_and_the_run_waits_for_a_person(
        live_sandbox, task_posts):
    run, key = started_under_a_held_key("test-tracker-looked-up", "tenant-1:looked-up")
    executor.advance_run(run.pk, worker="w1")
    assert Step.objects.get(run=run, name="create-task").error_class == ErrorClass.KEY_REUSED

    # The tracker has a task under the key (the earlier request's): it is found.
    reconcile_step(run.pk, step_name="create-task", actor=SYSTEM, reason="what did it do?")

    run = Run.objects.get(pk=run.pk)
    step = Step.objects.get(run=run, name="create-task")
    assert run.status == RunStatus.ATTENTION
    assert "the key holds an earlier request with other arguments" in run.status_message
    assert (step.status, step.remote_ref, step.error_class) == ("failed", "",
                                                                ErrorClass.KEY_REUSED)
    [reconciled] = AuditRecord.objects.filter(run=run, action=AuditAction.RECONCILED)
    assert reconciled.data["verdict"] != "found"
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.SUCCEEDED).exists()
    assert task_posts == [key]
    assert Task.objects.count() == 1
