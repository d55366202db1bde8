"""A run a dispatch pause holds where it is (the claim's rule, dispatch.pause_holding) is named held
by the API's run state and by show_run, with the pause: the whole workflow's, or the one
towards the system its next step reaches. A queued run held so no longer reads as merely
waiting for a worker. A run no pause holds, and one waiting for a person, is not said to
be held."""

import io
import itertools
import json

import pytest
from django.core.management import call_command

from api.tokens import token_create
from runs.execution import executor
from runs.machine import dispatch
from runs.models import RunStatus
from tests.factories import SYSTEM, new_run

pytestmark = pytest.mark.django_db
_tokens = itertools.count(1)


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


def _pause(workflow, system=""):
    dispatch.pause_dispatch(workflow=workflow, system=system, actor=SYSTEM,
                            reason="ledger incident INC-7")
    dispatch.forget_cache()


def _api(client, run) -> dict:
    _, plaintext = token_create(name=f"reader-{next(_tokens)}", workflows=[run.workflow_name])
    response = client.get(f"/api/runs/{run.pk}", HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 200, response.content
    return response.json()


def _show(run, *args) -> str:
    out = io.StringIO()
    call_command("show_run", str(run.pk), *args, stdout=out)
    return out.getvalue()


def test_a_queued_run_of_a_paused_workflow_is_said_to_be_held(client, script):
    _pause("test-orders")
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") is None  # the pause holds it
    said = "held: dispatch paused by test: ledger incident INC-7"

    body = _api(client, run)
    assert body["state"] == "accepted"
    assert body["description"] == ("accepted; waiting for a worker to run step 1 of 4 "
                                   f"(fetch); {said}")
    assert body["dispatch_pause"]["system"] == ""
    assert (body["dispatch_pause"]["paused_by"], body["dispatch_pause"]["reason"]) == (
        "test", "ledger incident INC-7")
    assert said in _show(run)
    shown = json.loads(_show(run, "--json"))
    assert said in shown["description"]
    assert shown["dispatch_pause"]["reason"] == "ledger incident INC-7"

    dispatch.resume_dispatch(workflow="test-orders", actor=SYSTEM, reason="incident over")
    dispatch.forget_cache()
    body = _api(client, run)
    assert body["dispatch_pause"] is None and "held" not in body["description"]
    assert "held" not in _show(run)


def test_a_pause_towards_the_system_of_its_next_step_is_named_and_another_is_not(
        client, script):
    _pause("test-two-systems", system="ledger")
    held = new_run("test-two-systems")
    assert executor.advance_run(held.pk, worker="w1") is None
    body = _api(client, held)
    assert "held: dispatch towards ledger paused by test" in body["description"]
    assert body["dispatch_pause"]["system"] == "ledger"

    dispatch.resume_dispatch(workflow="test-two-systems", system="ledger", actor=SYSTEM,
                             reason="incident over")
    _pause("test-two-systems", system="tracker")
    free = new_run("test-two-systems", wake=False)
    body = _api(client, free)
    assert body["dispatch_pause"] is None and "held" not in body["description"]


def test_a_run_waiting_for_a_person_is_not_said_to_be_held(client, script):
    run = new_run("test-approval")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    _pause("test-approval")
    body = _api(client, run)
    assert body["waiting_for"] == "approval"
    assert body["dispatch_pause"] is None and "held" not in body["description"]


def test_a_step_held_before_its_first_try_is_said_to_wait_to_run_not_to_retry(client,
                                                                              script):
    _pause("test-two-systems", system="tracker")
    run = new_run("test-two-systems")
    # The ledger's step is made; the tracker's, next, is held before it is ever tried.
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING

    body = _api(client, run)
    assert body["current_step"]["name"] == "to-tracker"
    assert body["description"] == (
        "waiting to run step 2 of 2 (to-tracker); "
        "held: dispatch towards tracker paused by test: ledger incident INC-7")
    assert "retry" not in _show(run).split("steps")[0]
