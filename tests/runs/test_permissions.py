"""The permission rule in its two shapes (every workflow at once for lists, one run in one
query for an action, that query locking the run where the action goes on to change it)
gives the same answer for every way of holding a permission."""

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from guardian.shortcuts import assign_perm

from runs.models import Workflow
from runs.permissions import grant_for, run_access
from tests.factories import new_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def people():
    global_group = Group.objects.create(name="resumers")
    global_group.permissions.add(Permission.objects.get(codename="resume_run"))
    orders_group = Group.objects.create(name="orders-resumers")
    new_run("test-orders")
    orders = Workflow.objects.get(name="test-orders")
    assign_perm("runs.resume_run", orders_group, orders)
    made = {
        "superuser": User.objects.create_superuser("root", password="x"),
        "global_direct": User.objects.create_user("gd"),
        "global_group": User.objects.create_user("gg"),
        "object_direct": User.objects.create_user("od"),
        "object_group": User.objects.create_user("og"),
        "other_codename": User.objects.create_user("oc"),
        "nobody": User.objects.create_user("nb"),
        "inactive": User.objects.create_user("in", is_active=False),
    }
    made["global_direct"].user_permissions.add(Permission.objects.get(codename="resume_run"))
    made["global_group"].groups.add(global_group)
    assign_perm("runs.resume_run", made["object_direct"], orders)
    made["object_group"].groups.add(orders_group)
    assign_perm("runs.terminate_run", made["other_codename"], orders)
    made["inactive"].user_permissions.add(Permission.objects.get(codename="resume_run"))
    return made


def test_one_run_and_every_workflow_give_the_same_answer(people):
    runs = [new_run("test-orders"), new_run("test-saga")]
    expected = {"superuser": [True, True], "global_direct": [True, True],
                "global_group": [True, True], "object_direct": [True, False],
                "object_group": [True, False], "other_codename": [False, False],
                "nobody": [False, False], "inactive": [False, False]}
    for name, user in people.items():
        user = User.objects.get(pk=user.pk)  # no permission cache from the fixture
        with CaptureQueriesContext(connection) as queries:
            one_by_one = [run_access(user, "resume_run", run.pk).allowed for run in runs]
        assert len(queries) == len(runs), name
        grant = grant_for(user, "resume_run")
        assert one_by_one == [grant.covers(run.workflow_id) for run in runs] == expected[name], \
            name
        # The shape that also locks the run (an operator action): the same answer, and the
        # run's row with it, from one statement.
        with transaction.atomic(), CaptureQueriesContext(connection) as queries:
            locked = [run_access(user, "resume_run", run.pk, lock=True) for run in runs]
        assert [a.allowed for a in locked] == expected[name], name
        assert [a.run.pk for a in locked] == [run.pk for run in runs]
        assert [q["sql"].endswith("FOR UPDATE") for q in queries.captured_queries
                if not q["sql"].startswith("SAVEPOINT")] == [True] * len(runs), name


def test_no_such_run_is_none_and_the_chain_head_comes_with_the_answer(people):
    run = new_run("test-orders")
    access = run_access(people["object_direct"], "resume_run", run.pk)
    assert (access.workflow_id, access.audit_seq) == (run.workflow_id, run.audit_seq)
    assert run_access(people["superuser"], "resume_run", 2**62) is None
    assert run_access(people["nobody"], "resume_run", 2**62) is None
