"""Re-run from a chosen step: that step and the later ones are sent again as a new generation
with new keys, the earlier steps' results are reused, the effects that stand are named
first, and a high-impact effect standing needs a second person."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals.decisions import decide
from approvals.models import ApprovalRequest
from approvals.operator_actions import act
from approvals.schedule import withdraw_stale_requests
from audit.chain import Actor
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import PermanentError, SecondPersonRequired, TransitionNotAllowed
from runs.machine.keys import compensation_key, step_key
from runs.models import Run, RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from tests.factories import SYSTEM, new_run, step

pytestmark = pytest.mark.django_db


def _calls(script, name):
    return [(key, attempt) for s, key, attempt in script.calls if s == name]


def _completed(workflow="test-saga"):
    run = new_run(workflow)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    return run


def test_generation_zero_keeps_the_keys_as_they_were_and_a_later_one_changes_them():
    import hashlib

    old = hashlib.sha256(b"wf:bk:send:v2").hexdigest()
    assert step_key("wf", "bk", "send", 2) == old == step_key("wf", "bk", "send", 2, 0)
    assert step_key("wf", "bk", "send", 2, 1) == hashlib.sha256(b"wf:bk:send:v2:g1").hexdigest()
    assert compensation_key("wf", "bk", "send", 2, 1) == \
        hashlib.sha256(b"wf:bk:send:compensate:v2:g1").hexdigest()
    assert compensation_key("wf", "bk", "send", 2) == \
        hashlib.sha256(b"wf:bk:send:compensate:v2").hexdigest()


def test_a_succeeded_low_impact_step_rerun_sends_once_with_a_new_key(script):
    run = _completed()
    old_key = step(run, "book-shipment").idempotency_key
    old_ref = step(run, "book-shipment").remote_ref
    assert len(script.effects) == 3
    # The dialog names the effect that stands before anyone confirms.
    explanation = " ".join(ACTIONS["rerun_from_step"].explain(
        Run.objects.get(pk=run.pk), list(run.steps.order_by("position"))))
    assert "reserve-stock: succeeded" in explanation  # the first step it could start at
    # test-saga declares undos for two of them; a completed run is not compensated.
    assert "declares a compensation for reserve-stock, charge-card" in explanation

    transitions.rerun_from_step(run.pk, step_name="book-shipment", actor=SYSTEM,
                                reason="carrier lost the parcel")
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and run.generation == 1
    assert run.steps_done == 2 and run.finished_at is None
    rerun = step(run, "book-shipment")
    assert rerun.generation == 1 and rerun.status == StepStatus.PENDING
    assert rerun.idempotency_key == step_key("test-saga", run.business_key, "book-shipment",
                                             1, 1) != old_key
    assert step(run, "charge-card").generation == 0  # reused, key unchanged

    assert executor.advance_run(run.pk, worker="w2") == RunStatus.COMPLETED
    # Two objects at the receiver, under two keys: exactly one new send.
    assert [k for k, _ in _calls(script, "book-shipment")] == [old_key, rerun.idempotency_key]
    assert len(script.effects) == 4 and script.effects[old_key] == old_ref
    assert step(run, "book-shipment").remote_ref == script.effects[rerun.idempotency_key]
    # The earlier steps were not sent again: their results were reused.
    assert len(_calls(script, "reserve-stock")) == 1 and len(_calls(script, "charge-card")) == 1

    record = AuditRecord.objects.get(run=run, action="rerun_from_step")
    assert record.step_name == "book-shipment" and record.reason == "carrier lost the parcel"
    assert record.before["generation"] == 0 and record.after["generation"] == 1
    assert record.data["standing"] == [
        f"book-shipment: succeeded (low impact, key {old_key[:12]}..., ref {old_ref})"]
    assert record.data["previous_steps"][0]["key"] == old_key
    assert record.data["previous_steps"][0]["status"] == StepStatus.SUCCEEDED


def test_a_high_impact_effect_standing_needs_a_second_person(script):
    run = _completed("test-orders")
    with pytest.raises(SecondPersonRequired, match="post-ledger"):
        transitions.rerun_from_step(run.pk, step_name="create-task", actor=SYSTEM,
                                    reason="again")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED and run.generation == 0
    assert not AuditRecord.objects.filter(run=run, action="rerun_from_step").exists()
    with pytest.raises(SecondPersonRequired, match="other than"):
        transitions.rerun_from_step(run.pk, step_name="post-ledger", actor=SYSTEM,
                                    reason="again", approved_by=SYSTEM)
    transitions.rerun_from_step(run.pk, step_name="post-ledger", actor=SYSTEM, reason="again",
                                approved_by=Actor.system("second"))
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert len(_calls(script, "post-ledger")) == 2 and len(_calls(script, "create-task")) == 1
    assert AuditRecord.objects.get(run=run, action="rerun_from_step").data["approved_by"] \
        == "second"


def test_through_the_one_action_function_it_opens_an_approval_request(script):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get(name="operators"))
    run = _completed("test-orders")
    outcome = act("rerun_from_step", run.pk, user=olga,
                  given=ActionInput(reason="ledger lost it", step="post-ledger"))
    assert not outcome.done and outcome.approval is not None
    request = ApprovalRequest.objects.get(pk=outcome.approval.pk)
    assert request.status == "pending"
    assert Run.objects.get(pk=run.pk).generation == 0
    # The run's history names who asked, and why, not the approvals system.
    opened = AuditRecord.objects.get(run=run, action="approval_opened")
    assert (opened.actor_kind, opened.actor_label, opened.actor_user_id) == \
        ("user", "olga", olga.pk)
    assert opened.reason == "ledger lost it" and opened.data["operator_action"] == \
        "rerun_from_step"
    # The run is final, and re-run starts from a final run: the sweep leaves it waiting.
    assert withdraw_stale_requests() == 0
    request.refresh_from_db()
    assert request.status == "pending"
    assert len(_calls(script, "post-ledger")) == 1
    # Another person approves: the re-run happens then, of the step asked for, both named.
    carl = User.objects.create_user("carl")
    carl.groups.add(Group.objects.get(name="operators"))
    decide(request.pk, user=carl, approved=True, decision_id=uuid.uuid4())
    run.refresh_from_db()
    assert run.generation == 1 and step(run, "post-ledger").generation == 1
    assert step(run, "create-task").generation == 0
    record = AuditRecord.objects.get(run=run, action="rerun_from_step")
    assert record.actor_label.startswith("olga") and "carl" in record.data["approved_by"]
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert len(_calls(script, "post-ledger")) == 2


def test_refused_where_it_cannot_succeed(script):
    running = new_run("test-saga")
    with pytest.raises(TransitionNotAllowed, match="Re-run from step is not possible"):
        transitions.rerun_from_step(running.pk, step_name="book-shipment", actor=SYSTEM,
                                    reason="x")
    script.plan["charge-card"] = [PermanentError("card declined")]
    failed = new_run("test-orders")  # fails nothing; use a run stopped mid-way instead
    script.plan["create-task"] = [PermanentError("tracker says no")]
    assert executor.advance_run(failed.pk, worker="w1") == RunStatus.ATTENTION
    with pytest.raises(TransitionNotAllowed, match="earlier steps create-task"):
        transitions.rerun_from_step(failed.pk, step_name="post-ledger", actor=SYSTEM,
                                    reason="x")
    with pytest.raises(Exception, match="needs a reason"):
        transitions.rerun_from_step(failed.pk, step_name="create-task", actor=SYSTEM,
                                    reason=" ")
    # From the failed step itself it can: nothing high-impact stands there.
    transitions.rerun_from_step(failed.pk, step_name="create-task", actor=SYSTEM,
                                reason="tracker fixed")
    assert executor.advance_run(failed.pk, worker="w1") == RunStatus.COMPLETED
    assert Run.objects.get(pk=failed.pk).generation == 1


def test_the_run_page_shows_each_generation_and_the_current_one(script, client):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga", password="pw")
    olga.groups.add(Group.objects.get(name="operators"))
    run = _completed()
    old_key = step(run, "book-shipment").idempotency_key
    client.force_login(olga)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="dialog-rerun_from_step"' in page
    # A completed run cannot be compensated (the table): the dialog says so, without a link.
    assert "Compensate is not offered now" in page and "rerun-compensate-first" not in page
    assert 'id="generations"' not in page
    transitions.rerun_from_step(run.pk, step_name="book-shipment", actor=SYSTEM,
                                reason="carrier lost the parcel")
    executor.advance_run(run.pk, worker="w1")
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "generation 1 (current)" in page
    assert 'id="generation-1"' in page and 'id="generation-0"' in page
    assert "carrier lost the parcel" in page
    assert old_key[:13] in page  # generation 0's key of the step sent again is kept


def test_where_the_run_can_be_compensated_the_dialog_offers_it_first(script, client):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga", password="pw")
    olga.groups.add(Group.objects.get(name="operators"))
    script.plan["post-ledger"] = [PermanentError("ledger closed")]
    run = new_run("test-orders")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    explanation = ACTIONS["rerun_from_step"].explain(Run.objects.get(pk=run.pk),
                                                     list(run.steps.order_by("position")))
    assert any(line.startswith("create-task: succeeded (low impact") for line in explanation)
    assert any("compensation for create-task: compensate first" in line
               for line in explanation)
    client.force_login(olga)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="rerun-compensate-first" data-opens-dialog="dialog-compensate"' in page


def test_over_the_api_and_the_cli_like_every_action_of_the_table(script, client, monkeypatch):
    from django.core.management import call_command

    from api.tokens import token_create

    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga", password="pw")
    olga.groups.add(Group.objects.get(name="operators"))
    monkeypatch.setenv("CLI_PASSWORD", "pw")
    _, plaintext = token_create(name="ops", workflows=["test-saga", "test-orders"],
                                acting_user=olga)
    headers = {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}
    saga = _completed()
    state = client.get(f"/api/runs/{saga.pk}", **headers).json()
    assert "rerun_from_step" in str(state)  # among the actions the run offers
    done = client.post(f"/api/runs/{saga.pk}/actions/rerun_from_step",
                       {"reason": "carrier lost it", "step": "book-shipment"},
                       content_type="application/json", **headers)
    assert done.status_code == 200, done.content
    assert Run.objects.get(pk=saga.pk).generation == 1
    orders = _completed("test-orders")
    pending = client.post(f"/api/runs/{orders.pk}/actions/rerun_from_step",
                          {"reason": "again", "step": "post-ledger"},
                          content_type="application/json", **headers)
    assert pending.status_code == 202
    request = ApprovalRequest.objects.get(pk=pending.json()["approval_request"]["id"])
    assert request.action == "rerun_from_step" and request.params["step"] == "post-ledger"
    refused = client.post(f"/api/runs/{saga.pk}/actions/rerun_from_step",
                          {"reason": "again", "step": "book-shipment"},
                          content_type="application/json", **headers)
    assert refused.status_code == 409  # queued now: not finished or stopped
    executor.advance_run(saga.pk, worker="w1")
    call_command("run_action", str(saga.pk), "rerun_from_step", "--user", "olga",
                 "--step", "charge-card", "--reason", "card processor lost it")
    assert Run.objects.get(pk=saga.pk).generation == 2
    assert step(saga, "charge-card").generation == 2
    assert step(saga, "reserve-stock").generation == 0
