from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from archive.models import ArchiveRemoval
from runs.execution import executor
from runs.machine.errors import TransientError
from runs.models import Run, Step
from tests.api.test_metrics import scrape, value
from tests.archive.conftest import age
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def test_archiving_never_makes_an_audit_counter_go_down(client, script, settings):
    # A counter that drops reads to Prometheus as a reset, and rate() then reports the
    # whole remaining count as a burst of retries.
    settings.METRICS_FINISHED_RECOUNT_SECONDS = 0  # every scrape recounts the history
    script.plan["fetch"] = [TransientError("503")]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    past = timezone.now() - timedelta(seconds=1)
    Run.objects.filter(pk=run.pk).update(next_wake_at=past)
    Step.objects.filter(run=run, next_attempt_at__isnull=False).update(next_attempt_at=past)
    assert executor.advance_run(run.pk, worker="w1") == "completed"
    age(Run.objects.get(pk=run.pk), days=40)
    before = scrape(client)
    assert value(before, "durable_step_retries_total") >= 1

    call_command("archive_runs")

    assert not Run.objects.filter(pk=run.pk).exists()
    removal = ArchiveRemoval.objects.get()
    assert removal.audit_actions["retry_scheduled"] == 1
    after = scrape(client)
    for name in ("durable_step_retries_total", "durable_unknown_outcomes_total",
                 "durable_lease_expiries_total"):
        assert value(after, name) == value(before, name), name
