"""demo_scenarios approves two invoices to reach its compensation scenarios. It decides as
itself (the system "demo_scenarios"): the demo's approver, a person who exists once
seed_demo has run, did not decide, and the audit trail and the step never name them."""

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from audit.actions import AuditAction
from audit.models import AuditRecord
from demo.sandbox import faults
from runs.models import Step

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_scenarios_approvals_name_the_command_never_the_demo_s_approver(
        sandbox_and_broker):
    approver = User.objects.create_user("approver", email="approver@example.com")
    try:
        call_command("demo_scenarios", stdout=io.StringIO())
    finally:
        faults.clear()
    assert not AuditRecord.objects.filter(actor_user_id=approver.pk).exists()
    assert not AuditRecord.objects.filter(actor_label="approver").exists()
    decided = Step.objects.filter(name="approve-invoice",
                                  run__business_key__in=["tenant-42:INV-COMP-demo",
                                                         "tenant-42:INV-CFAIL-demo"])
    assert decided.count() == 2
    for step in decided:
        assert step.remote_ref == "approved by demo_scenarios"
    decisions = AuditRecord.objects.filter(run__in=[s.run_id for s in decided],
                                           action=AuditAction.APPROVAL_DECIDED)
    assert decisions.count() == 2
    assert set(decisions.values_list("actor_kind", "actor_label")) == {
        (AuditRecord.ActorKind.SYSTEM, "demo_scenarios")}
