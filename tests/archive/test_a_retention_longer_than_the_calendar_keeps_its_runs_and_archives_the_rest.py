"""A workflow that keeps its finished runs "for ever" by a retention_days longer than the
calendar reaches (a million days: before the year 1) keeps them in the hot tables, and the
pass still archives every other workflow's runs past their retention: one such number
never stops the archive job with an OverflowError, every pass, for every workflow."""

import pytest
from django.core.management import call_command

from archive.archiving import archive_runs
from archive.models import ArchivedRun
from runs.definitions import definition
from runs.models import Run, RunStatus
from tests.archive.conftest import age
from tests.factories import new_run

pytestmark = pytest.mark.django_db

FOR_EVER = 1_000_000


def test_a_workflow_kept_for_ever_stays_and_the_others_are_archived(finished_run,
                                                                     monkeypatch):
    monkeypatch.setattr(definition.registry.latest("test-saga"), "retention_days", FOR_EVER)
    kept = age(new_run("test-saga"), days=10_000, status=RunStatus.COMPLETED)
    due = finished_run(days=40)

    report = archive_runs(actor="test")

    assert report.runs_removed == 1
    assert set(ArchivedRun.objects.values_list("original_run_id", flat=True)) == {due.pk}
    assert Run.objects.filter(pk=kept.pk).exists()


def test_a_setting_longer_than_the_calendar_archives_nothing(finished_run, settings, capsys):
    settings.RUNS_RETENTION_DAYS = FOR_EVER
    run = finished_run(days=10_000)

    call_command("archive_runs", "--dry-run")
    assert "dry run: 0 runs would be archived" in capsys.readouterr().out
    call_command("archive_runs")

    assert Run.objects.filter(pk=run.pk).exists() and not ArchivedRun.objects.exists()
