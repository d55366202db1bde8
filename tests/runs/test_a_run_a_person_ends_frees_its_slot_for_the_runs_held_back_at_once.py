"""A run of a limited workflow that a person ends while a worker held it (a terminate)
frees its slot at once: the runs held back behind it are woken by the release, as when a
worker lets go, not at the sweeper's late pass seconds later."""

import pytest
from django.contrib.auth.models import User

from approvals.operator_actions import act
from runs import tasks
from runs.machine import limits, transitions
from runs.models import Run, RunStatus
from runs.operator.actions import ActionInput
from tests.factories import new_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def one_in_flight():
    limits.limit_workflow("test-orders", max_in_flight=1)
    yield
    limits.forget(workflow="test-orders")


def test_the_run_held_back_is_woken_when_a_person_terminates_the_held_one(
        script, one_in_flight, hints, django_capture_on_commit_callbacks):
    held = new_run(wake=False)
    assert transitions.claim_run(held.pk, worker="w1") is not None
    waiting_for_the_slot = new_run(wake=False)
    assert transitions.claim_run(waiting_for_the_slot.pk, worker="w2") is None

    with django_capture_on_commit_callbacks(execute=True):
        outcome = act("terminate", held.pk, user=User.objects.create_superuser("root"),
                      given=ActionInput(reason="wrong vendor"))
    assert outcome.done
    assert Run.objects.get(pk=held.pk).status == RunStatus.TERMINATED
    # The terminated run is hinted: the worker that takes the hint releases its slot ...
    assert hints == [held.pk]

    tasks.advance_run.apply(args=(held.pk,))
    # ... and wakes the run held back, which is admitted now.
    assert hints == [held.pk, waiting_for_the_slot.pk]
    assert transitions.claim_run(waiting_for_the_slot.pk, worker="w2") is not None


def test_ending_a_run_no_worker_held_sends_no_hint(
        script, one_in_flight, hints, django_capture_on_commit_callbacks):
    queued = new_run(wake=False)
    with django_capture_on_commit_callbacks(execute=True):
        act("terminate", queued.pk, user=User.objects.create_superuser("root"),
            given=ActionInput(reason="not wanted"))
    assert Run.objects.get(pk=queued.pk).status == RunStatus.TERMINATED
    assert hints == []  # it held no slot: nothing to release
