"""The console's bulk preview of a filter that matches no run the person may see says that
nothing matches, naming the filter, and offers no Start button: a start would be refused
(approvals.bulk.start_bulk_job), so the page does not offer one. A filter that matches a
run still offers it."""

import html

import pytest
from django.urls import reverse

from approvals.models import BulkJob
from runs.models import RunStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture
def attention_run():
    # A run the operator may see and act on: only the filter leaves it out.
    return place(new_run(), status=RunStatus.ATTENTION)


def _preview(client, **filters) -> tuple[int, str]:
    response = client.get(reverse("console:bulk_preview"),
                          {"action": "terminate", **filters})
    return response.status_code, html.unescape(response.content.decode())


def test_a_filter_matching_no_run_shows_no_start_button_and_says_nothing_matches(
        client_for, operator, attention_run):
    status, page = _preview(client_for(operator), status="completed")
    assert status == 200
    assert "Nothing to start: the filter (status='completed') matches no run you may see." \
        in page
    assert reverse("console:bulk_start") not in page
    assert "runs in the background</button>" not in page
    assert 'name="reason"' not in page
    assert not BulkJob.objects.exists()


def test_a_filter_matching_a_run_still_offers_its_start(client_for, operator, attention_run):
    status, page = _preview(client_for(operator), status="attention")
    assert status == 200
    assert "Nothing to start" not in page
    assert f'action="{reverse("console:bulk_start")}"' in page
    assert "Terminate 1 runs in the background</button>" in page
    assert not BulkJob.objects.exists()
