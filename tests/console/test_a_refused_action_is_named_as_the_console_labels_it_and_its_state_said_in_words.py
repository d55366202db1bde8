"""An action the run's state refuses is told, at the console, the API and the command line
alike, with the action named as the console's button labels it (transitions.LABELS) and the
run's state in words, its id, workflow and business key kept: never the transition's
internal name ("wake_timer") and a bare state, which the table's own check says to code.
The console and the command line say the refusal alone, as it names the action already, not
"Wake now was not done: Wake now is not possible ..."; a reason missing is told as "Terminate
needs a reason" at every door, not with the internal name ("terminate needs a reason")."""

import io

import pytest
from django.contrib.messages import get_messages
from django.core.management import CommandError, call_command
from django.test import Client

from api.tokens import token_create
from runs.models import AttentionReason, Run, RunStatus, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def _console(user, run: Run) -> str:
    client = Client()
    client.force_login(user)
    response = client.post(f"/runs/{run.pk}/wake_timer/",
                           {"reason": "INC-7", "seen": str(run.audit_seq)})
    assert response.status_code == 302, response.content
    said = [str(m) for m in get_messages(response.wsgi_request)]
    assert len(said) == 1, said
    return said[0]


def _api(user, run: Run) -> str:
    _, plaintext = token_create(name="erp", workflows=["test-orders"], acting_user=user)
    response = Client().post(f"/api/runs/{run.pk}/actions/wake_timer", {"reason": "INC-7"},
                             content_type="application/json",
                             HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 409, response.content
    return response.json()["detail"]


def _cli(user, run: Run) -> str:
    with pytest.raises(CommandError) as refused:
        call_command("run_action", str(run.pk), "wake_timer", "--user", user.username,
                     "--reason", "INC-7", stdout=io.StringIO())
    return str(refused.value)


def _listed(user, run: Run) -> str:
    """What run_action without an action lists against wake_timer."""
    out = io.StringIO()
    call_command("run_action", str(run.pk), "--user", user.username, stdout=out)
    return dict(line.split(None, 1) for line in out.getvalue().splitlines())["wake_timer"]


def test_a_run_in_attention_refuses_wake_now_in_the_same_words_at_every_door(operator):
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.FAILED},
                attention_reason=AttentionReason.PERMANENT_ERROR)
    said = {door: ask(operator, run) for door, ask in
            (("console", _console), ("api", _api), ("cli", _cli))}
    expected = (f"Wake now is not possible for run {run.pk} (test-orders {run.business_key}): "
                "it is waiting for a person (attention: permanent error)")
    assert said == {"console": expected, "api": expected, "cli": expected}
    assert not any("wake_timer" in words for words in said.values())
    assert _listed(operator, run) == f"-: {expected}"
    # Nothing was written by any door.
    after = Run.objects.get(pk=run.pk)
    assert (after.status, after.audit_seq) == (RunStatus.ATTENTION, run.audit_seq)


def test_a_finished_run_names_what_its_state_still_allows(operator):
    run = place(new_run(), status=RunStatus.COMPLETED)
    for ask in (_console, _api, _cli):
        said = ask(operator, run)
        assert said == (f"Wake now is not possible for run {run.pk} (test-orders "
                        f"{run.business_key}): it has completed (completed); in that state "
                        "only Re-run from step can be taken"), ask
        assert "wake_timer" not in said and "not allowed" not in said
    assert Run.objects.get(pk=run.pk).audit_seq == run.audit_seq


def test_an_action_without_a_reason_is_refused_naming_it_as_its_button_does(operator):
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.FAILED},
                attention_reason=AttentionReason.PERMANENT_ERROR)
    client = Client()
    client.force_login(operator)
    console = client.post(f"/runs/{run.pk}/terminate/", {"reason": "  ",
                                                           "seen": str(run.audit_seq)})
    said = {"console": [str(m) for m in get_messages(console.wsgi_request)]}
    _, plaintext = token_create(name="erp", workflows=["test-orders"], acting_user=operator)
    api = Client().post(f"/api/runs/{run.pk}/actions/terminate", {"reason": "  "},
                        content_type="application/json",
                        HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    said["api"] = [api.json()["detail"]]
    with pytest.raises(CommandError) as refused:
        call_command("run_action", str(run.pk), "terminate", "--user", operator.username,
                     "--reason", "  ", stdout=io.StringIO())
    said["cli"] = [str(refused.value)]
    assert said == {door: ["Terminate needs a reason"] for door in ("console", "api", "cli")}
    assert Run.objects.get(pk=run.pk).audit_seq == run.audit_seq
