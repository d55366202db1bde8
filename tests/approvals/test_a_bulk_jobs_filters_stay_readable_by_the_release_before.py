"""A bulk job keeps its filters as JSON, read by whichever worker carries it out; in a
rolling release that may be a worker of the release before. The console's jobs keep the
fields that release knew, so such a worker carries them out; a job that names its workflow
whole (the API's) carries the field, which such a worker refuses rather than reading the
name as a part of names and acting on other workflows' runs."""

from dataclasses import fields

from runs.reads.selectors import RunFilters

# The fields of RunFilters before workflow_exact (the release before it).
BEFORE = {f.name for f in fields(RunFilters)} - {"workflow_exact"}


def test_a_console_jobs_filters_hold_only_the_fields_the_release_before_knew():
    data = RunFilters(workflow="test-orders", status="attention").to_json()

    assert set(data) == BEFORE
    assert RunFilters.from_json(data) == RunFilters(workflow="test-orders", status="attention")


def test_a_job_that_names_its_workflow_whole_says_so_and_reads_back_the_same():
    filters = RunFilters(workflow="test-agent", workflow_exact=True)
    data = filters.to_json()

    assert data["workflow_exact"] is True and set(data) - BEFORE == {"workflow_exact"}
    assert RunFilters.from_json(data) == filters
