"""What the drill kit reads to judge a drill run: the key each attempt of a step sent, how
many times each tool call was sent, and what a lookup by the step's key finds at its
receiver now."""

import time

from ..definitions import definition
from ..execution import executor
from ..machine.context import context_outside_executor
from ..models import Run, ToolCall


def intent_keys(run: Run, step_name: str) -> list[str]:
    # The key of each attempt, from the one record that ended it (the intent is the row).
    return list(run.audit_records.filter(step_name=step_name, data__has_key="started_at")
                .exclude(data__has_key="tool_call").exclude(before__step_status="compensating")
                .order_by("seq").values_list("data__key", flat=True))


def call_sends(call: ToolCall) -> int:
    """How many times tool call `call` was sent, read afresh: its attempts (the row is the
    intent)."""
    return ToolCall.objects.values_list("attempt", flat=True).get(pk=call.pk)


def calls_sent(run: Run) -> dict[str, int]:
    """How many times each tool call of `run` that was sent was, by its name for people."""
    return {f"{c.step.name}/{c.ref} {c.tool}": c.attempt
            for c in ToolCall.objects.filter(step__run=run, attempt__gt=0)
            .select_related("step")}


def found_by_key(workflow: definition.Workflow, run: Run,
                 step: definition.StepDef) -> tuple[str | None, str]:
    """The reference a lookup by the step's key finds now, and the drill's words for what it
    found ("" without a reconcile function). A lookup that fails (a timeout, the receiver's
    error) is no evidence that nothing is there: it is asked again, the step's
    lookup_attempts times in all as the runtime asks it, and said as failed if it still does."""
    if step.reconcile_fn is None:
        return None, ""
    for attempt in range(1, step.lookup_attempts + 1):
        with context_outside_executor(run, step.name, definition=workflow,
                                      with_services=True) as ctx:
            verdict, _ = executor.ask_remote(step, ctx)
        if not isinstance(verdict, definition.LookupFailed):
            break
        time.sleep(0.2 * attempt)
    if isinstance(verdict, definition.Found):
        return verdict.ref, f"finds {verdict.ref}"
    if isinstance(verdict, definition.LookupFailed):
        return None, f"failed {step.lookup_attempts} times ({verdict.reason}): nothing checked"
    if isinstance(verdict, definition.LookupUnreadable):  # asked again, it fails again
        return None, f"cannot be asked ({verdict.reason}): nothing checked"
    return None, f"finds nothing ({verdict})"
