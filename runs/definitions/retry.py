"""Per-step retry policy: bounded exponential backoff with jitter, attempt and elapsed budgets."""

import math
import random
from dataclasses import dataclass, field
from functools import cached_property

# The longest wait between two attempts a policy may declare.
LONGEST_INTERVAL = 366 * 24 * 3600.0


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

    # Not checked as it is built: a policy is mostly built inline, as an argument of the step
    # it is for (`@wf.read("fetch", retry=RetryPolicy(...))`), before that step exists, and
    # an error raised here could name neither. The step refuses it, naming the workflow, the
    # step and the field (runs.definitions.validation.effect_checks); a policy used on its
    # own refuses to compute a delay or a budget instead (check).

    @cached_property
    def problem(self) -> str | None:
        """What the runtime cannot compute with in this policy, each field with its value,
        or None."""
        problems = [f"{name} must be a finite number, not {value!r}"
                    for name, value in self.numbers().items()
                    if isinstance(value, bool) or not isinstance(value, int | float)
                    or not math.isfinite(value)]
        if not isinstance(self.maximum_attempts, int) or isinstance(self.maximum_attempts, bool):
            problems.append(f"maximum_attempts must be a whole number, not "
                            f"{self.maximum_attempts!r}")
        if not isinstance(self.non_retryable, tuple) or not all(
                isinstance(t, type) and issubclass(t, BaseException)
                for t in self.non_retryable):
            problems.append("non_retryable must be a tuple of exception classes, not "
                            f"{self.non_retryable!r}")
        if problems:  # the comparisons below need numbers
            return "; ".join(problems)
        ranges = (
            (self.initial_interval >= 0, "initial_interval must be >= 0",
             self.initial_interval),
            (self.backoff_coefficient >= 1, "backoff_coefficient must be >= 1",
             self.backoff_coefficient),
            (self.maximum_interval >= self.initial_interval,
             f"maximum_interval must be >= initial_interval ({self.initial_interval!r})",
             self.maximum_interval),
            (self.maximum_attempts >= 1, "maximum_attempts must be >= 1", self.maximum_attempts),
            (0 <= self.jitter < 1, "jitter must be in [0, 1)", self.jitter),
            # A later retry is a schedule, not a retry; and a delay past what a date holds
            # fails the checkpoint that records the retry, in the worker, at every attempt.
            (self.maximum_interval <= LONGEST_INTERVAL,
             f"maximum_interval must be at most {LONGEST_INTERVAL:g} s (366 days)",
             self.maximum_interval),
            (self.maximum_elapsed > 0, "maximum_elapsed must be > 0", self.maximum_elapsed),
        )
        return "; ".join(f"{why}, not {value!r}" for ok, why, value in ranges if not ok) or None

    def check(self) -> None:
        """ValueError naming what is wrong, if the policy cannot be computed with."""
        if self.problem is not None:
            raise ValueError(f"invalid RetryPolicy: {self.problem}")

    def base_delay(self, attempt: int) -> float:
        """The delay after failed attempt number `attempt` (1-based), before jitter."""
        self.check()
        try:
            grown = self.initial_interval * self.backoff_coefficient ** (attempt - 1)
        except OverflowError:  # a float power past 1e308, after a thousand attempts or so
            grown = math.inf
        return min(grown, self.maximum_interval)

    def numbers(self) -> dict:
        return {"initial_interval": self.initial_interval,
                "backoff_coefficient": self.backoff_coefficient,
                "maximum_interval": self.maximum_interval,
                "maximum_attempts": self.maximum_attempts,
                "maximum_elapsed": self.maximum_elapsed, "jitter": self.jitter}

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
        self.check()
        return (attempts_made < self.maximum_attempts
                and elapsed + next_delay <= self.maximum_elapsed)


DEFAULT_POLICY = RetryPolicy()
