"""A reminder due on a request whose run stopped waiting for it (after the pass's withdrawal
looked) withdraws the request instead of reminding. The sweep's report, which the beat
task returns and an operator reads, counted neither: the request was not reminded, and
`withdrawn` said nothing was withdrawn. So too one whose snapshot shows a value sealed with
a key the ring no longer holds: its run is held for the key and the request withdrawn. Now
the reminders' withdrawals are counted in the pass's `withdrawn`, as its timeouts' are;
send_reminders still answers how many were reminded."""

import pytest
from cryptography.fernet import Fernet

from approvals import schedule
from approvals.models import ApprovalRequest, RequestStatus
from audit.chain import Actor
from audit.models import AuditRecord
from runs.definitions import definition
from runs.definitions.definition import Workflow
from runs.machine import transitions
from runs.models import AttentionReason, Run
from tests.approvals.conftest import later, open_request, waiting_run
from tests.workflows import OrderIn

pytestmark = pytest.mark.django_db

OPS = Actor.system("test")


def test_a_sweep_whose_reminders_withdrew_a_request_reports_it_withdrawn(
        approvers, dora, t0, monkeypatch):
    """The run is terminated after the pass's withdrawal and timeouts looked, before its
    reminders came to the request (reminders every 8 hours, its timeout days away)."""
    request = open_request(waiting_run("test-approval-escalate"), t0)
    timeouts = schedule.apply_timeouts

    def then_the_run_ends(**kwargs):
        report = timeouts(**kwargs)
        transitions.terminate(request.run_id, actor=OPS, reason="customer cancelled")
        return report

    monkeypatch.setattr(schedule, "apply_timeouts", then_the_run_ends)
    report = schedule.sweep(now=later(t0, hours=8))

    assert (report.withdrawn, report.reminded) == (1, 0)
    assert ApprovalRequest.objects.get(pk=request.pk).status == RequestStatus.WITHDRAWN
    records = AuditRecord.objects.filter(run_id=request.run_id)
    assert records.filter(action="approval_withdrawn").count() == 1
    assert not records.filter(action="approval_reminded").exists()


def test_a_sweep_that_reminded_reports_none_withdrawn(approvers, dora, t0):
    request = open_request(waiting_run("test-approval-escalate"), t0)
    report = schedule.sweep(now=later(t0, hours=8))
    assert (report.withdrawn, report.reminded) == (0, 1)
    assert ApprovalRequest.objects.get(pk=request.pk).status == RequestStatus.PENDING


def test_reminders_alone_answer_how_many_were_reminded_and_withdrawn(approvers, dora, t0):
    ended = open_request(waiting_run("test-approval-escalate"), t0)
    open_request(waiting_run("test-approval-escalate"), t0)
    transitions.terminate(ended.run_id, actor=OPS, reason="customer cancelled")
    report = schedule.remind_due(now=later(t0, hours=8))
    assert (report.reminded, report.withdrawn) == (1, 1)


@pytest.fixture
def approving_a_sealed_account():
    """An approval step whose snapshot shows a field its read step declares sensitive."""
    workflow = Workflow("test-sweep-reminds-a-sealed-account", version=1, input=OrderIn)

    @workflow.read("fetch-account", sensitive=("iban",))
    def fetch_account(ctx):
        return {"iban": "DE89370400440532013000"}

    @workflow.approval("approve", approvers=("group:approvers",), on_timeout="reject")
    def approve(ctx):
        return {"iban": ctx.results["fetch-account"]["iban"]}

    yield workflow
    definition.registry.unregister(workflow)


def test_a_sweep_whose_reminder_held_the_run_for_a_lost_key_reports_it_withdrawn(
        approving_a_sealed_account, approvers, t0, settings):
    settings.FIELD_ENCRYPTION_KEYS = {"old": Fernet.generate_key().decode()}
    request = open_request(waiting_run("test-sweep-reminds-a-sealed-account"), t0)
    settings.FIELD_ENCRYPTION_KEYS = {"new": Fernet.generate_key().decode()}

    report = schedule.sweep(now=later(t0, hours=24))

    assert (report.withdrawn, report.reminded) == (1, 0)
    assert ApprovalRequest.objects.get(pk=request.pk).status == RequestStatus.WITHDRAWN
    run = Run.objects.get(pk=request.run_id)
    assert run.attention_reason == AttentionReason.SEALED_VALUE_UNREADABLE

