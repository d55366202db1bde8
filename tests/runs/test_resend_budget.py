"""Every path that sends a step again is counted against the step's budget and spaced by its
backoff, against a real HTTP receiver that misbehaves forever; and a lookup is a read,
retried with backoff before a person is asked."""

import time

import pytest
from django.utils import timezone

from audit.models import AuditRecord
from runs.execution import executor
from runs.machine import transitions
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from tests.factories import SYSTEM, new_run
from tests.receiver import ScriptedReceiver
from tests.workflows import RECEIVER_POLICY, receiver

pytestmark = pytest.mark.django_db


@pytest.fixture
def remote():
    with ScriptedReceiver() as server:
        receiver.url = server.url
        yield server
    receiver.url = ""


def _drive(run: Run, *, seconds: float) -> Run:
    """Advance the run whenever it is due, as workers and the sweeper would, for `seconds`
    (or until it stops for a person or finishes)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        run = Run.objects.get(pk=run.pk)
        if run.status in (RunStatus.ATTENTION, RunStatus.COMPLETED):
            return run
        due = run.next_wake_at
        if run.status == RunStatus.WAITING and due and due > timezone.now():
            time.sleep(min((due - timezone.now()).total_seconds(), 0.5))
            continue
        executor.advance_run(run.pk, worker="w1")
    return Run.objects.get(pk=run.pk)


def _update_run():
    return new_run("test-remote")


def test_a_receiver_answering_502_and_404_forever_gets_at_most_the_policy_s_attempts(remote):
    # 502: the receiver's gateway failed, so the update may have happened (unknown).
    remote.answer("POST", "/updates", 502)
    remote.answer("GET", "/updates", 404)
    run = _update_run()

    run = _drive(run, seconds=20)
    # Keep going after the stop: nothing more may be sent, however often it is woken.
    for _ in range(5):
        assert executor.advance_run(run.pk, worker="w2") is None

    sends = remote.sent("POST", "/updates")
    assert len(sends) == RECEIVER_POLICY.maximum_attempts
    gaps = [b - a for a, b in zip(sends, sends[1:], strict=False)]
    for attempt, gap in enumerate(gaps, 1):  # jitter is 0: at least the base delay apart
        assert gap >= RECEIVER_POLICY.base_delay(attempt) * 0.95, (attempt, gaps)
    # Every send was preceded by a lookup by key that found nothing.
    assert len(remote.sent("GET", "/updates")) == len(sends)
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.BUDGET_EXHAUSTED
    assert "retry budget spent after 4 attempts" in run.status_message
    assert "lookup by key found nothing" in run.status_message
    step = Step.objects.get(run=run, name="post-update")
    assert step.status == StepStatus.FAILED and step.attempt == 4
    resends = AuditRecord.objects.filter(run=run, action="reconciled").order_by("seq")
    assert [r.data["attempt"] for r in resends if "delay_seconds" in r.data] == [1, 2, 3]
    assert not Step.objects.filter(run=run, name="post-payment").exclude(
        status=StepStatus.PENDING).exists()


def test_a_failed_lookup_is_retried_with_backoff_then_a_person_is_told_how_it_failed(remote):
    remote.answer("POST", "/updates", 504)
    remote.answer("GET", "/updates", 503)
    run = _drive(_update_run(), seconds=20)

    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME
    assert "3 lookups by key failed" in run.status_message and "HTTP 503" in run.status_message
    assert len(remote.sent("POST", "/updates")) == 1  # never resent while unknown
    lookups = remote.sent("GET", "/updates")
    assert len(lookups) == 3
    assert lookups[1] - lookups[0] >= RECEIVER_POLICY.base_delay(1) * 0.95
    assert Step.objects.get(run=run, name="post-update").status == StepStatus.UNKNOWN


def test_a_lookup_that_finds_the_effect_settles_even_a_high_impact_step(remote):
    remote.answer("POST", "/updates", 200)
    remote.answer("POST", "/payments", 504)
    remote.answer("GET", "/payments", 503, 200)
    run = _drive(_update_run(), seconds=20)

    assert run.status == RunStatus.COMPLETED
    assert len(remote.sent("POST", "/payments")) == 1
    assert len(remote.sent("GET", "/payments")) == 2
    step = Step.objects.get(run=run, name="post-payment")
    assert step.status == StepStatus.SUCCEEDED and step.remote_ref.startswith("R-")


def test_a_high_impact_step_whose_lookup_finds_nothing_is_never_resent_automatically(remote):
    remote.answer("POST", "/updates", 200)
    remote.answer("POST", "/payments", 504)
    remote.answer("GET", "/payments", 404)
    run = _drive(_update_run(), seconds=20)

    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME
    assert "only after a person confirms" in run.status_message
    assert len(remote.sent("POST", "/payments")) == 1


def test_an_operator_resume_gives_failed_lookups_a_fresh_budget(remote):
    remote.answer("POST", "/updates", 504)
    remote.answer("GET", "/updates", 503, 503, 503, 200)
    run = _drive(_update_run(), seconds=20)
    assert run.status == RunStatus.ATTENTION

    transitions.resume(run.pk, actor=SYSTEM, reason="lookup endpoint is back")
    remote.answer("POST", "/payments", 200)
    run = _drive(run, seconds=20)
    assert run.status == RunStatus.COMPLETED
    assert len(remote.sent("POST", "/updates")) == 1


def test_a_budget_spent_again_after_a_persons_retry_says_it_counts_from_the_retry(remote):
    remote.answer("POST", "/updates", 502)
    remote.answer("GET", "/updates", 404)
    run = _drive(_update_run(), seconds=20)
    assert "retry budget spent after 4 attempts (" in run.status_message

    transitions.retry_step(run.pk, step_name="post-update", actor=SYSTEM,
                           reason="the receiver's gateway is said to be fixed")
    run = _drive(run, seconds=20)
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.BUDGET_EXHAUSTED
    # The retry gave a whole budget again: four more sends, told apart from the first four.
    assert len(remote.sent("POST", "/updates")) == 2 * RECEIVER_POLICY.maximum_attempts
    assert "retry budget spent after 4 attempts since it began again (8 in all) (" in \
        run.status_message
    assert Step.objects.get(run=run, name="post-update").attempt == 8
