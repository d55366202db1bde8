"""A run's page polls its live part while the run is not final. The poll sends back the
version of the part it shows, and while nothing it shows has changed it is answered 204,
which htmx does not swap: what the person opened in it (a recovery contract, a record's
data, older timeline entries) stays open. Swapped every 5 s, it closed them all. The poll
keeps the page's own older page of the timeline, which it put back to the newest. Once the
run changes, the poll draws it as it is now."""

import re
from html import unescape

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import Run, RunStatus
from tests.console.test_timeline import retried_for_days

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def _poll_url(body: str) -> str:
    found = re.search(r'<div id="run-live" hx-get="([^"]+)" hx-trigger="every 5s"', body)
    assert found, "the live part does not poll"
    return unescape(found.group(1))


def test_an_unchanged_run_is_answered_204_and_a_changed_one_drawn_anew(client_for, operator,
                                                                        stuck_run):
    client = client_for(operator)
    page = client.get(reverse("console:run", args=[stuck_run.pk])).content.decode()
    poll = _poll_url(page)
    assert "part=live" in poll and "shown=" in poll
    for _ in range(2):
        unchanged = client.get(poll, **HTMX)
        assert unchanged.status_code == 204 and unchanged.content == b""

    other = Client()
    other.force_login(operator)
    done = other.post(reverse("console:action", args=[stuck_run.pk, "terminate"]),
                      {"seen": str(stuck_run.audit_seq), "reason": "customer cancelled"})
    assert done.status_code == 302
    changed = client.get(poll, **HTMX)
    assert changed.status_code == 200
    body = changed.content.decode()
    assert 'class="badge s-terminated"' in body and "customer cancelled" in body
    assert "hx-trigger" not in body.split("</h1>")[0]  # final: the poll stops


def test_a_poll_without_the_version_or_with_another_draws_the_part(client_for, operator,
                                                                  stuck_run):
    client = client_for(operator)
    live = reverse("console:run", args=[stuck_run.pk])
    for query in ("?part=live", "?part=live&shown=", "?part=live&shown=0123abc",
                  "?part=live&shown=%00"):
        response = client.get(live + query, **HTMX)
        assert response.status_code == 200, query
        assert f"Run #{stuck_run.pk}" in response.content.decode()


def test_the_part_drawn_after_an_htmx_action_polls_with_its_own_version(client_for, operator,
                                                                       stuck_run):
    client = client_for(operator)
    acted = client.post(reverse("console:action", args=[stuck_run.pk, "retry_step"]),
                        {"seen": str(stuck_run.audit_seq), "step": "create-task",
                         "reason": "tracker fixed"}, **HTMX)
    assert acted.status_code == 200
    assert client.get(_poll_url(acted.content.decode()), **HTMX).status_code == 204


def test_the_poll_of_an_older_timeline_page_keeps_that_page(client_for, operator, stuck_run):
    run = retried_for_days(stuck_run, 60)
    client = client_for(operator)
    older = run.audit_seq - 30
    page = client.get(reverse("console:run", args=[run.pk]), {"before": older}).content.decode()
    poll = _poll_url(page)
    assert f"before={older}" in poll
    assert client.get(poll, **HTMX).status_code == 204
    Run.objects.filter(pk=run.pk).update(status=RunStatus.QUEUED)  # the run moved on
    redrawn = client.get(poll, **HTMX)
    assert redrawn.status_code == 200
    assert redrawn.context["timeline"].before == older
    assert f">{older - 1}</td>" in redrawn.content.decode()
    assert f">{run.audit_seq}</td>" not in redrawn.content.decode()
