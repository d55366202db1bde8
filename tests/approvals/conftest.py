from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.utils import timezone

import tests.approvals.workflows  # noqa: F401  (registers the extra approval workflows)
from approvals import requests
from approvals.models import ApprovalRequest
from console.roles import ensure_roles
from runs.execution import executor
from runs.models import Run, RunStatus
from tests.factories import new_run


@pytest.fixture(autouse=True)
def _approval_settings(settings):
    settings.APPROVALS_BASE_URL = "http://testserver"
    settings.APPROVAL_LINK_MAX_AGE = 3 * 24 * 3600
    settings.APPROVALS_SETTLE_RETRY_SECONDS = 60
    settings.APPROVALS_NOTIFICATION_MAX_ATTEMPTS = 8


def _user(username, *groups):
    user = User.objects.create_user(username, email=f"{username}@example.com", password="pw")
    for name in groups:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    return user


@pytest.fixture
def ann(db):
    return _user("ann", "approvers")


@pytest.fixture
def bob(db):
    return _user("bob", "approvers")


@pytest.fixture
def approvers(ann, bob):
    """The group test-approval names, with ann and bob in it."""
    return Group.objects.get(name="approvers")


@pytest.fixture
def dora(db):
    return _user("dora", "finance-deputies")


@pytest.fixture
def carol(db):
    """Logged in, with an email address, but no approver of anything."""
    return _user("carol")


@pytest.fixture
def operators(db):
    """olga and omar, operators. The role groups are made again with their permissions (a
    transactional test before this one flushed the migration's): an operator who asked
    must still hold the action's permission when the approval is applied."""
    ensure_roles(Group, Permission)
    group = Group.objects.get(name="operators")
    olga = User.objects.create_user("olga", email="olga@example.com")
    omar = User.objects.create_user("omar", email="omar@example.com")
    group.user_set.add(olga, omar)
    return olga, omar


@pytest.fixture
def t0():
    return timezone.now()


def waiting_run(workflow="test-approval", **input) -> Run:
    """A run brought to its approval step by the executor."""
    run = new_run(workflow, **input)
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING, run.status_message
    return run


def open_request(run: Run, now=None) -> ApprovalRequest:
    assert requests.open_pending_requests(now=now or timezone.now()) >= 1
    return ApprovalRequest.objects.get(run=run, status="pending")


@pytest.fixture
def pending(approvers, t0):
    """A waiting test-approval run and its open request, opened at t0."""
    run = waiting_run()
    return open_request(run, t0)


def later(t, **delta):
    return t + timedelta(**delta)
