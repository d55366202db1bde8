"""manage.py drill against the demo: it finds the running demo's sandbox or refuses naming
what it tried, reports what it could not do as a failed row (never a traceback), and keeps
its runs apart: flagged, out of the lists and the attention count unless asked, notifying
nobody, removed by one command."""

import io

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from approvals.models import Notification
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.machine.errors import TransitionNotAllowed
from runs.management.commands.drill import sandbox_candidates
from runs.models import Run
from runs.operator import drills

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def no_demo(settings, tmp_path, monkeypatch):
    """Nothing answers at the configured sandbox; no demo wrote its port."""
    monkeypatch.delenv("SANDBOX_BASE_URL", raising=False)
    settings.VAR_DIR = tmp_path
    settings.SANDBOX_BASE_URL = "http://127.0.0.1:9/sandbox"
    return settings


def test_without_a_sandbox_the_drill_refuses_naming_what_it_tried(no_demo):
    with pytest.raises(CommandError) as refused:
        call_command("drill", "invoice-approval", stdout=io.StringIO())
    message = str(refused.value)
    assert "http://127.0.0.1:9/sandbox" in message
    assert "--sandbox" in message and "SANDBOX_BASE_URL" in message
    assert Run.objects.count() == 0


def test_the_running_demo_s_port_is_found(no_demo, tmp_path):
    (tmp_path / "demo.port").write_text("8123\n")
    assert sandbox_candidates()[0][0] == "http://127.0.0.1:8123/sandbox"


def test_a_refused_transition_is_a_failed_row_not_a_traceback():
    def drill():
        raise TransitionNotAllowed("run 24 has no completed step to compensate")

    result = drills.run_guarded("6 late failure after earlier effects", drill)
    assert result.passed is False
    assert "no completed step to compensate" in result.observed


def test_drill_runs_are_kept_apart_notify_nobody_and_are_removed_by_one_command(
        live_sandbox, settings, tmp_path, monkeypatch, client):
    monkeypatch.delenv("SANDBOX_BASE_URL", raising=False)
    settings.VAR_DIR = tmp_path
    live_port = live_sandbox.split(":")[2].split("/")[0]
    (tmp_path / "demo.port").write_text(live_port)
    # The configured sandbox is someone else's port: the drill finds the demo's.
    settings.SANDBOX_BASE_URL = "http://127.0.0.1:9/sandbox"
    settings.RUNS_WORKFLOW_MODULES = [*settings.RUNS_WORKFLOW_MODULES, "tests.workflows"]
    ensure_roles(Group, Permission)
    approver = User.objects.create_user("approver", email="approver@example.com")
    approver.groups.add(Group.objects.get(name="approvers"))
    out = io.StringIO()
    call_command("drill", "invoice-approval", stdout=out)
    assert f"127.0.0.1:{live_port}/sandbox" in out.getvalue()
    drilled = Run.objects.filter(drill=True)
    assert drilled.count() >= 5
    assert drilled.count() == Run.objects.filter(business_key__startswith="drill:").count()
    assert Notification.objects.count() == 0  # nobody was written to
    # One drill run in attention: out of the lists and the count unless asked for.
    one = drilled.first()
    Run.objects.filter(pk=one.pk).update(status="attention", attention_reason="permanent_error")
    operator = User.objects.create_user("olga")
    operator.groups.add(Group.objects.get(name="operators"))
    client.force_login(operator)
    listed = client.get(reverse("console:runs"))
    assert "drill:" not in listed.content.decode()
    assert listed.context["counts"]["attention"] == 0
    assert "drill:" in client.get(reverse("console:runs"), {"drills": "on"}).content.decode()
    attention = client.get(reverse("console:attention"))
    assert attention.context["total"] == 0 and "drill:" not in attention.content.decode()
    shown = client.get(reverse("console:attention"), {"drills": "1"})
    assert shown.context["total"] == 1
    records = AuditRecord.objects.filter(run__drill=True).count()
    assert records > 0
    out = io.StringIO()
    call_command("remove_drill_runs", stdout=out)
    assert Run.objects.filter(business_key__startswith="drill:").count() == 0, out.getvalue()
    assert AuditRecord.objects.filter(run__business_key__startswith="drill:").count() == 0
    assert "removed, archived in" in out.getvalue()
