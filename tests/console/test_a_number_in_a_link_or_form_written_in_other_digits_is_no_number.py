"""Ids, sequence numbers and offsets in a link or a form are read as ASCII digits only:
"²" or "٣" (digits to str.isdigit, not all of them to int) is no number, as a word is, and
the page answers as for any value that is no number, never with a server error."""

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from approvals.models import BulkJob
from audit.models import AuditRecord
from runs.machine.storable import whole_number
from runs.models import Run, RunStatus
from tests.console.test_agent_conversation_page import agent_run
from tests.factories import drawn, new_run, place

pytestmark = pytest.mark.django_db

OTHER_DIGITS = ["²", "٣", "1²", "①"]


@pytest.mark.parametrize("text", OTHER_DIGITS + ["", "-1", "+1", " 1", "1_000", "1.0",
                                                 "9" * 19])
def test_text_that_is_not_ascii_digits_or_too_long_is_no_whole_number(text):
    assert whole_number(text) is None


@pytest.mark.parametrize(("text", "number"), [("0", 0), ("007", 7), ("9" * 18, 10**18 - 1)])
def test_ascii_digits_are_a_whole_number(text, number):
    assert whole_number(text) == number


def test_fewer_digits_may_be_asked_for():
    assert whole_number("1234567", digits=6) is None
    assert whole_number("123456", digits=6) == 123456


@pytest.fixture
def run():
    return place(new_run(), status=RunStatus.ATTENTION)


def _pages(run):
    htmx = {"HTTP_HX_REQUEST": "true"}
    detail = reverse("console:run", args=[run.pk])
    return {
        "rows": (reverse("console:runs"), lambda d: {"rows": f"{d},{run.pk}"}, htmx),
        "runs_new": (reverse("console:runs"),
                     lambda d: {"new_since": "2020-01-01T00:00:00+00:00", "shown": d}, htmx),
        "attention_new": (reverse("console:attention"),
                          lambda d: {"new_since": "2020-01-01T00:00:00+00:00", "shown": d},
                          htmx),
        "detail": (detail, lambda d: {"before": d}, {}),
        "timeline": (detail, lambda d: {"before": d, "part": "timeline"}, htmx),
        "audit": (reverse("console:audit"), lambda d: {"before": d}, {}),
        "access": (reverse("console:audit"), lambda d: {"log": "access", "before": d}, {}),
        "turns": (detail, lambda d: {"turns_from": d}, {}),
    }


@pytest.mark.parametrize("digit", OTHER_DIGITS)
@pytest.mark.parametrize("page", ["rows", "runs_new", "attention_new", "detail", "timeline",
                                  "audit", "access", "turns"])
def test_a_page_given_other_digits_answers_as_for_no_number(client_for, auditor, operator,
                                                            run, page, digit):
    url, params, headers = _pages(run)[page]
    client = client_for(auditor if page == "access" else operator)
    response = client.get(url, params(digit), **headers)
    assert response.status_code == 200
    if page == "rows":
        assert response.context["ids"] == [run.pk]
    elif page in ("runs_new", "attention_new"):
        assert response.context["ids"] == []


@pytest.mark.parametrize("digit", OTHER_DIGITS)
def test_the_agent_conversation_given_other_digits_starts_at_the_first_turn(
        client_for, operator, digit):
    agent = agent_run(2)
    response = client_for(operator).get(reverse("console:run", args=[agent.pk]),
                                        {"turns_from": digit})
    assert response.status_code == 200
    assert "reading the invoice" in response.content.decode()


@pytest.mark.parametrize("digit", OTHER_DIGITS)
def test_an_action_given_other_digits_as_what_was_seen_is_refused_as_stale(
        client_for, operator, run, digit):
    response = client_for(operator).post(
        reverse("console:action", args=[run.pk, "terminate"]),
        {"reason": "customer cancelled", "seen": digit}, follow=True)
    assert response.status_code == 200
    assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION
    assert not AuditRecord.objects.filter(run=run, action="terminated").exists()


@pytest.mark.parametrize("digit", OTHER_DIGITS)
def test_a_bulk_action_given_other_digits_is_refused_and_acts_on_no_run(
        client_for, operator, run, digit):
    # A selection holding a value that is no id is refused as a whole (with a message),
    # the runs named in ASCII digits beside it too.
    other = place(new_run(), status=RunStatus.ATTENTION)
    response = client_for(operator).post(reverse("console:bulk"), {
        "action": "terminate", "reason": "cleanup", "run": [digit, str(run.pk)], **drawn(run)})
    assert response.status_code == 302
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "Terminate was not done: 1 of the 2 runs given is not a run id (a whole number from 1, "
        "in the digits 0-9); nothing was done."]
    assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION
    assert Run.objects.get(pk=other.pk).status == RunStatus.ATTENTION
    assert not BulkJob.objects.exists()
