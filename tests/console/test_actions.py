"""Operator actions: permission-checked on the server whatever the page showed, POST and
CSRF only, each calling the same transition as automation and leaving an audit record."""

import logging

import pytest
from django.test import Client
from django.urls import reverse

from audit.models import AuditRecord
from runs.execution import executor
from runs.models import Run, RunStatus, StepStatus
from tests.factories import drawn, new_run, step

pytestmark = pytest.mark.django_db


def _post(client, run, action, **data):
    data.setdefault("seen", str(Run.objects.get(pk=run.pk).audit_seq))
    return client.post(reverse("console:action", args=[run.pk, action]), data)


def _state(run):
    run = Run.objects.get(pk=run.pk)
    return run.status, run.audit_seq, list(run.steps.values_list("status", flat=True))


def test_an_operator_reconciles_by_hand_with_evidence_and_the_run_continues(
        client_for, operator, stuck_run):
    client = client_for(operator)
    response = _post(client, stuck_run, "reconcile", step="create-task", mode="found",
                     remote_ref="TASK-77", evidence="seen in the tracker UI",
                     reason="tracker returned 403 after creating it")
    assert response.status_code == 302
    run = Run.objects.get(pk=stuck_run.pk)
    assert run.status == RunStatus.QUEUED
    assert step(run, "create-task").remote_ref == "TASK-77"
    record = AuditRecord.objects.filter(run=run, action="reconciled").get()
    assert record.actor_label == "olga" and record.actor_user_id == operator.pk
    assert record.data["evidence"] == "seen in the tracker UI"
    assert record.before["status"] == "attention" and record.after["status"] == "queued"


def test_the_buttons_an_auditor_sees_are_none_and_a_forged_post_is_refused(
        client_for, auditor, stuck_run, caplog):
    client = client_for(auditor)
    page = client.get(reverse("console:run", args=[stuck_run.pk])).content.decode()
    assert "Actions" not in page and "dialog-resume" not in page
    before = _state(stuck_run)
    with caplog.at_level(logging.WARNING, logger="console.views"):
        response = _post(client, stuck_run, "resume", reason="forged")
    assert response.status_code == 403
    assert _state(stuck_run) == before
    assert "refused resume" in caplog.text and "aude" in caplog.text


def test_every_action_endpoint_refuses_get(client_for, operator, stuck_run):
    client = client_for(operator)
    for action in ("resume", "reconcile", "retry_step", "compensate", "cancel", "terminate",
                   "reopen"):
        response = client.get(reverse("console:action", args=[stuck_run.pk, action]))
        assert response.status_code == 405, action
    assert _state(stuck_run)[0] == RunStatus.ATTENTION


def test_an_action_without_the_csrf_token_is_refused(operator, stuck_run):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    before = _state(stuck_run)
    assert _post(client, stuck_run, "resume").status_code == 403
    assert _state(stuck_run) == before


def test_per_workflow_grants_allow_one_workflow_and_refuse_another(
        client_for, finance_operator, stuck_run, script):
    onboarding = new_run("customer-onboarding", email="a@example.com", name="A", plan="pro")
    Run.objects.filter(pk=onboarding.pk).update(status=RunStatus.ATTENTION)
    client = client_for(finance_operator)
    assert client.get(reverse("console:run", args=[onboarding.pk])).status_code == 403
    body = client.get(reverse("console:runs")).content.decode()
    assert f"#{stuck_run.pk}<" in body and f"#{onboarding.pk}<" not in body
    assert _post(client, onboarding, "terminate", reason="x").status_code == 403
    assert Run.objects.get(pk=onboarding.pk).status == RunStatus.ATTENTION
    assert _post(client, stuck_run, "terminate", reason="duplicate").status_code == 302
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.TERMINATED


def test_a_run_that_moved_on_is_not_acted_on_twice(client_for, operator, stuck_run):
    client = client_for(operator)
    seen = str(stuck_run.audit_seq)
    assert _post(client, stuck_run, "resume", seen=seen, reason="fixed").status_code == 302
    after_first = _state(stuck_run)
    response = client.post(reverse("console:action", args=[stuck_run.pk, "resume"]),
                           {"seen": seen, "reason": "fixed"}, follow=True)
    assert "The run moved on" in response.content.decode()
    assert _state(stuck_run) == after_first


@pytest.mark.parametrize("seen", [None, "", "²", "-1"])
def test_a_form_that_names_no_state_of_the_run_is_told_so_and_nothing_is_done(
        client_for, operator, stuck_run, seen):
    before = _state(stuck_run)
    form = {"reason": "fixed"} | ({} if seen is None else {"seen": seen})
    page = client_for(operator).post(reverse("console:action", args=[stuck_run.pk, "resume"]),
                                     form, follow=True).content.decode()
    assert ("Resume was not done: the form did not say which state of the run it was drawn "
            "for") in page
    assert "moved on" not in page
    assert _state(stuck_run) == before


@pytest.mark.parametrize("action", ["terminate", "resume", "retry_step"])
def test_every_action_needs_a_reason(client_for, operator, stuck_run, action):
    client = client_for(operator)
    before = _state(stuck_run)
    # A step only where the action reads one: another would be refused for it instead.
    response = _post(client, stuck_run, action, reason="  ",
                     **({"step": "create-task"} if action == "retry_step" else {}))
    assert response.status_code == 302 and _state(stuck_run) == before
    page = client.get(reverse("console:run", args=[stuck_run.pk])).content.decode()
    assert "needs a reason" in page


def test_htmx_action_returns_the_refreshed_panel(client_for, operator, stuck_run):
    client = client_for(operator)
    response = client.post(reverse("console:action", args=[stuck_run.pk, "retry_step"]),
                           {"seen": str(stuck_run.audit_seq), "step": "create-task",
                            "reason": "receiver fixed"},
                           HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    body = response.content.decode()
    assert 'id="run-live"' in body and "Retry step: done." in body
    assert step(stuck_run, "create-task").status == StepStatus.PENDING


def test_bulk_actions_report_acted_and_refused_runs_with_an_audit_record_each(
        client_for, finance_operator, stuck_run, script):
    from runs.machine.errors import PermanentError

    script.plan["create-task"] = [PermanentError("no")]
    second = new_run()
    executor.advance_run(second.pk, worker="w1")
    foreign = new_run("customer-onboarding", email="b@example.com", name="B", plan="free")
    Run.objects.filter(pk=foreign.pk).update(status=RunStatus.ATTENTION)
    client = client_for(finance_operator)
    response = client.post(reverse("console:bulk"), {
        "action": "terminate", "reason": "vendor fraud",
        "run": [stuck_run.pk, second.pk, foreign.pk], **drawn(stuck_run, second, foreign)},
        follow=True)
    body = response.content.decode()
    assert f"done for runs {stuck_run.pk}, {second.pk}" in body
    # Told of as of a run that does not exist: the person may not see it.
    assert f"no run you may act on has the id {foreign.pk}." in body
    assert Run.objects.get(pk=foreign.pk).status == RunStatus.ATTENTION
    for run in (stuck_run, second):
        assert AuditRecord.objects.filter(run=run, action="terminated",
                                          actor_label="fin").count() == 1


def test_terminating_a_run_with_a_succeeded_high_impact_step_needs_a_second_person(
        client_for, operator, roles, script):
    import uuid

    from django.contrib.auth.models import Group, User

    from approvals.application import apply_to_run
    from approvals.decisions import decide
    from approvals.models import ApprovalRequest
    from tests.factories import place

    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.SUCCEEDED,
                               "post-ledger": StepStatus.SUCCEEDED})
    client = client_for(operator)
    page = client.get(reverse("console:run", args=[run.pk])).content.decode()
    assert "second person for approval (four eyes)" in page
    response = client.post(reverse("console:action", args=[run.pk, "terminate"]),
                           {"reason": "customer cancelled", "seen": str(run.audit_seq)},
                           follow=True)
    assert "A second person must approve this" in response.content.decode()
    assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION
    request = ApprovalRequest.objects.get(run=run)

    # The operator cannot approve their own request; a colleague can.
    with pytest.raises(Exception, match="may not decide"):
        decide(request.pk, user=operator, approved=True, decision_id=uuid.uuid4())
    colleague = User.objects.create_user("carl")
    colleague.groups.add(Group.objects.get(name="operators"))
    decide(request.pk, user=colleague, approved=True, decision_id=uuid.uuid4())
    apply_to_run(request.pk)
    assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
    record = AuditRecord.objects.get(run=run, action="terminated")
    assert record.actor_label == "olga" and record.data["approved_by"] == "carl"


def _high_impact_run():
    from tests.factories import place

    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.SUCCEEDED,
                                "post-ledger": StepStatus.SUCCEEDED})


def _assert_only_a_request_was_opened(run, before):
    """Nothing happened to the run but the audit record of the approval request opened."""
    status, seq, steps = _state(run)
    assert (status, steps) == (before[0], before[2]) and seq == before[1] + 1
    assert AuditRecord.objects.get(run=run, seq=seq).action == "approval_opened"


@pytest.mark.parametrize("action", ["cancel", "terminate", "compensate"])
def test_ending_or_undoing_after_a_high_impact_effect_goes_to_a_second_person(
        client_for, operator, roles, action):
    from approvals.models import ApprovalRequest

    run = _high_impact_run()
    before = _state(run)
    response = _post(client_for(operator), run, action, reason="customer cancelled")
    assert response.status_code == 302
    _assert_only_a_request_was_opened(run, before)
    request = ApprovalRequest.objects.get(run=run)
    assert request.action == action and request.snapshot["high_impact_effects"] == [
        "post-ledger: succeeded"]


def test_a_bulk_terminate_after_a_high_impact_effect_goes_to_a_second_person(
        client_for, operator, roles):
    from approvals.models import ApprovalRequest

    run = _high_impact_run()
    before = _state(run)
    response = client_for(operator).post(reverse("console:bulk"), {
        "action": "terminate", "reason": "vendor fraud", "run": [run.pk], **drawn(run)},
        follow=True)
    assert response.status_code == 200
    _assert_only_a_request_was_opened(run, before)
    assert ApprovalRequest.objects.filter(run=run, action="terminate").count() == 1


def test_the_buttons_on_a_run_page_are_the_actions_its_transitions_accept(
        client_for, operator, stuck_run):
    from runs.operator.actions import offered

    page = client_for(operator).get(reverse("console:run", args=[stuck_run.pk]))
    shown = {name for name in ("resume", "reconcile", "retry_step", "ask_again", "compensate",
                               "confirm_compensation", "cancel", "terminate", "reopen",
                               "rerun_from_step")
             if f'id="action-{name}"' in page.content.decode()
             or f'id="recommended-{name}"' in page.content.decode()}
    run = Run.objects.get(pk=stuck_run.pk)
    assert shown == {a.name for a in offered(run, list(run.steps.order_by("position")))}
    assert "retry_step" in shown or "reconcile" in shown
