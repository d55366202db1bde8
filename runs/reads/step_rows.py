"""The steps of runs as the pages, the API and the operator's rules read them.

What is offered, what four eyes counts, what a step will do and what went wrong are read
from a step's state, its key, its reference and its error; none of them reads its result.
A result is kept inline up to RUNS_RESULT_INLINE_BYTES (64 KB by default), so reading the
results of a page's runs, or of one run of thousands of steps, at every view and every
poll of the run page cost megabytes read, sent and parsed for nothing shown. Where a result
is shown (a tool call's, with its conversation) it is read there.
"""

from datetime import datetime

from django.db.models import QuerySet

from ..models import ATTENTION_RUN_STATUSES, FINAL_RUN_STATUSES, Run, Step


def steps_in_order(**where) -> QuerySet[Step]:
    """The steps matching `where`, by run and position, their results left unread (reading
    one of them on a row costs a query of its own)."""
    return Step.objects.filter(**where).defer("result").order_by("run_id", "position")


def next_try_at(run: Run, step: Step) -> datetime | None:
    """When the runtime takes `step` of `run` up again by itself, or None. Told only while
    the run goes on without a person: a run in attention (or whose compensation failed)
    waits for one whatever its step's next_attempt_at still holds (the lookup an unknown
    outcome was due for, shown as a next try long past that would never come), and an
    ended run tries nothing."""
    if run.status in ATTENTION_RUN_STATUSES or run.status in FINAL_RUN_STATUSES:
        return None
    return step.next_attempt_at
