"""Retry math: backoff grows by the coefficient, respects the maximum interval, jitter stays
within bounds, and the attempt and elapsed budgets stop it."""

import random

import pytest

from runs.definitions.retry import RetryPolicy


def test_backoff_grows_by_the_coefficient_until_the_maximum_interval():
    policy = RetryPolicy(initial_interval=1, backoff_coefficient=3, maximum_interval=20,
                         jitter=0)
    assert [policy.base_delay(a) for a in range(1, 6)] == [1, 3, 9, 20, 20]
    assert [policy.delay(a) for a in range(1, 6)] == [1, 3, 9, 20, 20]


def test_jitter_stays_within_its_fraction_of_the_delay_and_actually_spreads():
    policy = RetryPolicy(initial_interval=10, backoff_coefficient=2, maximum_interval=100,
                         jitter=0.25)
    rng = random.Random(42)
    delays = [policy.delay(2, rng=rng) for _ in range(2000)]
    assert min(delays) >= 15 and max(delays) <= 25
    assert max(delays) - min(delays) > 8  # not a constant in disguise


def test_retry_after_from_the_server_is_never_undercut():
    policy = RetryPolicy(initial_interval=1, jitter=0.5)
    assert all(policy.delay(1, retry_after=30, rng=random.Random(s)) >= 30 for s in range(50))


def test_attempt_budget_stops_retries():
    policy = RetryPolicy(maximum_attempts=3)
    assert policy.allows_another(attempts_made=2, elapsed=0, next_delay=1)
    assert not policy.allows_another(attempts_made=3, elapsed=0, next_delay=1)


def test_elapsed_budget_stops_retries_even_with_attempts_left():
    policy = RetryPolicy(maximum_attempts=100, maximum_elapsed=60)
    assert policy.allows_another(attempts_made=1, elapsed=50, next_delay=10)
    assert not policy.allows_another(attempts_made=1, elapsed=50, next_delay=10.5)


@pytest.mark.parametrize("kwargs, message", [
    ({"backoff_coefficient": 0.5}, "backoff_coefficient"),
    ({"maximum_attempts": 0}, "maximum_attempts"),
    ({"jitter": 1.5}, "jitter"),
    ({"initial_interval": 10, "maximum_interval": 5}, "maximum_interval"),
])
def test_invalid_policy_is_refused_naming_the_field(kwargs, message):
    policy = RetryPolicy(**kwargs)
    with pytest.raises(ValueError, match=message):
        policy.delay(1)
