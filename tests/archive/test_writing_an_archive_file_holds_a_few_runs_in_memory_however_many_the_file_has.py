"""Writing an archive file holds the rows of a few runs in memory at a time (RUNS_PER_READ),
not those of every run of the file: a file of ARCHIVE_RUNS_PER_FILE (1,000) runs whose steps
keep results inline up to 64 KB each took hundreds of MB to GBs in the archiving process.
Measured with tracemalloc: the peak of Python's own allocations while write_file runs."""

import tracemalloc

import pytest
from django.utils import timezone

from archive.archiving import RUNS_PER_READ, write_file
from runs.models import Step

pytestmark = pytest.mark.django_db

# Near RUNS_RESULT_INLINE_BYTES (64 KB): the largest result a step keeps in its row.
RESULT = {"report": "x" * 60_000}


def _peak_while_writing(run_ids) -> int:
    tracemalloc.start()
    try:
        write_file(run_ids, actor="test", now=timezone.now())
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_file_of_four_reads_of_runs_peaks_no_higher_than_a_file_of_one(finished_run):
    runs = [finished_run(days=40) for _ in range(4 * RUNS_PER_READ)]
    Step.objects.filter(run__in=runs, name="fetch").update(result=RESULT)
    ids = [run.pk for run in runs]
    # Once before measuring: what the first write of a process sets up (compiled queries,
    # the storage's directories) is not a run's rows.
    write_file(ids[:1], actor="test", now=timezone.now())

    one_read = _peak_while_writing(ids[:RUNS_PER_READ])
    four_reads = _peak_while_writing(ids)

    # All the file's rows at once, the four reads' file would peak at about four times
    # the one read's.
    assert four_reads < 1.5 * one_read, (one_read, four_reads)
