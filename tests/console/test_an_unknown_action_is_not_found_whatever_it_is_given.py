"""An action the console does not know is not found (404) before anything else is read:
whatever the form holds (text the database cannot store, a step, a stale page), and for a
run that does not exist too."""

import pytest
from django.urls import reverse

from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("form", [{"reason": "a\x00b"}, {"reason": "fine", "seen": "x"},
                                  {}, {"step": "create-task", "mode": "nonsense"}])
@pytest.mark.parametrize("htmx", [False, True])
def test_an_unknown_action_is_not_found(client_for, operator, form, htmx):
    run = place(new_run(), status=RunStatus.ATTENTION)
    records = AuditRecord.objects.count()
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = client_for(operator).post(reverse("console:action", args=[run.pk, "bogus"]),
                                         form, **headers)
    assert response.status_code == 404
    assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION
    assert AuditRecord.objects.count() == records


def test_an_unknown_action_on_no_run_is_not_found(client_for, operator):
    response = client_for(operator).post(reverse("console:action", args=[999999, "bogus"]),
                                         {"reason": "a\x00b"})
    assert response.status_code == 404
