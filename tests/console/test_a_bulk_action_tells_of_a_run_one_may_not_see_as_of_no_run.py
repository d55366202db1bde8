"""A bulk action from the runs list always answers with a message. It tells of a run the
person may not act on exactly as of an id no run has ("no run you may act on has the id N"),
so that whoever is limited to one workflow cannot learn from it that a run of another
exists. A selection holding a value that is no run id (runs.machine.storable.whole_number),
or no run at all, is refused as a whole: nothing is done to any run of it."""

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.factories import drawn, new_run, place

pytestmark = pytest.mark.django_db

MISSING = 999999


def _messages(response) -> list[tuple[str, str]]:
    return [(m.level_tag, m.message) for m in get_messages(response.wsgi_request)]


def _state(*runs):
    return [(r.status, r.audit_seq) for r in Run.objects.filter(
        pk__in=[run.pk for run in runs]).order_by("pk")], AuditRecord.objects.count()


@pytest.fixture
def foreign():
    """A run of a workflow the finance operator may neither see nor act on."""
    run = new_run("customer-onboarding", email="b@example.com", name="B", plan="free")
    return place(run, status=RunStatus.ATTENTION)


def _terminate(client, *ids):
    return client.post(reverse("console:bulk"), {
        "action": "terminate", "reason": "vendor fraud", "run": [str(i) for i in ids],
        **drawn(*[i for i in ids if str(i).isdigit()])})


def test_a_run_one_may_not_see_is_told_of_as_a_run_that_does_not_exist(
        client_for, finance_operator, foreign):
    assert not Run.objects.filter(pk=MISSING).exists()
    before = _state(foreign)
    answers = {}
    for run_id in (MISSING, foreign.pk):
        # A client each: one's messages, unread, would be shown again with the next's.
        client = Client()
        client.force_login(finance_operator)
        response = _terminate(client, run_id)
        assert response.status_code == 302
        answers[run_id] = [(level, message.replace(str(run_id), "N"))
                           for level, message in _messages(response)]
    assert answers[MISSING] == answers[foreign.pk] == [
        ("error", "Terminate not done: no run you may act on has the id N.")]
    assert _state(foreign) == before


def test_both_in_one_selection_are_named_together_and_the_rest_is_done(
        client_for, finance_operator, foreign, stuck_run):
    response = _terminate(client_for(finance_operator), MISSING, foreign.pk, stuck_run.pk)
    shown = _messages(response)
    assert shown == [
        ("success", f"Terminate done for runs {stuck_run.pk}."),
        ("error", f"Terminate not done: no run you may act on has the ids "
                  f"{', '.join(map(str, sorted([MISSING, foreign.pk])))}.")]
    assert not any("permission" in message for _, message in shown)
    assert Run.objects.get(pk=foreign.pk).status == RunStatus.ATTENTION
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.TERMINATED


# RUN: the id of a run the operator may act on, which is left alone with the rest.
@pytest.mark.parametrize("ids, problem", [
    (["999999", "abc"], "1 of the 2 runs given is not a run id"),
    (["RUN", "abc"], "1 of the 2 runs given is not a run id"),
    (["٣", "RUN", "²"], "2 of the 3 runs given are not a run id"),
    (["0", "RUN"], "1 of the 2 runs given is not a run id"),
    ([], "no run was selected"),
    (["RUN"] * 501, "501 runs were given, at most 500 at once"),
])
def test_a_selection_that_is_not_run_ids_is_refused_as_a_whole(client_for, operator,
                                                                stuck_run, ids, problem):
    before = _state(stuck_run)
    response = client_for(operator).post(reverse("console:bulk"), {
        "action": "terminate", "reason": "vendor fraud",
        "run": [str(stuck_run.pk) if i == "RUN" else i for i in ids], **drawn(stuck_run)})
    assert response.status_code == 302
    assert _messages(response) == [
        ("error", f"Terminate was not done: {problem} (a whole number from 1, in the digits "
                  "0-9); nothing was done." if "run id" in problem else
         f"Terminate was not done: {problem}; nothing was done.")]
    assert _state(stuck_run) == before
