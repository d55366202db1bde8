"""Per-step retry policy: bounded exponential backoff with jitter, attempt and elapsed budgets."""

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RetryPolicy:
    """How one step is retried after a transient error.

    Delays grow as initial_interval * backoff_coefficient ** (attempt - 1), capped at
    maximum_interval, then spread by +/- jitter (a fraction of the delay) so that many runs
    failing together do not retry together. A retry is allowed only while both budgets last:
    maximum_attempts and maximum_elapsed seconds since the first attempt.
    """

    initial_interval: float = 1.0
    backoff_coefficient: float = 2.0
    maximum_interval: float = 60.0
    maximum_attempts: int = 5
    maximum_elapsed: float = 3600.0
    jitter: float = 0.2
    non_retryable: tuple[type[BaseException], ...] = field(default_factory=tuple)

    def __post_init__(self):
        problems = []
        if self.initial_interval < 0:
            problems.append("initial_interval must be >= 0")
        if self.backoff_coefficient < 1:
            problems.append("backoff_coefficient must be >= 1")
        if self.maximum_interval < self.initial_interval:
            problems.append("maximum_interval must be >= initial_interval")
        if self.maximum_attempts < 1:
            problems.append("maximum_attempts must be >= 1")
        if not 0 <= self.jitter < 1:
            problems.append("jitter must be in [0, 1)")
        if problems:
            raise ValueError("invalid RetryPolicy: " + "; ".join(problems))

    def base_delay(self, attempt: int) -> float:
        """The delay after failed attempt number `attempt` (1-based), before jitter."""
        return min(self.initial_interval * self.backoff_coefficient ** (attempt - 1),
                   self.maximum_interval)

    def delay(self, attempt: int, *, retry_after: float | None = None,
              rng: random.Random | None = None) -> float:
        """The jittered delay after attempt `attempt`; never shorter than a server's Retry-After."""
        base = self.base_delay(attempt)
        spread = base * self.jitter
        delay = base + (rng or random).uniform(-spread, spread)
        if retry_after is not None:
            delay = max(delay, retry_after)
        return max(delay, 0.0)

    def allows_another(self, *, attempts_made: int, elapsed: float, next_delay: float) -> bool:
        """Whether one more attempt fits both budgets."""
        return (attempts_made < self.maximum_attempts
                and elapsed + next_delay <= self.maximum_elapsed)


DEFAULT_POLICY = RetryPolicy()
