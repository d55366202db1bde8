"""A retry policy is arithmetic the worker does after every transient failure: a value it
cannot compute with (NaN, infinity, text), a budget that can never allow an attempt or never
ends, or a delay no date can hold fails where it is declared, naming the field, instead of
in the checkpoint that records a retry. Backoff past any float stays at the maximum
interval, however many attempts a budget allows."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.definitions.definition import Workflow
from runs.definitions.retry import LONGEST_INTERVAL, RetryPolicy
from runs.definitions.validation import DefinitionError
from tests.workflows import OrderIn

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("kwargs, message", [
    ({"initial_interval": NAN}, "initial_interval must be a finite number, not nan"),
    ({"backoff_coefficient": NAN}, "backoff_coefficient must be a finite number, not nan"),
    ({"backoff_coefficient": INF}, "backoff_coefficient must be a finite number, not inf"),
    ({"maximum_interval": INF}, "maximum_interval must be a finite number, not inf"),
    ({"maximum_interval": NAN}, "maximum_interval must be a finite number, not nan"),
    ({"maximum_elapsed": NAN}, "maximum_elapsed must be a finite number, not nan"),
    ({"maximum_elapsed": INF}, "maximum_elapsed must be a finite number, not inf"),
    ({"maximum_elapsed": 0}, "maximum_elapsed must be > 0"),
    ({"maximum_elapsed": -60}, "maximum_elapsed must be > 0"),
    ({"jitter": NAN}, "jitter must be a finite number, not nan"),
    ({"initial_interval": "1"}, "initial_interval must be a finite number, not '1'"),
    ({"maximum_attempts": 2.5}, "maximum_attempts must be a whole number, not 2.5"),
    ({"maximum_attempts": True}, "maximum_attempts must be a whole number"),
    ({"maximum_interval": 1e300}, "maximum_interval must be at most"),
    ({"initial_interval": 1e12, "maximum_interval": 1e12}, "maximum_interval must be at most"),
    ({"non_retryable": ValueError}, "non_retryable must be a tuple of exception classes"),
    ({"non_retryable": (int,)}, "non_retryable must be a tuple of exception classes"),
])
def test_a_policy_the_worker_cannot_compute_with_is_refused_naming_the_field(kwargs, message):
    workflow = Workflow("test-retry-refused", version=1, input=OrderIn, register=False)
    with pytest.raises(DefinitionError) as refused:
        workflow.read("fetch", retry=RetryPolicy(**kwargs))(lambda ctx: None)
    assert str(refused.value).startswith(
        "workflow test-retry-refused v1, step 'fetch': retry policy: ")
    assert message in str(refused.value)


def test_the_longest_interval_allowed_is_a_date_a_retry_can_be_scheduled_at():
    policy = RetryPolicy(initial_interval=LONGEST_INTERVAL, maximum_interval=LONGEST_INTERVAL,
                         jitter=0)
    assert timezone.now() + timedelta(seconds=policy.delay(1)) > timezone.now()


def test_backoff_after_more_attempts_than_a_float_can_grow_stays_at_the_maximum_interval():
    # 2.0 ** 1100 overflows a float: the retry after attempt 1101 must still have a delay.
    policy = RetryPolicy(maximum_attempts=100_000, maximum_elapsed=10**9, jitter=0)
    assert policy.base_delay(1101) == policy.maximum_interval
    assert policy.delay(100_000) == policy.maximum_interval
    assert policy.allows_another(attempts_made=1101, elapsed=0, next_delay=policy.delay(1101))


def test_a_policy_with_sound_numbers_of_any_type_is_accepted():
    policy = RetryPolicy(initial_interval=0, backoff_coefficient=1, maximum_interval=5,
                         maximum_attempts=1, maximum_elapsed=0.5, jitter=0,
                         non_retryable=(KeyError, LookupError))
    assert policy.base_delay(3) == 0
