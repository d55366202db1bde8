"""A bulk job's filter that no run can be listed by (a status none of the runs have, a
search holding a NUL or longer than anything it looks in) is refused in the words the runs
list says it in at every door (runs.reads.filter_problems): manage.py bulk_action says them
after the option's name as list_runs does, POST /api/bulk beside the filter's field as GET
/api/runs does. bulk_action answered an unknown status in argparse's words ("invalid
choice") and a NUL in storable_text's; the bulk API's schema said its enum's and its
pattern's. Nothing is started, no record written, no run touched."""

import io

import pytest
from django.core.management import CommandError, call_command

from api.tokens import token_create
from approvals.models import BulkJob
from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

STATUSES = ", ".join(RunStatus.values)
CASES = {
    "an unknown status": ("status", "nope", "--status",
                          f"status: no status 'nope'; the statuses are: {STATUSES}"),
    "a NUL in the search": ("q", "ord\x00er", "--search",
                            "search: NUL characters cannot be stored"),
    "a search of 301 characters": ("q", "k" * 301, "--search",
                                   "search: at most 300 characters (no business key or "
                                   "reference is longer); this one has 301"),
}


def refused_by_the_command(*arguments: str) -> str:
    with pytest.raises(CommandError) as refused:
        call_command(*arguments, stdout=io.StringIO())
    return str(refused.value)


@pytest.mark.parametrize("case", list(CASES))
def test_every_door_of_a_bulk_job_refuses_it_in_the_runs_lists_words(case, client, operator):
    field, value, option, words = CASES[case]
    runs = [place(new_run(), status=RunStatus.ATTENTION) for _ in range(2)]
    records = AuditRecord.objects.count()

    said = f"--{words}. Nothing was done."
    assert refused_by_the_command("list_runs", option, value) == said
    for verb in ("preview", "start"):
        assert refused_by_the_command("bulk_action", verb, "cancel", "--user", "olga",
                                      "--reason", "vendor incident", option, value) == said

    _, plaintext = token_create(name="erp", workflows=["test-orders"], acting_user=operator)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}
    listed = client.get("/api/runs", {field: value}, **auth)
    bulk = client.post("/api/bulk", {"action": "cancel", "reason": "vendor incident",
                                     "filters": {field: value}},
                       content_type="application/json", **auth)
    assert (listed.status_code, bulk.status_code) == (422, 422)
    assert [e["msg"] for e in listed.json()["errors"] if e["loc"] == ["query", field]] == \
        [words]
    assert [e["msg"] for e in bulk.json()["errors"] if e["loc"] == ["filters", field]] == \
        [words]

    assert not BulkJob.objects.exists()
    assert AuditRecord.objects.count() == records
    assert [Run.objects.get(pk=run.pk).status for run in runs] == [RunStatus.ATTENTION] * 2
