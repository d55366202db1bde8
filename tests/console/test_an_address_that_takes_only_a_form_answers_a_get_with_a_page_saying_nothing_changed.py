"""The console's addresses that take only a form (an action, a bulk action, a saved view, a
pause) answer any other method with 405 and a page saying nothing was changed, and for a
run's action where the run's actions are; Django's require_POST answered a blank page. A
person reaches them by GET from history, a bookmark or a link kept from signing in."""

import pytest
from django.test import Client
from django.urls import reverse

from audit.models import AuditRecord
from runs.models import Run, RunStatus

pytestmark = pytest.mark.django_db


def _addresses(run) -> list[str]:
    return [reverse("console:action", args=[run.pk, name])
            for name in ("terminate", "resume", "reconcile", "retry_step")] + [
        reverse("console:bulk"), reverse("console:bulk_start"), reverse("console:save_view"),
        reverse("console:delete_view", args=[1]), reverse("console:bulk_cancel", args=[1]),
        reverse("console:schedule_pause", args=["test-scheduled", "every-minute"]),
        reverse("console:dispatch_pause", args=["test-orders"])]


@pytest.mark.parametrize("who", ["operator", "anonymous"])
def test_a_get_is_answered_405_with_a_page_and_changes_nothing(client_for, operator,
                                                               stuck_run, who):
    client = client_for(operator) if who == "operator" else Client()
    records = AuditRecord.objects.count()
    for address in _addresses(stuck_run):
        for method in ("get", "put", "delete"):
            response = getattr(client, method)(address)
            assert response.status_code == 405, (method, address)
            assert response["Allow"] == "POST"
            body = response.content.decode()
            assert "<h1>Nothing was changed</h1>" in body, (method, address)
    assert AuditRecord.objects.count() == records
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.ATTENTION


def test_a_runs_action_page_leads_to_the_run(client_for, operator, stuck_run):
    body = client_for(operator).get(
        reverse("console:action", args=[stuck_run.pk, "terminate"])).content.decode()
    assert f'<a href="{reverse("console:run", args=[stuck_run.pk])}">its page</a>' in body
