"""Login throttling (django-axes): after AXES_FAILURE_LIMIT failures for one username from one
address, that pair is refused for the cool-off period, on the console's login and Django
admin's alike; lockouts are listed and lifted in Django admin."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User
from django.utils import timezone

pytestmark = pytest.mark.django_db

CONSOLE_LOGIN, ADMIN_LOGIN = "/accounts/login/", "/admin/login/"


@pytest.fixture(autouse=True)
def _limits(settings):
    settings.AXES_FAILURE_LIMIT = 3
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)


@pytest.fixture
def olga(db):
    return User.objects.create_user("olga", password="right-password", is_staff=True)


def _login(client, path, password, username="olga", address="10.0.0.1"):
    return client.post(path, {"username": username, "password": password},
                       REMOTE_ADDR=address)


@pytest.mark.parametrize("path", [CONSOLE_LOGIN, ADMIN_LOGIN])
def test_the_failure_limit_locks_out_that_user_from_that_address(client, olga, path):
    assert _login(client, path, "wrong").status_code == 200
    assert _login(client, path, "wrong").status_code == 200
    locked = _login(client, path, "wrong")
    assert locked.status_code == 429
    assert "Too many failed attempts" in locked.content.decode()
    # Even the right password is refused now, and no session is opened.
    assert _login(client, path, "right-password").status_code == 429
    assert "_auth_user_id" not in client.session
    # The same user from another address, and another user from this one, are not.
    assert _login(client, path, "right-password", address="10.0.0.2").status_code == 302
    client.logout()
    User.objects.create_user("ivan", password="pw2", is_staff=True)
    assert _login(client, path, "pw2", username="ivan").status_code == 302


def test_the_lockout_ends_after_the_cool_off(client, olga):
    for _ in range(3):
        _login(client, CONSOLE_LOGIN, "wrong")
    assert _login(client, CONSOLE_LOGIN, "right-password").status_code == 429
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert _login(client, CONSOLE_LOGIN, "right-password").status_code == 302


def test_a_successful_login_clears_the_failures_before_the_limit(client, olga):
    _login(client, CONSOLE_LOGIN, "wrong")
    _login(client, CONSOLE_LOGIN, "wrong")
    assert _login(client, CONSOLE_LOGIN, "right-password").status_code == 302
    client.logout()
    assert _login(client, CONSOLE_LOGIN, "wrong").status_code == 200
    assert _login(client, CONSOLE_LOGIN, "wrong").status_code == 200


def test_an_admin_sees_the_lockout_and_lifts_it(client, olga):
    for _ in range(3):
        _login(client, CONSOLE_LOGIN, "wrong")
    attempt = AccessAttempt.objects.get(username="olga", ip_address="10.0.0.1")
    assert attempt.failures_since_start == 3

    admin = client.__class__()
    admin.force_login(User.objects.create_superuser("root", password="pw"))
    listing = admin.get("/admin/axes/accessattempt/")
    assert listing.status_code == 200 and "10.0.0.1" in listing.content.decode()
    deleted = admin.post(f"/admin/axes/accessattempt/{attempt.pk}/delete/", {"post": "yes"})
    assert deleted.status_code == 302 and not AccessAttempt.objects.exists()

    assert _login(client, CONSOLE_LOGIN, "right-password").status_code == 302


@pytest.fixture
def olga_operates(olga):
    from django.contrib.auth.models import Group, Permission

    from console.roles import ensure_roles

    ensure_roles(Group, Permission)
    olga.groups.add(Group.objects.get(name="operators"))
    return olga


def _pause_as_olga(password, monkeypatch):
    from django.core.management import call_command

    monkeypatch.setenv("CLI_PASSWORD", password)
    call_command("dispatch", "pause", "test-orders", "--user", "olga", "--reason", "vendor down")


def test_failed_passwords_at_the_command_line_lock_that_user_out_there(
        client, olga_operates, monkeypatch):
    from django.core.management import CommandError

    from runs.models import DispatchPause

    for _ in range(2):
        with pytest.raises(CommandError, match="^wrong password for olga; nothing"):
            _pause_as_olga("wrong", monkeypatch)
    # The failure that reaches the limit locks out, as the console's login does; then even
    # the right password is refused, before it is checked, and nothing is paused.
    for password in ("wrong", "right-password"):
        with pytest.raises(CommandError, match="^too many failed passwords for olga: locked"):
            _pause_as_olga(password, monkeypatch)
    assert not DispatchPause.objects.exists()
    assert AccessAttempt.objects.get(username="olga").ip_address == "127.0.0.1"
    # The console's login from a browser's address is not locked by the command line's.
    assert _login(client, CONSOLE_LOGIN, "right-password").status_code == 302
    # An admin lifts it (Django admin deletes the attempt), and the command acts again.
    AccessAttempt.objects.all().delete()
    _pause_as_olga("right-password", monkeypatch)
    assert DispatchPause.objects.filter(workflow_name="test-orders").count() == 1


def test_a_right_password_at_the_command_line_clears_the_slips_before_it(olga_operates,
                                                                          monkeypatch):
    from django.core.management import CommandError, call_command

    for _ in range(2):
        with pytest.raises(CommandError, match="^wrong password"):
            _pause_as_olga("wrong", monkeypatch)
    _pause_as_olga("right-password", monkeypatch)
    monkeypatch.setenv("CLI_PASSWORD", "wrong")
    for _ in range(2):  # two more slips: under the limit again, not locked out
        with pytest.raises(CommandError, match="^wrong password"):
            call_command("dispatch", "resume", "test-orders", "--user", "olga",
                         "--reason", "vendor back")
