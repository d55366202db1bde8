"""The metrics of agent steps: model turns, tokens and tool calls (by tool and state), per
workflow, without reading every turn and call at every scrape.

A run's turns and calls change only while the run is open; once it finished (completed,
compensated, terminated) they stay as they are. So the counts split like the finished runs'
(observability.metrics.finished_runs): the turns and calls of runs that finished before a
horizon are counted once per METRICS_FINISHED_RECOUNT_SECONDS, those of open runs and of
runs finished since at every scrape: the open runs of the workflows that have agent steps
found along run_open_work_idx, the runs finished since along run_status_updated_idx, their
agent steps along step_agent_idx (which holds the agent steps alone) and the steps' rows
along the (step, generation, turn[, index]) unique indexes. A scrape costs the open runs of
agent workflows and what is recent, not every open run nor what the database holds; the
recount, the agent steps (every one, along step_agent_idx) and their runs, not every
finished run. Drill runs are left out, as from every figure of the metrics.

They are gauges, like durable_runs: what the hot tables hold. A run moved to the archive
takes its turns and calls with it at the next recount, and one reopened after the recount
stays counted where it was until the next.
"""

from collections import Counter

from django.db.models import Count, Q, Sum
from prometheus_client.core import GaugeMetricFamily

from runs.definitions import definition
from runs.models import FINAL_RUN_STATUSES, AgentTurn, Run, Step, ToolCall, ToolCallStatus

from .history_counts import OPEN_STATUSES, HistoryCount

# The states a person acts on: a series for each declared tool even at zero, for alerts.
ALERT_STATES = (ToolCallStatus.UNKNOWN.value, ToolCallStatus.WAITING.value)
# The tool label of the calls a model asked for under a name no version of the workflow
# declares. Such a name is the model's text: it may quote the documents it read (or what a
# prompt injection told it to say), to anyone who scrapes, and each one would be a series of
# its own, kept until the run is archived.
UNDECLARED_TOOL = "(undeclared)"


# Step ids per query: the turns and calls of each chunk are read along the unique indexes
# that start with the step.
CHUNK = 500


def _of_steps(rows, workflows: dict, *, every: bool):
    """The rows (grouped by step) of the steps in `workflows`: read in chunks of step ids,
    or, `every`, grouped over the whole table, those of other steps left out (one read of
    the table instead of a lookup per step, for the recount, which wants most of them)."""
    if every:
        yield from (r for r in rows if r["step_id"] in workflows)
        return
    ids = sorted(workflows)
    for start in range(0, len(ids), CHUNK):
        yield from rows.filter(step_id__in=ids[start:start + CHUNK])


def _turns(workflows: dict, *, every: bool) -> Counter:
    """{(workflow, "turns" | "prompt" | "completion"): n}"""
    counts = Counter()
    rows = (AgentTurn.objects.values("step_id")
            .annotate(n=Count("*"), prompt=Sum("prompt_tokens"),
                      completion=Sum("completion_tokens")).order_by())
    for r in _of_steps(rows, workflows, every=every):
        name = workflows[r["step_id"]]
        counts[(name, "turns")] += r["n"]
        counts[(name, "prompt")] += r["prompt"] or 0
        counts[(name, "completion")] += r["completion"] or 0
    return counts


def _calls(workflows: dict, *, every: bool) -> Counter:
    """{(workflow, tool, status): n}"""
    counts = Counter()
    rows = (ToolCall.objects.values("step_id", "tool", "status").annotate(n=Count("*"))
            .order_by())
    for r in _of_steps(rows, workflows, every=every):
        counts[(workflows[r["step_id"]], r["tool"], r["status"])] += r["n"]
    return counts


def _agent_steps(runs: dict[int, str]) -> dict[int, str]:
    """{step id: workflow} of the agent steps of `runs` ({run id: workflow}), along
    step_agent_idx (its entries are the agent steps only, a few a run), in chunks of runs."""
    ids = sorted(runs)
    steps = {}
    for start in range(0, len(ids), CHUNK):
        steps.update((step, runs[run]) for step, run in Step.objects.filter(
            kind=definition.AGENT, run_id__in=ids[start:start + CHUNK])
            .values_list("id", "run_id").order_by())
    return steps


def _agent_counts(workflows: dict[int, str], *, every: bool = False) -> tuple[Counter, Counter]:
    # The turns and calls of the agent steps `workflows` ({step id: workflow}), along the
    # unique indexes that start with the step, counted per step and summed per workflow
    # here. Joined to their steps and runs in one query, the planner cannot know that only
    # agent steps have turns and calls: it read every call and looked up the run of each
    # (1 to 1.7 s at a million runs).
    return _turns(workflows, every=every), _calls(workflows, every=every)


def _finished_by(horizon) -> dict[int, str]:
    """{agent step: workflow} of the runs finished by `horizon` (the recount): every agent
    step along step_agent_idx, then the run of each by its key, so that what is read
    follows the agent steps, not the finished runs (nearly all of the table). Joined in one
    query, PostgreSQL read every finished run to find the few with an agent step."""
    runs = {}
    steps = dict(Step.objects.filter(kind=definition.AGENT).values_list("id", "run_id")
                 .order_by())
    ids = sorted(set(steps.values()))
    for start in range(0, len(ids), CHUNK):
        runs.update(Run.objects.filter(
            pk__in=ids[start:start + CHUNK], status__in=FINAL_RUN_STATUSES,
            updated_at__lte=horizon, drill=False).values_list("id", "workflow_name"))
    return {step: runs[run] for step, run in steps.items() if run in runs}


def agent_workflows(open_workflows) -> list[str]:
    """Of `open_workflows` (the workflows with open runs), those whose runs may have agent
    steps: a registered version declares one, or none is registered (what its runs hold
    cannot be told from here)."""
    registered, declared = set(definition.registry.names()), declared_tools(open_workflows)
    return sorted(name for name in open_workflows
                  if name not in registered or name in declared)


def _open_or_finished_since(horizon, *, open_workflows=()) -> dict[int, str]:
    """{agent step: workflow} of the open runs of the workflows that have agent steps
    (along run_open_work_idx: the open runs of other workflows are not read) and of the
    runs finished since `horizon` (along run_status_updated_idx). Drill runs are left out,
    as from every figure of the metrics."""
    runs = dict(Run.objects.filter(
        Q(status__in=OPEN_STATUSES, workflow_name__in=agent_workflows(open_workflows))
        | Q(status__in=FINAL_RUN_STATUSES, updated_at__gt=horizon), drill=False)
        .values_list("id", "workflow_name").order_by())
    return _agent_steps(runs)


# (turns, calls) of agent steps: those of runs finished before the split recounted only when
# due, those of open runs and of runs finished since at every scrape.
agent_counts = HistoryCount(
    count_before=lambda horizon: _agent_counts(_finished_by(horizon), every=True),
    count_after=lambda horizon, **runs: _agent_counts(_open_or_finished_since(horizon,
                                                                              **runs)),
    combine=lambda before, after: (before[0] + after[0], before[1] + after[1]))


def declared_tools(names) -> dict[str, set[str]]:
    """{workflow: the tools its agent steps declare} for the registered workflows (any of
    their versions: runs on an old one are still open) that have an agent step."""
    tools = {}
    for name in names:
        agents = [s for workflow in definition.registry.versions(name)
                  for s in workflow.steps if isinstance(s, definition.AgentSpec)]
        if agents:
            tools[name] = {tool for s in agents for tool in s.tools}
    return tools


def _declared_only(calls: Counter, tools: dict[str, set[str]]) -> Counter:
    """The calls with every tool name the workflow does not declare as UNDECLARED_TOOL."""
    labelled = Counter()
    for (name, tool, status), n in calls.items():
        shown = tool if tool in tools.get(name, ()) else UNDECLARED_TOOL
        labelled[(name, shown, status)] += n
    return labelled


def agent_families(now, names, open_workflows):
    """The agent metric families. Of `names` (the registered workflows), those with an
    agent step get their series even at zero. `open_workflows`: the workflows with open runs
    (drill runs left out)."""
    turns, calls = agent_counts.counts(now, open_workflows=open_workflows)
    tools = declared_tools(names)
    calls = _declared_only(calls, tools)
    workflows = sorted(set(tools) | {w for w, _ in turns} | {w for w, _, _ in calls})
    family = GaugeMetricFamily("durable_agent_turns",
                               "Model turns stored by agent steps, by workflow.",
                               labels=["workflow"])
    for name in workflows:
        family.add_metric([name], turns.get((name, "turns"), 0))
    yield family
    family = GaugeMetricFamily("durable_agent_tokens",
                               "Tokens the model used in agent steps' turns, by workflow and "
                               "type (prompt, completion).", labels=["workflow", "type"])
    for name in workflows:
        for kind in ("prompt", "completion"):
            family.add_metric([name, kind], turns.get((name, kind), 0))
    yield family
    family = GaugeMetricFamily(
        "durable_agent_tool_calls",
        "Tool calls the model asked for in agent steps, by workflow, tool and state "
        "(unknown: to be reconciled by key; waiting: for a person's approval).",
        labels=["workflow", "tool", "status"])
    for name, declared in tools.items():
        for tool in declared:
            for status in ALERT_STATES:
                calls.setdefault((name, tool, status), 0)
    for (name, tool, status), n in sorted(calls.items()):
        family.add_metric([name, tool, status], n)
    yield family
