"""Reads for the API: a run as a caller sees it, in two queries (the run, its steps); a
run's history a page at a time; the keyset cursor of the runs list."""

from dataclasses import dataclass

from archive.models import ArchivedRun
from audit.models import AuditRecord
from audit.redaction import sealed_masked
from runs.definitions.definition import EVENT, SLEEP
from runs.machine import dispatch
from runs.machine.endings import ended_waits
from runs.models import Run, RunStatus, Step, StepStatus, Workflow
from runs.operator.actions import offered
from runs.reads.cursors import keyset_after
from runs.reads.step_rows import steps_in_order

from .models import WebhookDelivery, WebhookSubscriber

# The run statuses of the runtime, as the finite set of states the API promises.
STATE_OF_STATUS = {
    RunStatus.QUEUED: "accepted",
    RunStatus.RUNNING: "running",
    RunStatus.WAITING: "waiting",
    RunStatus.ATTENTION: "needs_attention",
    RunStatus.COMPENSATING: "compensating",
    RunStatus.COMPLETED: "completed",
    RunStatus.COMPENSATED: "compensated",
    RunStatus.COMPENSATION_FAILED: "compensation_failed",
    RunStatus.TERMINATED: "terminated",
}


def state_of(status: str) -> str:
    return STATE_OF_STATUS[RunStatus(status)]


# What a step in status waiting waits for, by its kind. Any other waiting step (an approval
# step, a gated write or notify, an agent's tool call) waits for a person's decision; a run
# waiting with its step in any other status waits for a scheduled retry.
WAIT_OF_KIND = {EVENT: "event", SLEEP: "timer"}


def waiting_for(current: Step | None) -> str:
    """What a run in state 'waiting' waits for, from its current step."""
    if current is None or current.status != StepStatus.WAITING:
        return "retry"
    return WAIT_OF_KIND.get(current.kind, "approval")


@dataclass(frozen=True)
class RunView:
    run: Run
    state: str
    description: str
    current: Step | None
    waiting_for: str | None
    last_error: Step | None
    # What an operator can do with the run now (from runs.operator.actions, the one table).
    operator_actions: list
    steps: list[Step]
    # The steps that still read waiting though the run's end ended their wait, by name, with
    # what ended it (runs.machine.endings).
    ended_waits: dict[str, str]
    # The dispatch pause that holds the run where it is (queued, or a retry or timer due).
    dispatch_pause: dispatch.Pause | None


def deliveries_of(run_ids):
    """The webhook deliveries of the runs `run_ids` (a list, or a query of run ids): those
    of their status changes (events) and of their steps' outcomes (audit records), each
    side read along its own indexes and the two joined by id.

    Not one query naming both (`event__run` OR `record__run`): PostgreSQL answers an OR
    across two joined tables by joining every delivery to every event and every audit
    record, then keeping the run's, 3 to 6 s on each run page at a million runs. A record's
    deliveries are found along the unique (subscriber, record) index, which leads with the
    subscriber: hence the subscribers named (a few rows), one probe of it each."""
    of_events = WebhookDelivery.objects.filter(event__run_id__in=run_ids).values("pk")
    of_records = WebhookDelivery.objects.filter(
        subscriber__in=WebhookSubscriber.objects.values("pk"),
        record__run_id__in=run_ids).values("pk")
    return WebhookDelivery.objects.filter(pk__in=of_events.union(of_records, all=True))


def visible_run(run_id: int, *, workflows: list[str]) -> Run | None:
    """The run, if it is one of `workflows`' (a token never learns that other runs exist)."""
    return Run.objects.filter(pk=run_id, workflow_name__in=workflows).first()


def visible_archived_run(run_id: int, *, workflows: list[str]) -> ArchivedRun | None:
    """The tombstone of archived run `run_id`, if it is one of `workflows`'."""
    return (ArchivedRun.objects.select_related("archive_file")
            .filter(original_run_id=run_id, workflow_name__in=workflows).first())


def run_view(run: Run) -> RunView:
    steps = list(steps_in_order(run=run))
    current = next((s for s in steps if s.name == run.current_step), None) \
        if run.current_step else None
    errored = [s for s in steps if s.error_class]
    last_error = max(errored, key=lambda s: (s.updated_at, s.position)) if errored else None
    state = state_of(run.status)
    waits_for = waiting_for(current) if state == "waiting" else None
    # A pause holds what a claim would take next: a queued run, a retry or a timer (the
    # claim's own rule, dispatch.pause_holding). A run waiting for a person or an event is not
    # held by it until that comes.
    held = dispatch.pause_holding(run) if state == "accepted" or waits_for in ("retry", "timer") \
        else None
    description = _describe(run, state, current, waits_for)
    if held is not None:
        description += f"; held: {dispatch.pause_words(held)}"
    return RunView(run=run, state=state, current=current, waiting_for=waits_for,
                   last_error=last_error, operator_actions=offered(run, steps), steps=steps,
                   description=description, ended_waits=ended_waits(run, steps),
                   dispatch_pause=held)


def hold_of(view: RunView) -> dict | None:
    """The dispatch pause that holds the run, as the API's run state and show_run give it."""
    pause = view.dispatch_pause
    return None if pause is None else {"system": pause.system, "paused_by": pause.paused_by,
                                       "paused_at": pause.paused_at, "reason": pause.reason}


def _describe(run: Run, state: str, current: Step | None, waits_for: str | None) -> str:
    where = (f"step {current.position + 1} of {run.step_count} ({current.name})"
             if current is not None else "")
    if state == "accepted":
        return "accepted; waiting for a worker" + (f" to run {where}" if where else "")
    if state == "running":
        return f"running {where}" if where else "running"
    if state == "waiting":
        if waits_for == "retry" and current is not None and \
                current.status == StepStatus.PENDING:
            # Never tried: held before its first try (a dispatch pause), not between tries.
            return f"waiting to run {where}"
        if waits_for == "retry":
            return f"waiting to retry {where}" if where else "waiting to retry"
        return {"approval": f"waiting for approval at {where}",
                "event": f"waiting for an event at {where}",
                "timer": f"waiting for a timer at {where}"}[waits_for]
    if state == "needs_attention":
        return f"needs attention: {run.get_attention_reason_display() or 'unspecified'}" + (
            f" at {where}" if where else "")
    if state == "compensating":
        return f"compensating {where}" if where else "compensating"
    if state == "compensation_failed":
        return f"compensation failed at {where}; needs attention" if where \
            else "compensation failed; needs attention"
    return {"completed": f"completed all {run.step_count} steps",
            "compensated": "compensated: completed steps were undone",
            "terminated": "terminated"}[state]


def token_workflow_ids(workflows: list[str]) -> frozenset[int]:
    """The ids of the workflow rows a token's workflow names stand for."""
    return frozenset(Workflow.objects.filter(name__in=workflows).values_list("pk", flat=True))


def workflow_filter_problem(text: str, workflows: list[str]) -> str | None:
    """Why the runs list's `workflow` filter `text` can match no run of a token whose
    workflows are `workflows`, or None: a misspelt name would otherwise read as "no run
    matches", as `manage.py list_runs --workflow` refuses it. Only the token's workflows are
    asked and named: a workflow beyond them is one the token must not learn of."""
    part = text.strip().casefold()
    if not part or any(part in name.casefold() for name in workflows):
        return None
    known = ", ".join(sorted(workflows)) or "none"
    return (f"workflow: no workflow of this token's has a name containing {text.strip()!r} "
            f"(its workflows: {known})")


# Audit records on one page of a run's history over the API.
HISTORY_PAGE = 50
# The most a page holds, of runs or of a run's history, from the API and from the commands.
MOST_A_PAGE = 200
# The subscribers list's order and its keyset: the oldest made first.
SUBSCRIBER_ORDER = ("created_at", "id")


def subscribers_page(workflows: list[str], *, after: tuple | None,
                     limit: int) -> tuple[list, tuple | None]:
    """The webhook subscribers whose workflows are all of `workflows` (never one of every
    workflow, []), the oldest made first, `limit` at a time after the keyset cursor `after`
    ((created_at, id)), and the cursor of the next page, or None on the last."""
    rows = WebhookSubscriber.objects.filter(workflows__contained_by=list(workflows)) \
        .exclude(workflows=[])
    if after is not None:
        rows = keyset_after(rows, SUBSCRIBER_ORDER, after)
    page = list(rows.order_by(*SUBSCRIBER_ORDER)[:limit + 1])
    more = len(page) > limit
    page = page[:limit]
    return page, ((page[-1].created_at, page[-1].pk) if more and page else None)


@dataclass(frozen=True)
class HistoryPage:
    records: list[AuditRecord]
    older: int | None


def history_page(run: Run, *, before: int | None = None,
                 size: int = HISTORY_PAGE) -> HistoryPage:
    """The run's audit records before seq `before` (the newest without it), oldest first,
    along the (run, seq) index: every page costs one query, however long the history."""
    records = AuditRecord.objects.filter(run=run).order_by("-seq")
    if before is not None:
        records = records.filter(seq__lt=before)
    page = list(records[:size + 1])
    more = len(page) > size
    page = page[:size][::-1]
    return HistoryPage(records=page, older=page[0].seq if more and page else None)


def summary_of(run: Run) -> dict:
    """One row of the runs list as the API and the CLI print it (a run from
    runs.reads.selectors.runs_page, which carries its last error class)."""
    return {"id": run.pk, "workflow": run.workflow_name,
            "workflow_version": run.workflow_version, "business_key": run.business_key,
            "state": state_of(run.status), "status": run.status,
            "attention_reason": run.attention_reason or None,
            "current_step": run.current_step or None,
            "last_error_class": getattr(run, "last_error_class", None) or None,
            "created_at": run.created_at, "updated_at": run.updated_at}


def history_entry(record: AuditRecord) -> dict:
    """One audit record as the API and the CLI print a run's history: a sealed value it
    keeps as the mask, as the run page shows it (sealed_masked)."""
    return {"seq": record.seq, "at": record.created_at, "action": record.action,
            "actor": record.actor_label, "actor_kind": record.actor_kind,
            "step": record.step_name, "reason": record.reason,
            "before": sealed_masked(record.before or {}),
            "after": sealed_masked(record.after or {}), "data": sealed_masked(record.data or {})}
