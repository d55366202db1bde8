import pytest
from django.contrib.auth.models import Group, Permission, User
from guardian.shortcuts import assign_perm

from console.roles import ensure_roles
from runs.execution import executor
from runs.machine.errors import PermanentError
from runs.models import Workflow
from tests.factories import new_run


@pytest.fixture(autouse=True)
def cli_password(monkeypatch):
    """The console's test users all have the password "pw": a command that acts as one of
    them is given it, as a script gives it (console.cli.acting_user). Tests of the password
    rule itself set or remove it."""
    monkeypatch.setenv("CLI_PASSWORD", "pw")


@pytest.fixture
def roles(db):
    # Transactional tests flush the database, groups from the migration included.
    ensure_roles(Group, Permission)


@pytest.fixture
def operator(roles):
    user = User.objects.create_user("olga", password="pw")
    user.groups.add(Group.objects.get(name="operators"))
    return user


@pytest.fixture
def auditor(roles):
    user = User.objects.create_user("aude", password="pw")
    user.groups.add(Group.objects.get(name="auditors"))
    return user


@pytest.fixture
def finance_operator(db):
    """May see and act on test-orders runs only: object permissions on that workflow row."""
    user = User.objects.create_user("fin", password="pw")
    new_run()  # makes sure the workflow row exists
    workflow = Workflow.objects.get(name="test-orders")
    for codename in ("view_runs", "resume_run", "reconcile_run", "retry_step",
                     "terminate_run", "compensate_run"):
        assign_perm(f"runs.{codename}", user, workflow)
    return user


@pytest.fixture
def stuck_run(script):
    """A run in attention: its write step failed permanently."""
    script.plan["create-task"] = [PermanentError("403 from tracker: <script>alert(1)</script>")]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    return run


@pytest.fixture
def client_for(client):
    def login(user):
        client.force_login(user)
        return client

    return login
