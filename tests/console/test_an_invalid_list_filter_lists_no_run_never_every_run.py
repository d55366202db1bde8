"""An invalid filter of the runs list is refused, never read as no filter (every run the
operator may see, on which they might act): the page lists no run, no archived run, no
"N new" bar and no next page, keeps the form, and says which field is wrong and why in the
words the bulk preview uses (RunFilterForm.problems). The "N new" poll of such a filter
counts nothing and stops. The CLI and the API refuse a bad filter by its name too."""

import html
import io
import re
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from api.tokens import token_create
from console import views
from runs.models import RunStatus
from runs.reads import selectors
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

INVALID = [
    ({"status": "bogus"}, "status: no status 'bogus'; the statuses are: queued, running,"),
    ({"sort": "-nonsense"}, "sort (Sort by): Select a valid choice."),
    ({"since": "yesterday"}, "since (From): Enter a valid date/time."),
    ({"since": "2026-01-02T00:00", "until": "2026-01-01T00:00"},
     "until (Until): The time range is empty: From must be before Until."),
    ({"period": "1h", "since": "2026-01-02T00:00"},
     'period (In the last): Choose either a period ("In the last") or dates'),
]


@pytest.fixture
def runs(monkeypatch):
    """Three runs in attention of two workflows: more than a page, so that a page of them
    would link to the next."""
    monkeypatch.setattr(selectors, "PAGE_SIZE", 2)
    return [place(new_run(workflow), status=RunStatus.ATTENTION)
            for workflow in ("test-orders", "test-orders", "test-saga")]


def _body(response) -> str:
    return html.unescape(response.content.decode())


def _shows_no_run(body: str, runs) -> None:
    for run in runs:
        assert f"#{run.pk}<" not in body and f"/runs/{run.pk}/" not in body
        assert run.business_key not in body
    assert "after=" not in body  # no next page
    assert "new_since=" not in body  # no "N new" bar polling


@pytest.mark.parametrize("params, named", INVALID)
def test_an_invalid_filter_lists_no_run_and_names_the_field(client_for, operator, runs,
                                                            params, named):
    # With the search of a run's id: the run is not listed, the archive not searched.
    response = client_for(operator).get(reverse("console:runs"),
                                        {**params, "q": str(runs[0].pk)})
    body = _body(response)
    assert response.status_code == 200
    assert "No runs are shown: the filter is not valid." in body
    assert f"Invalid filter field {named}" in body
    _shows_no_run(body, runs)
    assert not response.context.get("rows") and not response.context.get("archived")
    # The form stays, with what was typed, to be corrected; nothing offers to act.
    assert 'aria-label="Filter runs"' in body
    assert f'name="q" value="{runs[0].pk}"' in body
    assert f'action="{reverse("console:bulk")}"' not in body
    assert f'action="{reverse("console:bulk_preview")}"' not in body


def test_each_invalid_field_is_named_in_one_message(client_for, operator, runs):
    response = client_for(operator).get(reverse("console:runs"),
                                        {"status": "bogus", "sort": "-nonsense"})
    body = _body(response)
    assert body.count('role="alert"') == 1
    assert "Invalid filter field status: no status 'bogus'" in body
    assert "Invalid filter field sort (Sort by):" in body
    _shows_no_run(body, runs)


def test_the_archive_is_not_searched_with_an_invalid_filter(client_for, operator, runs,
                                                            monkeypatch):
    searched = []
    monkeypatch.setattr(views.archived, "archived_matching",
                        lambda q, **kw: searched.append(q) or [])
    client = client_for(operator)
    client.get(reverse("console:runs"), {"q": "order-", "status": "bogus"})
    assert searched == []
    client.get(reverse("console:runs"), {"q": "order-", "status": "attention"})
    assert searched == ["order-"]


def test_the_message_escapes_what_was_typed(client_for, operator, runs):
    response = client_for(operator).get(reverse("console:runs"),
                                        {"status": "<script>alert(1)</script>"})
    raw = response.content.decode()
    assert response.status_code == 200
    assert "<script>alert(1)</script>" not in raw
    assert "no status &#x27;&lt;script&gt;alert(1)&lt;/script&gt;&#x27;" in raw


def test_the_new_runs_poll_of_an_invalid_filter_counts_nothing_and_stops(client_for,
                                                                         operator, runs):
    before = (timezone.now() - timedelta(minutes=1)).isoformat()
    response = client_for(operator).get(
        reverse("console:runs"), {"status": "bogus", "new_since": before},
        HTTP_HX_REQUEST="true")
    body = _body(response)
    # 200: htmx swaps the bar (it swaps no 4xx answer), and the bar it gets has no trigger.
    assert response.status_code == 200
    assert 'id="new-runs"' in body
    assert "new — show" not in body and "hx-trigger" not in body and "hx-get" not in body
    _shows_no_run(body, runs)
    # A valid filter's poll still counts what started matching after the page.
    counted = client_for(operator).get(
        reverse("console:runs"), {"status": "attention", "new_since": before},
        HTTP_HX_REQUEST="true")
    assert "3 new — show" in counted.content.decode()


def test_a_valid_filter_still_lists_the_runs_it_matches(client_for, operator, runs):
    queued = new_run()
    response = client_for(operator).get(reverse("console:runs"),
                                        {"status": "attention", "workflow": "test-orders"})
    body = _body(response)
    assert response.status_code == 200
    assert "Invalid filter field" not in body and "No runs are shown" not in body
    shown = set(int(pk) for pk in re.findall(r"#(\d+)<", body))
    assert shown == {runs[0].pk, runs[1].pk}
    assert runs[0].business_key in body and queued.business_key not in body
    assert "new_since=" in body
    # More runs than a page: the next page is linked.
    everything = _body(client_for(operator).get(reverse("console:runs")))
    assert "after=" in everything


def test_the_cli_and_the_api_refuse_a_bad_filter_by_its_name(client, operator, runs):
    with pytest.raises(CommandError, match="--status: no status 'bogus'; the statuses are: "):
        call_command("list_runs", "--status", "bogus", stdout=io.StringIO())
    _, plaintext = token_create(name="erp", workflows=["test-orders"], acting_user=operator)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}
    for params, field in (({"status": "bogus"}, "status"), ({"attention": "maybe"}, "attention"),
                          ({"since": "2026-01-01"}, "since")):
        refused = client.get("/api/runs", params, **auth)
        assert refused.status_code == 422, params
        body = refused.json()
        assert body["error"] == "invalid_request"
        assert ["query", field] in [e["loc"] for e in body["errors"]], body
        assert "runs" not in body
