"""The rows of the runs list, formatted for the page here rather than by template tags and
filters.

A page draws fifty rows, and drawing one through the template engine cost about 0.35 ms: two
reversed links, a date and a "time since", a truncated error, the attention reason in words
and half a dozen localized numbers, each looked up on a model instance. Made here once,
the same text costs a third of that (console.timeline does the same for the run page's
timeline). The markup stays in the template (console/_run_rows.html)."""

from dataclasses import dataclass

from django.urls import reverse
from django.utils import timezone
from django.utils.text import Truncator
from django.utils.timesince import timesince

from runs.models import Run

# The last error's message in the row, cut to this many characters (whole in its title).
ERROR_CHARS = 90


@dataclass(frozen=True)
class RunRow:
    pk: str
    seen: str  # the run's audit sequence as drawn: a bulk action refuses a run moved on since
    href: str
    workflow: str
    workflow_href: str
    version: str
    business_key: str
    status: str
    reason: str  # why the run needs a person, in words; "" when it needs nobody
    step: str  # the current step, "-" when none
    progress: str  # steps done / steps
    error_class: str  # of the last error, "" when the run has none
    error_message: str
    error_short: str  # the message cut to ERROR_CHARS
    attempt: str  # of the current step, "-" when none
    updated_iso: str
    updated_ago: str


def run_rows(runs: list[Run]) -> list[RunRow]:
    """`runs` (with the row facts of runs.reads.selectors) as the runs list draws them."""
    # Most rows of a page share a workflow: its link is reversed once.
    workflow_hrefs = {name: reverse("console:workflow", args=[name])
                      for name in {run.workflow_name for run in runs}}
    rows = []
    for run in runs:
        message = run.last_error_message or ""
        rows.append(RunRow(
            pk=str(run.pk), seen=str(run.audit_seq), href=reverse("console:run", args=[run.pk]),
            workflow=run.workflow_name, workflow_href=workflow_hrefs[run.workflow_name],
            version=str(run.workflow_version), business_key=run.business_key,
            status=run.status,
            reason=run.get_attention_reason_display() if run.attention_reason else "",
            step=run.current_step or "-", progress=f"{run.steps_done}/{run.step_count}",
            error_class=run.last_error_class or "", error_message=message,
            error_short=Truncator(message).chars(ERROR_CHARS),
            attempt=str(run.current_attempt) if run.current_attempt else "-",
            updated_iso=timezone.localtime(run.updated_at).isoformat(),
            updated_ago=timesince(run.updated_at)))
    return rows
