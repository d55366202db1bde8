"""What a schedule, or the time of a tick, is refused with."""


class ScheduleError(ValueError):
    """A schedule declared wrongly, an unknown schedule named by an operator, or a tick time
    that cannot be one (runs.waiting.tick_time)."""
