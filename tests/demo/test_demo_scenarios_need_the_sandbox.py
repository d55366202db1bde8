"""demo_scenarios without a sandbox that answers says so and makes nothing (no run, no
queued fault for later runs to meet), and a set an earlier try left part-made is not taken
for the whole set."""

import io

import pytest
from django.core.management import CommandError, call_command

from audit.chain import Actor
from demo.sandbox import faults
from demo.sandbox.models import Fault
from runs.machine.transitions import start_run
from runs.models import Run

pytestmark = pytest.mark.django_db

NOBODY = "http://127.0.0.1:1/sandbox"


def test_without_a_sandbox_nothing_is_made_and_no_fault_is_left_queued(settings):
    settings.SANDBOX_BASE_URL = NOBODY
    with pytest.raises(CommandError, match=f"sandbox does not answer at {NOBODY}"):
        call_command("demo_scenarios", stdout=io.StringIO())
    assert not Run.objects.exists() and not Fault.objects.exists()


def test_a_part_made_set_is_not_reported_as_in_place(settings):
    # The first scenario's run, as a try that stopped after it would have left it.
    start_run(workflow="customer-onboarding", business_key="tenant-9:cus-ok-demo",
              input={"email": "linus@example.com", "name": "Linus", "plan": "enterprise"},
              actor=Actor.system("earlier try"), wake=False)
    settings.SANDBOX_BASE_URL = NOBODY
    out = io.StringIO()
    with pytest.raises(CommandError, match="sandbox does not answer"):
        call_command("demo_scenarios", stdout=out)
    assert "already in place" not in out.getvalue()
    assert Run.objects.count() == 1 and not Fault.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_part_made_set_is_completed_with_the_scenarios_it_lacks(sandbox_and_broker):
    # The first scenario's run as an earlier try left it, advanced to its end: a run still
    # queued would be one the command waits for a worker to take (a minute, with none here).
    run, _ = start_run(workflow="customer-onboarding", business_key="tenant-9:cus-ok-demo",
                       input={"email": "linus@example.com", "name": "Linus",
                              "plan": "enterprise"},
                       actor=Actor.system("earlier try"), wake=False)
    Run.objects.filter(pk=run.pk).update(status="completed")
    out = io.StringIO()
    try:
        call_command("demo_scenarios", stdout=out)
    finally:
        faults.clear()
    assert "tenant-9:cus-ok-demo: completed (already in place)" in out.getvalue()
    assert Run.objects.filter(business_key__endswith="-demo").count() == 8
    assert Run.objects.get(business_key="tenant-42:INV-WAIT-demo").status == "waiting"


def test_the_refusal_masks_the_password_in_the_sandbox_url(settings):
    settings.SANDBOX_BASE_URL = "http://ops:EnvSandboxPw@127.0.0.1:1/sandbox"
    out = io.StringIO()
    with pytest.raises(CommandError, match="sandbox does not answer") as refused:
        call_command("demo_scenarios", stdout=out, stderr=out)
    assert "EnvSandboxPw" not in str(refused.value) + out.getvalue()
    assert "http://ops:[redacted]@127.0.0.1:1/sandbox" in str(refused.value)
    assert not Run.objects.exists()
