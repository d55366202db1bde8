"""What the drill table says of approvals: who approved what the drill runs' approval steps
asked, a person (the drill, in their place) or the workflow's rule (approve_if) with nobody
asked; and drill 7b's verdict on the path a rule leaves to a person.

A drill run starts with the workflow's example input. Where an approval step's rule lets
that input through, every drill passes the step by the rule, as production would, and the
path where the rule asks a person (a request made, a decision recorded through it, the run
going on) is never taken: the table says so, and drills it with the workflow's
approval_example where that is an input the rule asks a person about."""

from audit.actions import AuditAction
from audit.models import AuditRecord

from ..definitions import definition
from ..models import Run, StepStatus
from .drill_batches import of_batch
from .drill_results import DrillResult, not_exercised, went_through

# A person was asked: an approval step's or a stop verdict's attempt (a step), or a tool call.
ASKED = (AuditAction.APPROVAL_REQUESTED, AuditAction.TOOL_CALL_APPROVAL_REQUESTED)


def ruled_steps(workflow: definition.Workflow) -> list[definition.StepDef]:
    """The approval steps of `workflow` that declare a rule (approve_if)."""
    return [s for s in workflow.steps
            if s.kind == definition.APPROVAL and s.approve_if is not None]


def last_run_id() -> int:
    """The newest run's id: the drill runs a drill is about to start come after it."""
    return Run.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


def approvals_said(workflow: definition.Workflow, *, after: int, batch: str,
                   path: str) -> str:
    """The drill table's line on approvals, of the drill runs of `workflow` that the drill
    with token `batch` started (drill_batches), after run `after` (last_run_id, which keeps
    the look to the newest runs): how many waited for a person, approved through `path`
    (drills.approval_path), and how many passed an approval step by its rule, nobody asked;
    when none waited for a person, that the person path was not exercised. Another drill
    of the workflow run meanwhile started runs of its own: they are not this drill's."""
    runs = Run.objects.filter(of_batch(batch), workflow_name=workflow.name, pk__gt=after)
    total = runs.count()
    records = AuditRecord.objects.filter(run__in=runs.values("pk"))
    asked = records.filter(action__in=ASKED).values("run_id").distinct().count()
    ruled = records.filter(action=AuditAction.APPROVED_BY_RULE)
    by_rule = ruled.values("run_id").distinct().count()
    said = []
    if asked:
        said.append(f"{path}, in {asked} of {total} drill run{_s(total)}")
    if by_rule:
        names = sorted(set(ruled.values_list("step_name", flat=True)))
        said.append(f"approved by the workflow's rule, nobody asked, in {by_rule} of {total} "
                    f"drill run{_s(total)} ({', '.join(names)})")
        if not asked:
            said.append("no drill run waited for a person: the path where the rule asks "
                        "one was not exercised")
    return "; ".join(said) or "no drill run waited for a person's approval"


def _s(count: int) -> str:
    return "" if count == 1 else "s"


TITLE = "7b the person an approval step's rule asks ({})"
EXPECTED = ("the approval_example input asked of a person, approved through its request; "
            "the run goes on")


def without_example(step: definition.StepDef) -> DrillResult:
    """Drill 7b's row for a workflow that declares no approval_example."""
    return not_exercised(TITLE.format(step.name), EXPECTED, (
        f"the workflow declares no approval_example, an input {step.name}'s approve_if asks "
        "a person about; the other drills start with its example (the approvals line says "
        "who approved them)"))


def person_path_verdict(run: Run, step: definition.StepDef) -> DrillResult:
    """Drill 7b's row, from drill run `run`, started with the workflow's approval_example
    and carried through as the drill carries any: passed if `step` was asked of a person,
    approved by them (the drill, through its request) and the run went on; not exercised
    if the rule let that input through too."""
    title = TITLE.format(step.name)
    records = AuditRecord.objects.filter(run=run, step_name=step.name)
    if records.filter(action=AuditAction.APPROVED_BY_RULE).exists():
        return not_exercised(title, EXPECTED, (
            f"{step.name}'s approve_if let the approval_example input through too, nobody "
            "asked: declare one it asks a person about"))
    row = run.steps.get(name=step.name)
    asked = records.filter(action=AuditAction.APPROVAL_REQUESTED).exists()
    result = row.result if isinstance(row.result, dict) else {}
    approved = row.status == StepStatus.SUCCEEDED and result.get("approved") is True
    observed = (f"{step.name} {'asked of a person' if asked else 'NOT asked of a person'}, "
                + (f"approved by {result.get('by')}" if approved else f"{row.status}")
                + f"; run {run.status}"
                + (f": {run.status_message}" if run.status_message else ""))
    return DrillResult(title, EXPECTED, observed, asked and approved and went_through(run))
