"""An event that comes for a run a person ended (terminated) is kept, as the door answers
for every event no run takes, but refused for that run and said on its log: the run takes no
event on its own. Reopening the run does not hand it over: neither the worker's look as the
run waits again nor the sweeper's pass delivers it, so no record of a delivery names nobody.
It stays visible (the kept row names the run and why; the run's timeline shows "event
refused") for a person, who may deliver the event by hand, named in the record. An event
that came while the run was still alive is its own as before."""

import io

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command

from api.tokens import token_create
from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from console.roles import ensure_roles
from console.timeline import timeline_page
from runs.execution import executor, sweeper
from runs.machine.transitions.events import insert_event
from runs.models import AttentionReason, ExternalEvent, Run, RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from runs.waiting import events, kept
from tests.factories import new_run, place, step

pytestmark = pytest.mark.django_db
OLGA = Actor(kind="user", label="olga")
PSP = Actor.system("psp")
PAID = {"amount": 5, "reference": "PSP-9"}


def _send(run, event_id="evt-1"):
    return events.receive_event(workflow=run.workflow_name, event="payment.settled",
                                key=run.business_key, event_id=event_id, source="psp",
                                payload=PAID, actor=PSP)


def _waiting():
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    return run


def _terminate(run):
    ACTIONS["terminate"].perform(run.pk, actor=OLGA,
                                 given=ActionInput(reason="the customer cancelled"))
    assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED


def _reopen_and_let_every_path_come_by(run) -> Run:
    """Olga reopens the run and resumes it; the sweeper's pass and the worker's look for a
    kept event (after the run waits again) come by, each more than once."""
    ACTIONS["reopen"].perform(run.pk, actor=OLGA, given=ActionInput(reason="terminated by "
                                                                           "mistake"))
    assert sweeper.sweep().events == 0
    assert kept.consume_kept_events() == 0
    ACTIONS["resume"].perform(run.pk, actor=OLGA, given=ActionInput(reason="go on"))
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.WAITING
    assert not kept.consume_kept_for_run(run.pk)
    assert sweeper.sweep().events == 0
    assert not kept.consume_kept_for_run(run.pk)
    return Run.objects.get(pk=run.pk)


def _assert_not_delivered(run, script) -> None:
    payment = step(run, "payment")
    assert (run.status, payment.status, payment.result) == (RunStatus.WAITING,
                                                            StepStatus.WAITING, None)
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_RECEIVED).exists()
    assert [name for name, *_ in script.calls] == ["invoice"]  # "book" never ran
    row = ExternalEvent.objects.get(event_id="evt-1")
    assert (row.consumed_at, row.consumed_run_id) == (None, None)


def _assert_left_for_a_person(run, source="psp") -> None:
    """The kept row names the run and why; the run's log says so once, on the wait, naming
    the sender and the event; the timeline shows it."""
    row = ExternalEvent.objects.get(event_id="evt-1")
    assert row.refused_run_id == run.pk and row.refused_at is not None
    assert f"run {run.pk} was terminated when it came" in row.refused_reason
    assert "a person may deliver it by hand" in row.refused_reason
    (refused,) = AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_REFUSED)
    assert (refused.actor_kind, refused.actor_label) == ("system", f"event {source}")
    assert refused.step_name == "payment"
    assert refused.data["event_name"] == "payment.settled"
    assert refused.data["run_ended"] == "terminated"
    assert refused.data["event"] == f"{source}:evt-1"
    shown = [e for e in timeline_page(run).entries if e.title == "event refused"]
    assert len(shown) == 1 and "terminated when it came" in shown[0].detail


def test_an_event_sent_to_a_terminated_run_is_not_consumed_when_the_run_is_reopened(
        client, script):
    run = _waiting()
    _terminate(run)
    _, token = token_create(name="psp", workflows=["test-payment-wait"])

    answer = client.post("/api/events", {
        "workflow": "test-payment-wait", "event": "payment.settled", "event_id": "evt-1",
        "correlation_key": run.business_key, "payload": PAID,
    }, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")

    assert answer.status_code == 202 and answer.json() == {"status": "kept", "run_id": None}
    _assert_left_for_a_person(run, "api-token:psp")
    run = _reopen_and_let_every_path_come_by(run)
    _assert_not_delivered(run, script)
    _assert_left_for_a_person(run, "api-token:psp")  # the one record, made when it came
    assert ExternalEvent.objects.count() == 1


def test_a_person_delivers_it_by_hand_and_the_record_names_her(script, monkeypatch):
    run = _waiting()
    _terminate(run)
    assert _send(run) == events.Receipt("kept")
    run = _reopen_and_let_every_path_come_by(run)
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga", password="pw")
    olga.groups.add(Group.objects.get(name="operators"))
    monkeypatch.setenv("CLI_PASSWORD", "pw")

    call_command("run_action", str(run.pk), "event_received", "--user", "olga",
                 "--reason", "the provider confirmed it came after the run was terminated",
                 "--evidence", '{"amount": 5, "reference": "PSP-9"}', stdout=io.StringIO())

    (received,) = AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_RECEIVED)
    assert (received.actor_kind, received.actor_label) == ("user", "olga")
    assert received.reason == "the provider confirmed it came after the run was terminated"
    assert received.data["source"] == "operator" and received.data["by_hand"] is True
    assert step(run, "payment").result == PAID
    # The kept event stays as it was left: refused for the run, never consumed by anyone.
    row = ExternalEvent.objects.get(event_id="evt-1")
    assert (row.consumed_at, row.refused_run_id) == (None, run.pk)
    assert ExternalEvent.objects.count() == 2
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.COMPLETED


def test_an_event_for_a_run_terminated_before_it_reached_the_wait_is_left_for_a_person(
        script):
    run = new_run("test-payment-wait")
    _terminate(run)
    assert step(run, "payment").status == StepStatus.SKIPPED

    assert _send(run) == events.Receipt("kept")

    _assert_left_for_a_person(run)
    run = _reopen_and_let_every_path_come_by(run)
    payment = step(run, "payment")
    assert (run.status, payment.status, payment.result) == (RunStatus.WAITING,
                                                            StepStatus.WAITING, None)
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_RECEIVED).exists()
    assert ExternalEvent.objects.get(event_id="evt-1").consumed_at is None
    assert ExternalEvent.objects.count() == 1


def test_the_sweeper_leaves_for_a_person_an_event_an_earlier_release_kept_unmarked(script):
    run = _waiting()
    _terminate(run)
    # Kept for the terminated run's wait by a release before this rule, with no mark.
    payment = step(run, "payment")
    insert_event(workflow_name=run.workflow_name, source="psp", event_id="evt-1",
                 event_name="payment.settled", correlation_key=run.business_key,
                 payload=PAID, received_at=payment.started_at)

    assert sweeper.sweep().events == 0

    _assert_left_for_a_person(run)
    run = _reopen_and_let_every_path_come_by(run)
    _assert_not_delivered(run, script)


def test_a_run_ended_with_an_effect_unsettled_takes_no_event_either(script):
    run = _waiting()
    place(run, status=RunStatus.ATTENTION, attention_reason=AttentionReason.ENDED_UNSETTLED)
    records = AuditRecord.objects.filter(run=run).count()

    assert _send(run) == events.Receipt("kept")
    assert sweeper.sweep().events == 0

    run = Run.objects.get(pk=run.pk)
    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.ENDED_UNSETTLED)
    assert (step(run, "payment").status, step(run, "payment").result) == (StepStatus.WAITING,
                                                                          None)
    assert [name for name, *_ in script.calls] == ["invoice"]
    (refused,) = AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_REFUSED)
    # Placed there without a record of how it was ended: "terminated", as a terminate's.
    assert f"run {run.pk} was terminated (it waits only for its unsettled effects" in \
        refused.data["error"]
    assert AuditRecord.objects.filter(run=run).count() == records + 1
    row = ExternalEvent.objects.get()
    assert (row.consumed_at, row.refused_run_id) == (None, run.pk)


def test_an_event_that_came_while_the_run_was_alive_still_reaches_it_after_a_reopen(script):
    run = new_run("test-payment-wait")
    assert _send(run) == events.Receipt("kept")  # early: the run has not reached the wait
    _terminate(run)

    run = Run.objects.get(pk=run.pk)
    ACTIONS["reopen"].perform(run.pk, actor=OLGA, given=ActionInput(reason="by mistake"))
    ACTIONS["resume"].perform(run.pk, actor=OLGA, given=ActionInput(reason="go on"))
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.WAITING
    assert kept.consume_kept_for_run(run.pk)

    row = ExternalEvent.objects.get()
    assert (row.consumed_run_id, row.refused_at) == (run.pk, None)
    assert step(run, "payment").result == PAID
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_REFUSED).exists()


def test_an_event_sent_to_a_cancelled_run_says_the_run_was_cancelled(script):
    run = _waiting()
    ACTIONS["cancel"].perform(run.pk, actor=OLGA, given=ActionInput(reason="not needed"))
    assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED

    assert _send(run) == events.Receipt("kept")

    row = ExternalEvent.objects.get(event_id="evt-1")
    assert f"run {run.pk} was cancelled when it came" in row.refused_reason
    (refused,) = AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_REFUSED)
    assert f"run {run.pk} was cancelled" in refused.data["error"]
    assert "terminated" not in row.refused_reason + refused.data["error"]
