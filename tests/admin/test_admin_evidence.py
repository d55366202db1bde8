"""Evidence in Django admin: visible, never changed or deleted there, not even by a
superuser. Runs, steps and tool calls change only through runs.machine.transitions."""

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.test import RequestFactory

from api.models import WebhookDelivery
from approvals.models import ApprovalRequest, Notification
from archive.models import ArchivedRun, ArchiveFile, ArchiveRemoval
from audit.models import AccessRecord, AuditRecord
from runs.models import AgentTurn, ApprovalWait, Run, Step, ToolCall

from .test_admin_lists import admin_client, grow  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db

EVIDENCE = [Run, ToolCall, AgentTurn, ApprovalWait, AuditRecord, AccessRecord,
            ApprovalRequest, Notification, WebhookDelivery, ArchiveFile, ArchivedRun,
            ArchiveRemoval]


@pytest.mark.parametrize("model", EVIDENCE, ids=lambda m: m.__name__)
def test_no_admin_page_adds_changes_or_deletes_evidence(admin_client, model):  # noqa: F811
    grow(1)
    model_admin = admin.site._registry[model]
    request = RequestFactory().get("/admin/")
    request.user = User.objects.get(username="root")
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request)
    assert not model_admin.has_delete_permission(request)
    assert "delete_selected" not in model_admin.get_actions(request)
    opts = model._meta
    base = f"/admin/{opts.app_label}/{opts.model_name}/"
    assert admin_client.get(base).status_code == 200
    assert admin_client.get(f"{base}add/").status_code == 403
    row = model.objects.order_by("pk").first()
    if row is None:
        return
    before = model.objects.filter(pk=row.pk).values().get()
    assert admin_client.get(f"{base}{row.pk}/change/").status_code == 200
    assert admin_client.post(f"{base}{row.pk}/change/", {"status": "completed"}).status_code \
        == 403
    assert admin_client.post(f"{base}{row.pk}/delete/", {"post": "yes"}).status_code == 403
    assert admin_client.post(base, {"action": "delete_selected", "_selected_action": [row.pk],
                                     "post": "yes"}).status_code in (200, 302)
    assert model.objects.filter(pk=row.pk).values().get() == before


def test_a_runs_steps_are_shown_read_only_and_each_run_row_links_to_the_console(
        admin_client):  # noqa: F811
    run = grow(1)[0]
    listing = admin_client.get("/admin/runs/run/")
    assert f'href="/runs/{run.pk}/"' in listing.text
    page = admin_client.get(f"/admin/runs/run/{run.pk}/change/")
    step = Step.objects.filter(run=run).first()
    assert step.idempotency_key in page.text and 'name="_save"' not in page.text
    assert 'name="steps-0-status"' not in page.text
    calls = admin_client.get("/admin/runs/toolcall/")
    assert f'href="/runs/{run.pk}/"' in calls.text


def test_workflow_rows_cannot_be_deleted_in_admin(admin_client):  # noqa: F811
    run = grow(1)[0]
    response = admin_client.post(f"/admin/runs/workflow/{run.workflow_id}/delete/",
                                 {"post": "yes"})
    assert response.status_code == 403
    assert Run.objects.filter(pk=run.pk).exists()
