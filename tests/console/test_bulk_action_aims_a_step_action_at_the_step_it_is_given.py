"""bulk_action start takes --step as the API's bulk job takes `step`: a step action (a re-run
from a step, a retry) aims at that step on every run, passed into the same bulk job function,
rather than at the first step each run allows. A --step the action would not read is
refused by name, and no job starts."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from approvals.models import BulkJob
from audit.models import AuditRecord
from runs.execution import executor
from runs.models import RunStatus, StepStatus
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db


def _call(*args) -> str:
    out = io.StringIO()
    call_command(*map(str, args), stdout=out)
    return out.getvalue()


def _completed_saga():
    run = new_run("test-saga")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    return run


def test_a_rerun_from_the_step_given_reruns_that_step_on_every_run(operator, script):
    runs = [_completed_saga() for _ in range(2)]
    keys = {run.pk: {s.name: s.idempotency_key for s in run.steps.all()} for run in runs}
    started = json.loads(_call("bulk_action", "start", "rerun_from_step", "--step",
                               "book-shipment", "--workflow", "test-saga", "--status",
                               "completed", "--reason", "shipments lost", "--user", "olga",
                               "--json"))
    assert BulkJob.objects.get(pk=started["job"]).params == {"step": "book-shipment"}
    _call("bulk_action", "run", started["job"])
    shown = json.loads(_call("bulk_action", "show", started["job"], "--user", "olga",
                             "--json"))
    assert shown["outcomes"] == {"done": 2}
    for run in runs:
        rerun = step(run, "book-shipment")
        assert rerun.generation == 1 and rerun.status == StepStatus.PENDING
        assert rerun.idempotency_key != keys[run.pk]["book-shipment"]
        # Without the step, the job would have re-run each run from its first step.
        for earlier in ("reserve-stock", "charge-card"):
            kept = step(run, earlier)
            assert kept.generation == 0 and kept.idempotency_key == keys[run.pk][earlier]
        record = AuditRecord.objects.get(run=run, action="rerun_from_step")
        assert record.step_name == "book-shipment" and record.actor_label == "olga"


def test_a_step_given_to_an_action_on_the_whole_run_is_refused_and_starts_no_job(
        operator, monkeypatch):
    _completed_saga()
    # Refused before the password is asked for: a wrong command costs none.
    monkeypatch.delenv("CLI_PASSWORD")
    with pytest.raises(CommandError, match="^--step does not apply with terminate; leave it "
                                           "out. Nothing was done.$"):
        _call("bulk_action", "start", "terminate", "--step", "book-shipment", "--workflow",
              "test-saga", "--reason", "cleanup", "--user", "olga")
    assert not BulkJob.objects.exists()
    assert not AuditRecord.objects.filter(actor_label="olga").exists()


@pytest.mark.parametrize("verb", ["preview", "show", "cancel", "run"])
def test_a_step_given_where_no_job_starts_is_refused(operator, verb):
    target = "rerun_from_step" if verb == "preview" else "1"
    with pytest.raises(CommandError, match=f"^--step does not apply to {verb}; leave it out"):
        _call("bulk_action", verb, target, "--step", "book-shipment", "--user", "olga")
    assert not BulkJob.objects.exists()
