"""The small things an on-call engineer notices first: the favicon, runbooks rendered from
Markdown (sanitised), audit values as JSON, approval requests linked from the run page."""

import json

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse
from django.utils import timezone

from console.runbooks import runbook_html, runbook_section
from runs.execution import executor
from runs.models import AttentionReason
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def test_the_favicon_is_served_at_the_root(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 200
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert body[:4] == b"\x00\x00\x01\x00"  # an ICO file's header


def test_a_runbook_page_renders_its_markdown(client_for, operator):
    body = client_for(operator).get(
        reverse("console:runbook", args=["unknown_outcome"])).content.decode()
    assert "<em>What happened.</em>" in body and "*What happened.*" not in body
    assert "<strong>Reconcile first</strong>" in body or "<strong>" in body


@pytest.mark.parametrize("reason", AttentionReason.values)
def test_every_attention_reason_has_its_runbook(reason):
    section = runbook_section(reason)
    assert section and "*What happened.*" in section and "*Act.*" in section


def test_runbook_markdown_is_sanitised():
    html = runbook_html("hello <script>alert(1)</script> [x](javascript:alert(2)) "
                        '<img src=x onerror="alert(3)">\n\n**bold**')
    assert "<script" not in html and "javascript:" not in html and "onerror" not in html
    assert "<strong>bold</strong>" in html


def test_audit_before_and_after_are_json_not_python_repr(client_for, operator, stuck_run):
    body = client_for(operator).get(reverse("console:audit"),
                                    {"run": stuck_run.pk}).content.decode()
    record = stuck_run.audit_records.exclude(after={}).order_by("seq").last()
    shown = json.dumps(record.after, sort_keys=True, ensure_ascii=False)
    escaped = shown.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
    escaped = escaped.replace(">", "&gt;").replace("'", "&#x27;")
    assert escaped in body
    assert "{&#x27;" not in body  # a Python dict's repr starts {'


def test_the_run_page_links_each_approval_request(client_for, operator, script):
    from approvals import requests
    from approvals.models import ApprovalRequest

    approvers, _ = Group.objects.get_or_create(name="approvers")
    # Linked for whoever may open it, its approvers (the operator is none: tests/console/
    # test_the_run_page_links_an_approval_request_only_to_who_may_open_it.py).
    ann = User.objects.create_user("ann", password="pw")
    ann.groups.add(approvers)
    run = new_run("test-approval")
    executor.advance_run(run.pk, worker="w1")
    requests.open_pending_requests(now=timezone.now())
    request = ApprovalRequest.objects.get(run=run)
    body = client_for(ann).get(reverse("console:run", args=[run.pk])).content.decode()
    assert f'href="{reverse("approvals:detail", args=[request.pk])}"' in body
