"""What the runs app keeps of a run in an archive file, and how its rows leave the hot
tables (the archive app asks every app's `archival` module, see archive.parts).

Parts: the run's row, its steps, its events, and its agent steps' turns and tool calls.
Removed last (ORDER): the other apps' rows point at these."""

from django.db.models import F

from .models import AgentTurn, ApprovalWait, Run, RunEvent, Step, ToolCall

ORDER = 90
ARCHIVED = (Run, Step, RunEvent, AgentTurn, ToolCall)
# Removed without being written, and why nothing is lost.
TRANSIENT = {ApprovalWait: "a run waiting for a person has one; a final run has none"}


def row_values(queryset, *extra):
    """The rows as dicts of their columns (no model instances: thousands per file)."""
    names = [f.attname for f in queryset.model._meta.concrete_fields]
    return queryset.values(*names, **{name: F(path) for name, path in extra})


def rows(run_ids: list[int]) -> dict[int, dict]:
    """Each run's parts, by run id."""
    out = {run_id: {"steps": [], "agent_turns": [], "tool_calls": [], "events": []}
           for run_id in run_ids}
    for run in row_values(Run.objects.filter(pk__in=run_ids)):
        out[run["id"]]["run"] = run
    for step in row_values(Step.objects.filter(run_id__in=run_ids).order_by("run_id",
                                                                            "position")):
        out[step["run_id"]]["steps"].append(step)
    for name, model, order in (("agent_turns", AgentTurn, ("step_id", "generation", "index")),
                               ("tool_calls", ToolCall, ("step_id", "generation", "turn",
                                                        "index"))):
        for row in row_values(model.objects.filter(step__run_id__in=run_ids).order_by(*order),
                              ("archived_run_id", "step__run_id")):
            out[row.pop("archived_run_id")][name].append(row)
    for event in row_values(RunEvent.objects.filter(run_id__in=run_ids).order_by("run_id",
                                                                                 "id")):
        out[event["run_id"]]["events"].append(event)
    return {run_id: parts for run_id, parts in out.items() if "run" in parts}


def remove(run_ids: list[int]) -> None:
    ToolCall.objects.filter(step__run_id__in=run_ids).delete()
    AgentTurn.objects.filter(step__run_id__in=run_ids).delete()
    ApprovalWait.objects.filter(run_id__in=run_ids).delete()
    RunEvent.objects.filter(run_id__in=run_ids).delete()
    Step.objects.filter(run_id__in=run_ids).delete()
    Run.objects.filter(pk__in=run_ids).delete()
