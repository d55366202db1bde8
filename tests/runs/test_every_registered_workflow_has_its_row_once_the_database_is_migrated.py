"""Every workflow the code registers has its row once the database is migrated, before its
first run: the row is what per-workflow grants attach to, and on a new installation an admin
could give no one a role on a workflow (the admin's list of workflows was empty) until a run
of it had started. `migrate` makes the rows that are missing and leaves the others as they
are; a row of a workflow no longer registered stays."""

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from guardian.shortcuts import get_perms

from console.access import change_role
from runs.definitions.registry import registry
from runs.models import Run, Workflow

pytestmark = pytest.mark.django_db(transaction=True)


def _rows() -> dict[str, int]:
    return dict(Workflow.objects.values_list("name", "pk"))


def test_a_migrated_database_has_a_row_for_each_registered_workflow_and_no_run():
    assert not Run.objects.exists()
    assert set(registry.names()) <= set(_rows())


def test_migrate_makes_the_missing_rows_and_keeps_the_others():
    Workflow.objects.filter(name="test-saga").delete()
    Workflow.objects.create(name="retired-workflow")
    kept = {name: pk for name, pk in _rows().items()}

    call_command("migrate", verbosity=0)

    rows = _rows()
    assert "test-saga" in rows and "retired-workflow" in rows
    assert {name: rows[name] for name in kept} == kept
    assert sorted(n for n in rows if n in registry.names()) == registry.names()
    assert Workflow.objects.filter(name="test-orders").count() == 1


def test_an_admin_gives_a_role_on_a_workflow_no_run_has_started():
    root = User.objects.create_superuser("root")
    ann = User.objects.create_user("ann")
    workflow = Workflow.objects.get(name="test-orders")
    assert not Run.objects.exists()
    change_role(workflow=workflow, role="operators", grant=True, by=root, user=ann)
    assert "view_runs" in get_perms(ann, workflow)
