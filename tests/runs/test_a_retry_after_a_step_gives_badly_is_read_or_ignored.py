"""A TransientError's retry_after is read by one rule (errors.read_retry_after, applied as
every classified error is made): a number of seconds, or text of one (as a Retry-After
header gives it), is honoured; anything else (other text, a bool, NaN, an infinity, a
negative number, one too large for any clock) is ignored, the retry policy's own backoff is
used, and the attempt's error message says so. Before, "5" or 10**400 raised inside the
outcome transaction at every attempt."""

import math
from datetime import timedelta

import pytest
from django.utils import timezone

from runs.execution import executor
from runs.machine.errors import Classified, TransientError, classify, read_retry_after
from runs.models import ErrorClass, RunStatus, StepStatus
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db(transaction=True)

IGNORED = "ignored, the retry policy's own backoff is used"


@pytest.mark.parametrize("raw, seconds", [
    ("5", 5.0), (" 7 ", 7.0), ("1.5", 1.5), (3, 3.0), (2.5, 2.5), (0, 0.0), (None, None),
])
def test_seconds_are_read(raw, seconds):
    assert read_retry_after(raw) == (seconds, None)


@pytest.mark.parametrize("raw, why", [
    ("soon", "is not a number of seconds"),
    ("Wed, 21 Oct 2015 07:28:00 GMT", "is not a number of seconds"),
    ("\u0663", "is not a number of seconds"),  # an Arabic-Indic 3, which float() reads
    ("nan", "is not a number of seconds"),
    (True, "is not a number of seconds"),
    ([5], "is not a number of seconds"),
    (-1, "is out of range"),
    (float("inf"), "is out of range"),
    (float("nan"), "is out of range"),
    (10**400, "is out of range"),
    (10**5000, "is out of range"),  # too long for Python to write out
    ("9" * 400, "is out of range"),
], ids=lambda value: str(value)[:20] if not isinstance(value, int) else type(value).__name__)
def test_anything_else_is_ignored_saying_why(raw, why):
    seconds, problem = read_retry_after(raw)
    assert seconds is None and why in problem and problem.endswith(IGNORED)
    classified = classify(TransientError("rate limited", retry_after=raw))
    assert classified.error_class == ErrorClass.TRANSIENT and classified.retry_after is None
    assert classified.message.startswith("TransientError: rate limited (its retry_after ")
    assert classified.message.endswith(f"{IGNORED})")


def test_every_classified_error_is_read_by_the_same_rule():
    assert Classified(ErrorClass.TRANSIENT, "x", "12").retry_after == 12.0
    assert Classified(ErrorClass.TRANSIENT, "x", math.inf).retry_after is None


def test_a_retry_after_in_text_is_honoured(script):
    script.reset()
    run = new_run()
    script.plan["create-task"] = [TransientError("rate limited", retry_after="5")]
    before = timezone.now()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    run.refresh_from_db()
    task = step(run, "create-task")
    assert task.status == StepStatus.SCHEDULED and task.error_class == ErrorClass.TRANSIENT
    assert task.error_message == "TransientError: rate limited"
    assert task.next_attempt_at >= before + timedelta(seconds=5)
    assert [call[0] for call in script.calls] == ["fetch", "classify", "create-task"]
    assert run.lease_owner == ""


@pytest.mark.parametrize("raw", [10**400, "soon", float("inf"), float("nan")],
                         ids=["10**400", "soon", "inf", "nan"])
@pytest.mark.parametrize("name", ["fetch", "create-task"])
def test_one_it_cannot_read_is_ignored_for_the_policys_backoff(script, raw, name):
    script.reset()
    run = new_run()
    script.plan[name] = [TransientError("rate limited", retry_after=raw)]
    before = timezone.now()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    after = timezone.now()
    run.refresh_from_db()
    effect = step(run, name)
    assert effect.status == StepStatus.SCHEDULED and effect.error_class == ErrorClass.TRANSIENT
    assert "its retry_after" in effect.error_message and IGNORED in effect.error_message
    # The policy's backoff (FAST: 10 ms, at most 50 ms), not the given wait.
    assert before < effect.next_attempt_at <= after + timedelta(seconds=1)
    assert [call[0] for call in script.calls].count(name) == 1
    assert run.lease_owner == ""
