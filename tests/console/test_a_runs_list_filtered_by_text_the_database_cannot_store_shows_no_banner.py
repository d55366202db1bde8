"""The runs list filtered by a workflow name the database cannot store (a NUL character)
says the filter is invalid, with no dispatch banner to look up: never a server error."""

import pytest
from django.urls import reverse

from runs.machine import dispatch
from tests.factories import SYSTEM, new_run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("workflow", ["\x00", "test-orders\x00", "%00"])
def test_a_workflow_filter_with_a_nul_is_refused_without_a_banner(client_for, operator,
                                                                workflow):
    response = client_for(operator).get(reverse("console:runs"), {"workflow": workflow})
    assert response.status_code == 200
    if "\x00" in workflow:
        assert response.context["problems"]
        assert "dispatch_pauses" not in response.context
    else:
        assert list(response.context["dispatch_pauses"]) == []


def test_a_paused_workflow_still_shows_its_banner_on_its_list(client_for, operator):
    new_run()
    dispatch.pause_dispatch(workflow="test-orders", actor=SYSTEM, reason="vendor outage")
    response = client_for(operator).get(reverse("console:runs"), {"workflow": "test-orders"})
    assert response.status_code == 200
    assert [p.workflow_name for p in response.context["dispatch_pauses"]] == ["test-orders"]
