"""The second person asked to approve a re-run from a later step read "Effects that already
stand (from fetch on ...) and would be sent again with a new key", listing create-task, a
step before the one asked for, which the re-run leaves as it is: their page told the effects
from the first step a re-run could start at, not from the step in the request. They are now
told the effects from the step asked for; the asker's dialog, before a step is chosen,
still tells them from the first step it offers."""

import html
import re

import pytest
from django.urls import reverse

from approvals import four_eyes
from runs.models import RunStatus, Step
from runs.operator.actions import ACTIONS
from tests.factories import advance_once, new_run

pytestmark = pytest.mark.django_db


def _follows(response) -> str:
    assert response.status_code == 200
    main = response.content.decode().split("<main", 1)[1]
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", main)).split())
    return text.split("What the action will do", 1)[1].split("Your decision", 1)[0]


def _completed_run():
    run = new_run()
    while run.status != RunStatus.COMPLETED:
        run = advance_once(run)
    return run


def test_a_re_run_from_a_later_step_lists_only_the_effects_it_sends_again(operators, client):
    olga, omar = operators
    run = _completed_run()
    request, _ = four_eyes.request_operator_action(
        run, action="rerun_from_step", requested_by=olga, reason="post it again",
        params={"step": "post-ledger"})
    client.force_login(omar)
    follows = _follows(client.get(reverse("approvals:detail", kwargs={"pk": request.pk})))
    assert "from post-ledger on; the step asked for" in follows
    assert "post-ledger: succeeded" in follows
    assert "create-task: succeeded" not in follows


def test_the_askers_dialog_still_tells_them_from_the_first_step_offered(operators):
    run = _completed_run()
    steps = list(Step.objects.filter(run=run).order_by("position"))
    lines = " ".join(ACTIONS["rerun_from_step"].explain(run, steps))
    assert "from fetch on; a later chosen step leaves out the earlier ones" in lines
    assert "create-task: succeeded" in lines and "post-ledger: succeeded" in lines
