"""The outcomes a bulk job's page lists, a page at a time: each run it did not simply act on
(refused, forbidden, waiting for a second person, claimed), with why; a run no longer
visible to the job's person is counted, never listed (approvals.bulk_sight). A job of a
hundred thousand runs may have as many; the page reads one page of them, and counts the
rest from the job's progress (approvals.bulk.bulk_progress), which counts every outcome in
one query."""

from dataclasses import dataclass

from .bulk import Progress
from .models import BulkOutcome
from .paging import Page, page_window

# How many outcomes a page of a bulk job lists.
OUTCOMES_LISTED = 200
# Counted, not listed: a done run (the action happened), and a run its person may no longer
# see (they learn nothing more of it).
UNLISTED = [BulkOutcome.Outcome.DONE, BulkOutcome.Outcome.NOT_VISIBLE]


@dataclass(frozen=True)
class OutcomesPage(Page):
    """A page of a job's listed outcomes: `rows`, of the `count` the job has that are not
    done."""

    rows: list[BulkOutcome]


def outcomes_page(progress: Progress, number: int | None) -> OutcomesPage:
    """Page `number` (from 1; None, or past either end: the nearest page) of the outcomes of
    `progress`'s job that are not done, by run id, OUTCOMES_LISTED at a time: one query of
    that many rows at most. (UNLISTED ones are counted, not listed.)"""
    count = sum(n for outcome, n in progress.counts.items() if outcome not in UNLISTED)
    number, pages, start = page_window(count, OUTCOMES_LISTED, number)
    rows = list(BulkOutcome.objects.filter(job_id=progress.job.pk)
                .exclude(outcome__in=UNLISTED)
                .order_by("run_id")[start:start + OUTCOMES_LISTED])
    return OutcomesPage(rows=rows, number=number, pages=pages, first=start + 1,
                        last=start + len(rows), count=count)
