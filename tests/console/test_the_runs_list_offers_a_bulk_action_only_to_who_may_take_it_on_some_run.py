"""The runs list's bulk forms ("With selected" and "With every run this filter matches") and
the boxes to tick rows with are drawn only for the actions the person may take on some run,
by the rule a bulk action is refused by (approvals.bulk.bulk_offered): a person who may only
view runs sees the rows and no form nor box, and the server still refuses what they send.
The bulk preview of such an action offers nothing to start."""

import re

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages
from django.urls import reverse
from guardian.shortcuts import assign_perm

from approvals.models import BulkJob
from audit.models import AuditRecord
from runs.models import Run, RunStatus, StepStatus, Workflow
from tests.factories import drawn, new_run, place

pytestmark = pytest.mark.django_db

# The actions of "With every run this filter matches" that need resume_run.
RESUMING = ["resume", "skip_event", "wake_timer", "reopen"]


@pytest.fixture
def run():
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.FAILED})


@pytest.fixture
def viewer(db):
    """May view every run and take no action: runs.view_runs alone."""
    user = User.objects.create_user("vera", password="pw")
    user.user_permissions.add(Permission.objects.get(codename="view_runs",
                                                     content_type__app_label="runs"))
    return user


@pytest.fixture
def resumer(run):
    """May view and resume the runs of test-orders, and nothing more."""
    user = User.objects.create_user("rhea", password="pw")
    workflow = Workflow.objects.get(name="test-orders")
    for codename in ("view_runs", "resume_run"):
        assign_perm(f"runs.{codename}", user, workflow)
    return user


def _options(html: str, select_id: str) -> list[str] | None:
    """The actions the select `select_id` offers, None when the page has no such select."""
    found = re.search(rf'<select name="action" id="{select_id}">(.*?)</select>', html, re.S)
    return None if found is None else re.findall(r'<option value="([^"]+)"', found.group(1))


def _offers(client, run) -> dict:
    page = client.get(reverse("console:runs")).content.decode()
    assert f'href="/runs/{run.pk}/"' in page  # the row is listed either way
    poll = re.search(r'hx-get="([^"]*\?rows=[^"]*)"', page).group(1).replace("&amp;", "&")
    rows = client.get(poll, HTTP_HX_REQUEST="true").content.decode()
    assert f'href="/runs/{run.pk}/"' in rows
    return {"selected": _options(page, "bulk-action"),
            "by_filter": _options(page, "bulk-filter-action"),
            "bulk_form": 'action="/runs/bulk/"' in page,
            "preview_form": 'action="/runs/bulk/preview/"' in page,
            "box_column": '<span class="muted">sel</span>' in page,
            "boxes": page.count('name="run"'), "boxes_polled": rows.count('name="run"')}


def test_a_person_who_may_only_view_runs_is_offered_no_bulk_form_nor_box(client_for, viewer,
                                                                        run):
    assert _offers(client_for(viewer), run) == {
        "selected": None, "by_filter": None, "bulk_form": False, "preview_form": False,
        "box_column": False, "boxes": 0, "boxes_polled": 0}


def test_an_operator_is_offered_both_forms_and_a_box_on_each_row(client_for, operator, run):
    offers = _offers(client_for(operator), run)
    assert offers["selected"] == ["resume", "reconcile", "terminate"]
    assert {"resume", "reconcile", "terminate", "retry_step"} <= set(offers["by_filter"])
    assert offers["bulk_form"] and offers["preview_form"] and offers["box_column"]
    assert offers["boxes"] == offers["boxes_polled"] == 1


def test_a_person_who_may_resume_runs_of_one_workflow_is_offered_only_resuming(client_for,
                                                                                resumer, run):
    assert _offers(client_for(resumer), run) == {
        "selected": ["resume"], "by_filter": RESUMING, "bulk_form": True, "preview_form": True,
        "box_column": True, "boxes": 1, "boxes_polled": 1}


def test_what_a_viewer_sends_anyway_is_still_refused(client_for, viewer, run):
    client = client_for(viewer)
    before = (Run.objects.get(pk=run.pk).audit_seq, AuditRecord.objects.count())
    response = client.post(reverse("console:bulk"), {
        "action": "terminate", "reason": "vendor fraud", "run": [str(run.pk)], **drawn(run)})
    assert response.status_code == 403
    assert "vera may not terminate any run (needs runs.terminate_run)" in \
        response.content.decode()
    assert [m.message for m in get_messages(response.wsgi_request)] == []

    preview = client.get(reverse("console:bulk_preview"),
                         {"status": "attention", "action": "terminate"}).content.decode()
    assert "Nothing to start: vera may not terminate any run (needs runs.terminate_run)." \
        in preview
    assert 'action="/runs/bulk/jobs/"' not in preview
    started = client.post(reverse("console:bulk_start"), {
        "status": "attention", "action": "terminate", "reason": "vendor fraud"})
    assert started.status_code == 403
    assert not BulkJob.objects.exists()
    assert (Run.objects.get(pk=run.pk).audit_seq, AuditRecord.objects.count()) == before
    assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION
