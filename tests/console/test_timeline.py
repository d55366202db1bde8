"""One timeline on the run page: audit records, approval emails and webhook deliveries in
time order, workers named by host and process, and an operator's own action at once."""

import uuid

import pytest
from django.urls import reverse

from console.timeline import actor_name, run_timeline
from runs.execution import executor
from runs.models import Run
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def test_workers_are_named_by_host_and_process():
    assert actor_name("box-7:4242", "system") == "worker on box-7 (process 4242)"
    assert actor_name("olga", "user") == "olga"
    assert actor_name("sweeper", "system") == "sweeper (system)"


def test_the_timeline_merges_audit_records_and_webhook_deliveries_in_time_order(script):
    from django.utils import timezone

    from api.models import WebhookDelivery, WebhookSubscriber

    run = new_run()
    executor.advance_run(run.pk, worker="box-7:4242")
    subscriber = WebhookSubscriber.objects.create(name="crm", url="http://127.0.0.1:9/",
                                                  secret="s")
    record = run.audit_records.get(step_name="create-task", action="succeeded")
    WebhookDelivery.objects.create(subscriber=subscriber, record=record, delivery_id=uuid.uuid4(),
                                   status="delivered", attempts=1,
                                   next_attempt_at=timezone.now(), delivered_at=timezone.now())
    run = Run.objects.get(pk=run.pk)
    entries = run_timeline(run, list(run.audit_records.order_by("seq")))
    assert [e.at for e in entries] == sorted(e.at for e in entries)
    sources = [e.source for e in entries]
    assert sources.count("audit") == run.audit_seq and sources.count("webhook") == 1
    webhook = next(e for e in entries if e.source == "webhook")
    assert webhook.title == "progress event (create-task succeeded) delivered to crm"
    claimed = next(e for e in entries if e.title == "claimed")
    assert claimed.actor == "worker on box-7 (process 4242)"
    assert '"worker": "box-7:4242"' in claimed.data


def test_an_operators_action_appears_in_the_timeline_at_once(client_for, operator, stuck_run):
    response = client_for(operator).post(
        reverse("console:action", args=[stuck_run.pk, "retry_step"]),
        {"seen": str(stuck_run.audit_seq), "step": "create-task", "reason": "tracker fixed"},
        HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert 'id="timeline"' in body
    assert "step retried" in body and "tracker fixed" in body


def retried_for_days(run, records: int) -> Run:
    """`run` with `records` more audit records on its chain: a step retried again and again,
    as a flaky remote system makes one."""
    from datetime import timedelta

    from django.utils import timezone

    from audit.chain import Actor, build_record
    from audit.models import AuditRecord

    run = Run.objects.get(pk=run.pk)
    start, new = timezone.now(), []
    for n in range(records):
        record = build_record(run_id=run.pk, head_seq=run.audit_seq, head_hash=run.audit_head,
                              action="retry_scheduled", actor=Actor.system("box-7:4242"),
                              step_name="create-task", before={"step_status": "running"},
                              after={"step_status": "scheduled"},
                              data={"error": f"503 number {n}"},
                              created_at=start + timedelta(seconds=n))
        new.append(record)
        run.audit_seq, run.audit_head = record.seq, record.hash
    AuditRecord.objects.bulk_create(new)
    Run.objects.filter(pk=run.pk).update(audit_seq=run.audit_seq, audit_head=run.audit_head)
    return Run.objects.get(pk=run.pk)


def _queries(client, url, **headers):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, **headers)
        assert response.status_code == 200
    return len(ctx), response.content.decode()


def test_run_detail_costs_the_same_queries_for_10_and_500_audit_records(client_for, operator,
                                                                        stuck_run):
    client = client_for(operator)
    few = retried_for_days(stuck_run, 10 - stuck_run.audit_seq)
    many = retried_for_days(new_run(), 500)
    assert few.audit_seq == 10 and many.audit_seq >= 500
    url = "console:run"
    small, small_body = _queries(client, reverse(url, args=[few.pk]))
    large, large_body = _queries(client, reverse(url, args=[many.pk]))
    assert small == large
    # The page draws the newest page of the log, whatever its length.
    assert small_body.count('class="t-audit"') == 10
    assert large_body.count('class="t-audit"') == 20
    assert f"{many.audit_seq - 20} older in all" in large_body
    # So does the part polled while the run is live, and each older page.
    live = reverse(url, args=[many.pk]) + "?part=live"
    older = reverse(url, args=[many.pk]) + f"?part=timeline&before={many.audit_seq - 19}"
    assert _queries(client, live, HTTP_HX_REQUEST="true")[0] == \
        _queries(client, reverse(url, args=[few.pk]) + "?part=live", HTTP_HX_REQUEST="true")[0]
    assert _queries(client, older, HTTP_HX_REQUEST="true")[0] == \
        _queries(client, reverse(url, args=[few.pk]) + "?part=timeline&before=5",
                 HTTP_HX_REQUEST="true")[0]


def test_older_timeline_pages_follow_on_without_a_gap_or_an_overlap(client_for, operator,
                                                                    script):
    import re

    from django.utils import timezone

    from api.models import WebhookDelivery, WebhookSubscriber
    from runs.models import RunEvent

    run = new_run()
    executor.advance_run(run.pk, worker="box-7:4242")
    subscriber = WebhookSubscriber.objects.create(name="crm", url="http://127.0.0.1:9/",
                                                  secret="s")
    for event in RunEvent.objects.filter(run=run):
        WebhookDelivery.objects.create(subscriber=subscriber, event=event,
                                       delivery_id=uuid.uuid4(), status="delivered",
                                       attempts=1, next_attempt_at=timezone.now(),
                                       delivered_at=event.created_at)
    run = retried_for_days(run, 45)
    client = client_for(operator)
    body = client.get(reverse("console:run", args=[run.pk])).content.decode()
    seqs, webhooks = [], 0
    while True:
        rows = re.findall(r'<tr class="t-(\w+)">\s*<td>(\d*)</td>', body)
        seqs = [int(n) for source, n in rows if source == "audit"] + seqs
        webhooks += sum(source == "webhook" for source, _ in rows)
        older = re.search(r'hx-get="([^"]*part=timeline&amp;before=\d+)"', body)
        if older is None:
            break
        # The link asks for the page before the first record shown.
        assert older.group(1).endswith(f"before={seqs[0]}")
        body = client.get(older.group(1).replace("&amp;", "&"),
                          HTTP_HX_REQUEST="true").content.decode()
        assert "<html" not in body  # a fragment: the rows to put in place of the link
    assert seqs == list(range(1, run.audit_seq + 1))
    assert webhooks == RunEvent.objects.filter(run=run).count()
    # Without htmx, the same link opens the page with that part of the timeline.
    body = client.get(reverse("console:run", args=[run.pk]), {"before": 30}).content.decode()
    shown = [int(n) for n in re.findall(r'<tr class="t-audit">\s*<td>(\d+)</td>', body)]
    assert shown == list(range(10, 30)) and "Newest entries" in body


def _notification_queries(ctx) -> int:
    return sum("approvals_notification" in q["sql"] for q in ctx.captured_queries)


def test_the_run_page_asks_for_approval_emails_only_when_the_run_has_an_approval_request(
        client_for, operator, stuck_run, settings):
    from django.contrib.auth.models import Group, User
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    import tests.approvals.workflows  # noqa: F401  (registers test-approval)
    from approvals import notifications, requests

    client = client_for(operator)
    with CaptureQueriesContext(connection) as ctx:
        client.get(reverse("console:run", args=[stuck_run.pk]))
    assert _notification_queries(ctx) == 0

    settings.APPROVALS_BASE_URL = "http://testserver"
    approver = User.objects.create_user("ann", email="ann@example.com", password="pw")
    approver.groups.add(Group.objects.get_or_create(name="approvers")[0])
    waiting = new_run("test-approval")
    executor.advance_run(waiting.pk, worker="w1")
    assert requests.open_pending_requests() >= 1
    assert notifications.publish_notifications().sent == 1
    with CaptureQueriesContext(connection) as ctx:
        body = client.get(reverse("console:run", args=[waiting.pk])).content.decode()
    assert _notification_queries(ctx) == 1
    # An operator may not see the notifications' addresses: the approver is named.
    assert "email sent to ann" in body and "ann@example.com" not in body


def test_audit_records_are_shown_in_their_chains_order_whatever_their_times_say(
        client_for, operator):
    """Each process stamps its records by its own estimate of the database's clock, measured
    again every 30 s: a record can read a few milliseconds earlier than the record before
    it. The timeline keeps the chain's order, never the times'."""
    import re
    from datetime import timedelta

    from django.utils import timezone

    from audit.chain import Actor, build_record
    from audit.models import AuditRecord

    run = Run.objects.get(pk=new_run().pk)
    start, new = timezone.now(), []
    for n in range(5):
        record = build_record(run_id=run.pk, head_seq=run.audit_seq, head_hash=run.audit_head,
                              action="retry_scheduled", actor=Actor.system("box-7:4242"),
                              step_name="create-task", data={"error": f"503 number {n}"},
                              created_at=start - timedelta(milliseconds=3 * n))
        new.append(record)
        run.audit_seq, run.audit_head = record.seq, record.hash
    AuditRecord.objects.bulk_create(new)
    Run.objects.filter(pk=run.pk).update(audit_seq=run.audit_seq, audit_head=run.audit_head)
    body = client_for(operator).get(reverse("console:run", args=[run.pk])).content.decode()
    seqs = [int(n) for source, n in re.findall(r'<tr class="t-(\w+)">\s*<td>(\d*)</td>', body)
            if source == "audit"]
    assert seqs == list(range(1, run.audit_seq + 1))
