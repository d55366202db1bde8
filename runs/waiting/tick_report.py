"""What a scheduler tick did (runs.waiting.schedules.fire_due_schedules), and what it says of
itself: the one account the beat task's result (runs.fire_schedules) and `manage.py
schedules tick` give, so that a field one of them said and the other left out (the refused
slots, once) cannot tell two stories of one tick."""

from dataclasses import dataclass, field


@dataclass
class TickReport:
    started: list[int] = field(default_factory=list)   # runs this tick created
    found: list[int] = field(default_factory=list)     # slots whose run already existed
    skipped: int = 0                                   # missed slots left out by policy
    # "slot: why" of each slot whose start was refused; in a whole tick's report,
    # "workflow/schedule slot: why" (add).
    refused: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)    # "workflow/schedule" that raised
    locked_out: bool = False
    # The database session ended during the tick, which stopped there (one line logged).
    lost: bool = False

    def add(self, other: "TickReport", *, schedule) -> None:
        """Count in `other`, the report of `schedule`'s tick, naming the schedule of each of
        its refused slots."""
        self.started += other.started
        self.found += other.found
        self.skipped += other.skipped
        self.refused += [f"{schedule.workflow_name}/{schedule.name} {refusal}"
                         for refusal in other.refused]
        self.failed += other.failed

    def said(self, *, run_ids: bool) -> dict:
        """The tick as JSON: each refused slot and failed schedule by name, and the runs it
        started and found as their ids (`run_ids`, what a person replaying a tick looks up)
        or as how many (a task's result, which the worker logs each few seconds: a catch-up
        starts up to a hundred runs a schedule)."""
        runs = list if run_ids else len
        return {"started": runs(self.started), "found": runs(self.found),
                "skipped": self.skipped, "refused": self.refused, "failed": self.failed,
                "locked_out": self.locked_out, "lost": self.lost}
