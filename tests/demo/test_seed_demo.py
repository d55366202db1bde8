"""seed_demo creates the demo's logins, whose passwords are in the code: only where the
demo's simulated systems are served, never granting an existing login anything, and saying
a password only where it set one. Seeding again (bin/demo does at every start) counts a demo
run archived since as seeded, and a demo key another input took is named, never a
traceback. A database emptied since (manage.py flush drops the role groups' rights, which a
migration gave) gets its roles back: the operators it seeds see their runs."""

import io
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import CommandError, call_command
from django.utils import timezone

from archive.archiving import archive_runs
from audit.chain import Actor
from runs.machine.transitions import start_run
from runs.models import Run, RunStatus
from runs.permissions import VIEW, grant_for

pytestmark = pytest.mark.django_db


def test_it_is_refused_where_the_sandbox_is_not_served(settings):
    settings.SANDBOX_ENABLED = False
    with pytest.raises(CommandError, match="runs only where the demo's simulated systems"):
        call_command("seed_demo", stdout=io.StringIO())
    assert not User.objects.exists() and not Run.objects.exists()


def test_seeding_again_keeps_a_demoted_admin_demoted_and_its_own_password():
    call_command("seed_demo", stdout=io.StringIO())
    admin = User.objects.get(username="admin")
    admin.is_staff = admin.is_superuser = False
    admin.set_password("a-password-of-their-own")
    admin.save()

    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    admin.refresh_from_db()
    assert (admin.is_staff, admin.is_superuser) == (False, False)
    assert admin.check_password("a-password-of-their-own")
    assert "admin / admin-demo" not in out.getvalue()
    assert "admin (existing, password unchanged)" in out.getvalue()


def test_a_fresh_database_gets_each_login_with_its_password_said():
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    assert "admin / admin-demo" in out.getvalue()
    assert User.objects.get(username="admin").check_password("admin-demo")


def test_seeding_again_after_a_demo_run_was_archived_keeps_it_archived(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.STORAGES = {k: v for k, v in settings.STORAGES.items() if k != "archive"}
    call_command("seed_demo", stdout=io.StringIO())
    key = "tenant-42:cus-1001"
    finished = timezone.now() - timedelta(days=400)
    Run.objects.filter(business_key=key).update(status=RunStatus.TERMINATED,
                                                updated_at=finished, finished_at=finished)
    assert archive_runs(actor="test", older_than_days=30).runs_removed == 1
    runs = Run.objects.count()

    out = io.StringIO()
    call_command("seed_demo", stdout=out)  # what bin/demo does at every start
    assert ("archived since seeded, not started again: customer-onboarding "
            f"{key}") in out.getvalue()
    assert not Run.objects.filter(business_key=key).exists()
    assert Run.objects.count() == runs


def test_a_demo_key_taken_by_another_input_is_named_and_starts_no_run():
    key = "tenant-42:cus-1002"
    start_run(workflow="customer-onboarding", business_key=key,
              input={"email": "someone@example.com", "name": "Someone", "plan": "free"},
              actor=Actor.system("test"))
    with pytest.raises(CommandError, match=f"a demo run cannot be started: .*{key}"):
        call_command("seed_demo", stdout=io.StringIO())
    assert Run.objects.filter(business_key=key).count() == 1
    assert Run.objects.get(business_key=key).input["email"] == "someone@example.com"
    assert not Run.objects.filter(workflow_name="invoice-approval").exists()


def test_a_flushed_database_gets_its_roles_and_its_operator_sees_every_run():
    Group.objects.all().delete()  # as manage.py flush leaves them
    call_command("seed_demo", stdout=io.StringIO())
    operator = User.objects.get(username="operator")
    assert grant_for(operator, VIEW).everywhere
    assert operator.has_perm("runs.terminate_run")
