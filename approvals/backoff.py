"""How long the approvals app waits before trying again: a notification that could not be
sent, a decision that could not be applied to its run."""

from runs.definitions.retry import RetryPolicy


def retry_delay(initial: float, attempt: int) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based): `initial`, doubling
    with each attempt, capped at an hour (or at `initial` if that is longer)."""
    # The runtime's retry policy, used for its backoff arithmetic only (no jitter, no budget).
    policy = RetryPolicy(initial_interval=initial, backoff_coefficient=2,
                         maximum_interval=max(initial, 3600), jitter=0)
    return policy.base_delay(attempt)
