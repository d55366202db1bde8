"""A bulk action whose filter matches runs the person may see but none they may take the
action on (they may on other workflows' runs only) would start a job that refuses every run.
Its preview offers nothing to start and says why; a start sent anyway, from the console's
form (its count 0) or over the API, is refused naming why, and no job is made
(approvals.bulk.nothing_to_start, the one rule of the preview and of every start)."""

import html

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages
from django.urls import reverse
from guardian.shortcuts import assign_perm

from api.tokens import token_create
from approvals.models import BulkJob, BulkOutcome
from audit.models import AuditRecord
from runs.models import Run, RunStatus, Workflow
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

WHY = ("no run the filter (status='attention', workflow='test-orders') matches is one you "
       "may terminate: none of the 1 it matches is of a workflow where you have "
       "runs.terminate_run")


@pytest.fixture
def orders_run():
    return place(new_run(), status=RunStatus.ATTENTION)


@pytest.fixture
def onboarding_run():
    return place(new_run("customer-onboarding", email="b@example.com", name="B", plan="free"),
                 status=RunStatus.ATTENTION)


@pytest.fixture
def elsewhere(orders_run, onboarding_run):
    """May view every run, and terminate the runs of customer-onboarding only."""
    user = User.objects.create_user("ella", password="pw")
    user.user_permissions.add(Permission.objects.get(codename="view_runs",
                                                     content_type__app_label="runs"))
    assign_perm("runs.terminate_run", user,
                Workflow.objects.get(name="customer-onboarding"))
    return user


def _preview(client, **filters) -> str:
    response = client.get(reverse("console:bulk_preview"), {"action": "terminate", **filters})
    assert response.status_code == 200
    return html.unescape(response.content.decode())


def _untouched(run: Run, before: tuple) -> None:
    assert not BulkJob.objects.exists()
    assert not BulkOutcome.objects.exists()
    assert (AuditRecord.objects.count(), Run.objects.get(pk=run.pk).status) == before


def test_the_preview_offers_no_start_and_says_no_matching_run_is_one_they_may_act_on(
        client_for, elsewhere, orders_run):
    page = _preview(client_for(elsewhere), status="attention", workflow="test-orders")
    assert "<strong>1</strong> runs match." in page
    assert f"Nothing to start: {WHY}." in page
    assert reverse("console:bulk_start") not in page
    assert "runs in the background</button>" not in page
    assert 'name="reason"' not in page


def test_the_same_person_is_offered_the_start_where_the_filter_matches_a_run_they_may_act_on(
        client_for, elsewhere, onboarding_run):
    page = _preview(client_for(elsewhere), status="attention",
                    workflow="customer-onboarding")
    assert "Nothing to start" not in page
    assert "Terminate 1 runs in the background</button>" in page


def test_a_start_with_the_count_0_is_refused_with_a_message_and_no_job(
        client_for, elsewhere, orders_run, django_capture_on_commit_callbacks):
    before = (AuditRecord.objects.count(), RunStatus.ATTENTION)
    with django_capture_on_commit_callbacks() as hints:
        response = client_for(elsewhere).post(reverse("console:bulk_start"), {
            "status": "attention", "workflow": "test-orders", "action": "terminate",
            "reason": "tenant left", "previewed": "0",
            "query": "status=attention&workflow=test-orders"})
    assert response.status_code == 302
    assert response["Location"] == \
        f"{reverse('console:bulk_preview')}?status=attention&workflow=test-orders&action=terminate"
    assert [m.message for m in get_messages(response.wsgi_request)] == [
        f"Nothing was started: {WHY}"]
    assert hints == []
    _untouched(orders_run, before)


def test_the_api_refuses_it_with_400_naming_why(client, elsewhere, orders_run,
                                                 django_capture_on_commit_callbacks):
    _, plaintext = token_create(name="erp", workflows=["test-orders"], acting_user=elsewhere)
    before = (AuditRecord.objects.count(), RunStatus.ATTENTION)
    with django_capture_on_commit_callbacks() as hints:
        response = client.post("/api/bulk", {
            "action": "terminate", "reason": "tenant left",
            "filters": {"workflow": "test-orders", "status": "attention"}},
            content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid_bulk_job"
    assert response.json()["detail"] == WHY
    assert hints == []
    _untouched(orders_run, before)
