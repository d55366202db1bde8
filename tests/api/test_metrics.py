"""/metrics: the runtime's metrics, computed from the database at scrape time, served to
this machine or to the bearer of METRICS_TOKEN."""

from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from runs.execution import executor
from runs.machine.errors import TransientError
from runs.models import RunStatus, Step, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

EXPECTED = {
    "durable_metrics_up", "durable_runs", "durable_runs_attention",
    "durable_steps_stuck_past_lease", "durable_sweeper_lag_seconds", "durable_runs_due",
    "durable_queued_oldest_seconds", "durable_step_retries", "durable_unknown_outcomes",
    "durable_lease_expiries", "durable_model_output_rejections", "durable_late_results",
    "durable_step_duration_seconds", "durable_approvals_pending", "durable_approvals_overdue",
    "durable_outbox_backlog", "durable_outbox_oldest_seconds", "durable_outbox_failed",
    "durable_api_tokens_expiring_soon", "durable_approval_waits_unasked_oldest_seconds",
    "durable_webhook_backlog", "durable_webhook_oldest_seconds", "durable_webhook_failed",
    "durable_webhook_unqueued_seconds", "durable_audit_checkpoint_age_seconds",
    "durable_archive_overdue_seconds",
}


def scrape(client, **headers) -> dict:
    """{(sample name, frozenset(labels)): value} of one scrape."""
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(response.content.decode())
            for s in family.samples}


def families(client) -> set[str]:
    response = client.get("/metrics")
    return {f.name for f in text_string_to_metric_families(response.content.decode())}


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0)


def test_every_metric_is_exposed_even_on_an_empty_database(client):
    assert EXPECTED <= families(client)
    samples = scrape(client)
    assert value(samples, "durable_metrics_up") == 1
    assert value(samples, "durable_runs", workflow="test-orders", status="attention") == 0


def test_a_run_that_completes_moves_the_counts_and_the_duration_histogram(client):
    run = new_run()
    before = scrape(client)
    assert value(before, "durable_runs", workflow="test-orders", status="queued") >= 1
    assert value(before, "durable_queued_oldest_seconds") >= 0
    assert executor.advance_run(run.pk, worker="w1") == "completed"
    after = scrape(client)
    assert value(after, "durable_runs", workflow="test-orders", status="completed") == \
        value(before, "durable_runs", workflow="test-orders", status="completed") + 1
    assert value(after, "durable_runs", workflow="test-orders", status="queued") == \
        value(before, "durable_runs", workflow="test-orders", status="queued") - 1
    steps = {kind: value(after, "durable_step_duration_seconds_gcount", workflow="test-orders",
                         kind=kind) for kind in ("read", "decision", "write")}
    assert steps == {"read": 1, "decision": 1, "write": 2}
    assert value(after, "durable_step_duration_seconds_bucket", workflow="test-orders",
                 kind="write", le="+Inf") == 2


def test_retries_and_attention_are_counted_by_reason(client, script):
    script.plan["fetch"] = [TransientError("503")] * 5
    run = new_run()
    before = scrape(client)
    executor.advance_run(run.pk, worker="w1")
    after = scrape(client)
    assert value(after, "durable_step_retries_total") == \
        value(before, "durable_step_retries_total") + 1
    assert value(after, "durable_runs", workflow="test-orders", status="waiting") == \
        value(before, "durable_runs", workflow="test-orders", status="waiting") + 1
    place(run, status="attention", attention_reason="budget_exhausted")
    after = scrape(client)
    assert value(after, "durable_runs_attention", workflow="test-orders",
                 reason="budget_exhausted") == 1


def test_stuck_leases_and_sweeper_lag_are_seen(client):
    from datetime import timedelta

    from django.utils import timezone

    past = timezone.now() - timedelta(minutes=5)
    place(new_run(), status="running", lease_expires_at=past, lease_owner="dead-worker")
    place(new_run(), status="waiting", next_wake_at=past)
    samples = scrape(client)
    assert value(samples, "durable_steps_stuck_past_lease", workflow="test-orders") == 1
    assert value(samples, "durable_sweeper_lag_seconds") >= 290
    assert value(samples, "durable_runs_due") == 1


@pytest.mark.parametrize("headers", [
    {"REMOTE_ADDR": "10.1.2.3"},
    # A proxy on this machine relays from 127.0.0.1: a forwarded request is not local.
    {"HTTP_X_FORWARDED_FOR": "203.0.113.9"},
    {"HTTP_FORWARDED": "for=203.0.113.9"},
])
def test_metrics_are_refused_to_other_machines(client, headers):
    assert client.get("/metrics", **headers).status_code == 403


def test_metrics_with_a_token_from_anywhere(client, settings):
    settings.METRICS_TOKEN = "scrape-secret"
    remote = {"REMOTE_ADDR": "10.1.2.3"}
    response = client.get("/metrics", **remote)
    assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong", **remote).status_code == 401
    scrape(client, HTTP_AUTHORIZATION="Bearer scrape-secret", **remote)
    # An API token is not a metrics token.
    settings.METRICS_ALLOW_LOCALHOST = False
    assert client.get("/metrics").status_code == 401


def test_openmetrics_is_served_when_asked_for(client):
    response = client.get("/metrics", HTTP_ACCEPT="application/openmetrics-text; version=1.0.0")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.rstrip().endswith(b"# EOF")


def test_each_duration_bucket_counts_every_step_within_its_bound(client):
    # Four write steps of one workflow, 0.04 s, 3 s, 3 s and two days long: each le bucket
    # holds the steps at or under its bound, +Inf all of them, the sum their total.
    now = timezone.now()
    for seconds in (0.04, 3, 3, 2 * 86400):
        run = place(new_run(), status=RunStatus.COMPLETED, updated_at=now, finished_at=now)
        Step.objects.filter(run=run).update(status=StepStatus.SKIPPED)
        write = Step.objects.filter(run=run, kind="write").order_by("position").first()
        Step.objects.filter(pk=write.pk).update(status=StepStatus.SUCCEEDED, finished_at=now,
                                                started_at=now - timedelta(seconds=seconds))
    samples = scrape(client)

    def bucket(le):
        return value(samples, "durable_step_duration_seconds_bucket", workflow="test-orders",
                     kind="write", le=le)

    assert [bucket(le) for le in ("0.05", "2.5", "5.0", "86400.0", "+Inf")] == [1, 1, 3, 3, 4]
    assert value(samples, "durable_step_duration_seconds_gcount", workflow="test-orders",
                 kind="write") == 4
    assert value(samples, "durable_step_duration_seconds_gsum", workflow="test-orders",
                 kind="write") == pytest.approx(0.04 + 3 + 3 + 2 * 86400)
