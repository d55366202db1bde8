"""The attempt generations of a run, for its page: the current one on the run row, each
earlier one from the audit record of the re-run that replaced it (runs.machine.transitions.rerun
keeps there every re-run step's previous state and key)."""

from dataclasses import dataclass
from datetime import datetime

from audit.actions import AuditAction
from audit.models import AuditRecord

from ..models import Run


@dataclass(frozen=True)
class Generation:
    number: int
    current: bool
    # How it began: the re-run's time, person, reason and first step (none for generation 0).
    started_at: datetime | None = None
    started_by: str = ""
    reason: str = ""
    from_step: str = ""
    # The steps it sent that a later generation sent again, as they stood then.
    replaced_steps: tuple = ()


def generations(run: Run) -> list[Generation]:
    """The run's generations, newest first; one (the current, 0) for a run never re-run."""
    if run.generation == 0:
        return [Generation(0, True)]
    reruns = list(AuditRecord.objects.filter(run_id=run.pk, action=AuditAction.RERUN_FROM_STEP)
                  .order_by("seq").only("created_at", "actor_label", "reason", "data"))
    began = {r.data["generation"]: r for r in reruns if r.data and "generation" in r.data}
    replaced = {r.data["previous_generation"]: tuple(r.data.get("previous_steps") or ())
                for r in reruns if r.data and "previous_generation" in r.data}
    found = []
    for number in range(run.generation, -1, -1):
        record = began.get(number)
        found.append(Generation(
            number, number == run.generation,
            started_at=record.created_at if record else None,
            started_by=record.actor_label if record else "",
            reason=record.reason if record else "",
            from_step=(record.data.get("from_step", "") if record else ""),
            replaced_steps=replaced.get(number, ())))
    return found
