"""bulk_action preview only counts the runs its filters match and records nothing: a
--reason given to it is refused by name, as run, show and cancel refuse options their job
would not read. Dropped unseen, it would leave the person believing it was recorded. The
filters, --user and --json, which a preview reads, are not refused."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from approvals.models import BulkJob
from audit.models import AuditRecord
from runs.models import RunStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def _call(*args) -> str:
    out = io.StringIO()
    call_command(*map(str, args), stdout=out)
    return out.getvalue()


@pytest.fixture
def finished_run():
    return place(new_run(), status=RunStatus.COMPLETED)


def test_a_reason_given_to_a_preview_is_refused_by_name(operator, finished_run):
    audited = AuditRecord.objects.count()
    with pytest.raises(CommandError, match="^--reason does not apply to preview: a preview "
                                           "only counts the runs the filters match, and "
                                           "records nothing; leave it out. Nothing was "
                                           "done.$"):
        _call("bulk_action", "preview", "terminate", "--user", "olga", "--workflow",
              "test-orders", "--status", "completed", "--reason", "cleanup", "--json")
    assert not BulkJob.objects.exists()
    assert AuditRecord.objects.count() == audited


def test_a_preview_with_filters_and_no_reason_counts_its_runs(operator, finished_run):
    preview = json.loads(_call("bulk_action", "preview", "terminate", "--user", "olga",
                               "--workflow", "test-orders", "--status", "completed",
                               "--stuck", "--search", finished_run.business_key, "--json"))
    assert preview["matching"] == 0  # a completed run is not stuck: the filters were read
    preview = json.loads(_call("bulk_action", "preview", "terminate", "--user", "olga",
                               "--workflow", "test-orders", "--status", "completed",
                               "--search", finished_run.business_key, "--json"))
    assert preview["matching"] == 1
    assert not BulkJob.objects.exists()
