"""An idempotency key names the workflow as well as the business key, step and version: two
workflows sharing a business key and a step name perform two actions at a receiver that
honours keys, while a run already in flight keeps the key stored on its step rows."""

import hashlib

import pytest

from demo.sandbox.models import Task
from runs.execution import executor
from runs.machine import transitions
from runs.machine.keys import step_key
from runs.models import RunStatus, Step
from tests.factories import SYSTEM

pytestmark = pytest.mark.django_db(transaction=True)


def _start(workflow: str, business_key: str):
    run, created = transitions.start_run(workflow=workflow, business_key=business_key,
                                         input={"order": business_key}, actor=SYSTEM)
    assert created
    return run


def test_two_workflows_with_one_business_key_and_step_name_make_two_tasks(live_sandbox):
    first = _start("test-tracker-a", "tenant-1:42")
    second = _start("test-tracker-b", "tenant-1:42")
    assert executor.advance_run(first.pk, worker="w1") == RunStatus.COMPLETED
    assert executor.advance_run(second.pk, worker="w1") == RunStatus.COMPLETED

    keys = {Step.objects.get(run=run).idempotency_key for run in (first, second)}
    assert keys == {step_key("test-tracker-a", "tenant-1:42", "create-task", 1),
                    step_key("test-tracker-b", "tenant-1:42", "create-task", 1)}
    assert Task.objects.count() == 2
    assert set(Task.objects.values_list("idempotency_key", flat=True)) == keys
    assert {t.title for t in Task.objects.all()} == {"test-tracker-a tenant-1:42",
                                                      "test-tracker-b tenant-1:42"}


def test_a_run_started_before_the_change_finishes_with_its_stored_key(live_sandbox):
    run = _start("test-tracker-a", "tenant-1:43")
    # As written by the earlier formula, without the workflow.
    old_key = hashlib.sha256(b"tenant-1:43:create-task:v1").hexdigest()
    Step.objects.filter(run=run).update(idempotency_key=old_key)

    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert list(Task.objects.values_list("idempotency_key", flat=True)) == [old_key]
    assert Step.objects.get(run=run).idempotency_key == old_key
