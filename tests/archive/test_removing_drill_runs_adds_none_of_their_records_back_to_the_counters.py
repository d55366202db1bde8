"""The audit counters add back the records each archival removal took, so that they never
go down; a removal counted a drill run's records too, so once remove_drill_runs had taken
the drill runs away their retries and lease take-backs were in the counters for good. A
drill run's records are counted nowhere: not while it is in the tables, not once removed.
A real run's records are still added back when it is archived."""

import io

import pytest
from django.core.management import call_command

from archive.models import ArchiveRemoval
from runs.models import Run
from tests.api.test_metrics import scrape, value
from tests.archive.conftest import age
from tests.observability.test_a_drill_runs_retries_and_step_durations_are_in_no_metric import (
    retried_to_completion,
)

pytestmark = pytest.mark.django_db

RETRIES = "durable_step_retries_total"


def test_a_removed_drill_runs_retry_is_never_added_to_the_counter(client, script, settings):
    settings.METRICS_FINISHED_RECOUNT_SECONDS = 0  # every scrape recounts the history
    before = value(scrape(client), RETRIES)
    drill = retried_to_completion(script, drill=True)
    real = age(retried_to_completion(script, drill=False), days=40)

    call_command("remove_drill_runs", stdout=io.StringIO())

    assert not Run.objects.filter(pk=drill.pk).exists()
    removal = ArchiveRemoval.objects.get()
    assert "retry_scheduled" not in removal.audit_actions
    assert value(scrape(client), RETRIES) == before + 1  # the real run's retry alone

    call_command("archive_runs", stdout=io.StringIO())

    assert not Run.objects.filter(pk=real.pk).exists()
    assert ArchiveRemoval.objects.latest("pk").audit_actions["retry_scheduled"] == 1
    assert value(scrape(client), RETRIES) == before + 1
