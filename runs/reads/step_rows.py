"""The steps of runs as the pages, the API and the operator's rules read them.

What is offered, what four eyes counts, what a step will do and what went wrong are read
from a step's state, its key, its reference and its error; none of them reads its result.
A result is kept inline up to RUNS_RESULT_INLINE_BYTES (64 KB by default), so reading the
results of a page's runs, or of one run of thousands of steps, at every view and every
poll of the run page cost megabytes read, sent and parsed for nothing shown. Where a result
is shown (a tool call's, with its conversation) it is read there.
"""

from django.db.models import QuerySet

from ..models import Step


def steps_in_order(**where) -> QuerySet[Step]:
    """The steps matching `where`, by run and position, their results left unread (reading
    one of them on a row costs a query of its own)."""
    return Step.objects.filter(**where).defer("result").order_by("run_id", "position")
