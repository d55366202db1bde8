"""seed_demo creates the demo's logins, whose passwords are in the code: only where the
demo's simulated systems are served, never granting an existing login anything, and saying
a password only where it set one."""

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from runs.models import Run

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
