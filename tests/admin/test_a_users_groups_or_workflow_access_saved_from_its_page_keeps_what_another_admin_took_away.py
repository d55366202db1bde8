"""A user, a group, or who may do what on a workflow, saved from its admin page, writes what
the person changed on that page, and keeps what another admin changed since the page was
shown. Django's pages saved the row whole, and each set (a user's groups and permissions, a
group's permissions, guardian's object permissions) whole, as posted: a person deactivated,
taken out of the admins' group, or out of staff or superuser status, by another admin after
the page was shown was back once this page was saved for a new address; a permission taken
from a group, or from a user on a workflow, was given back.

Now a field this person did not change keeps the row's value; a set is saved as it is with
this person's ticks and unticks; a field changed here and behind the page is refused. The
access chain records what was written.

Each page is loaded and posted as a browser does, the other admin's through their own
page too."""

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client
from guardian.shortcuts import assign_perm, get_perms

from audit.access import AccessAction, verify_access_chain
from audit.models import AccessRecord
from audit.page_edits import CHANGED_BEHIND_THE_PAGE
from runs.models import Workflow

from .change_pages import shown_form, ticked

pytestmark = pytest.mark.django_db


def signed_in(username: str) -> Client:
    user = User.objects.filter(username=username).first() or User.objects.create_superuser(
        username, f"{username}@example.com", "x")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def mine():
    return signed_in("root")


@pytest.fixture
def other():
    return signed_in("other")


def group_pk(name: str) -> str:
    return str(Group.objects.get(name=name).pk)


def permission_pk(codename: str) -> str:
    return str(Permission.objects.get(codename=codename, content_type__app_label="runs").pk)


# Changes a person makes on a page: its fields in, its fields out.
def untick(name):
    return lambda fields: ticked(fields, name, False)


def typed(name, text):
    return lambda fields: {**fields, name: [text]}


def with_member(name, key):
    return lambda fields: {**fields, name: [*fields.get(name, []), key()]}


def without_member(name, key):
    return lambda fields: {**fields, name: [v for v in fields.get(name, []) if v != key()]}


def saved(client, url: str, fields: dict) -> None:
    response = client.post(url, fields)
    assert response.status_code == 302, response.context["adminform"].form.errors


# --- a user's page -------------------------------------------------------------------------


@pytest.fixture
def eve():
    """A superuser on staff, in the operators' and admins' groups, allowed to terminate runs
    everywhere."""
    user = User.objects.create_superuser("eve", "eve@example.com", "x")
    user.groups.add(*Group.objects.filter(name__in=["operators", "admins"]))
    user.user_permissions.add(Permission.objects.get(codename="terminate_run"))
    return user


def user_url(user) -> str:
    return f"/admin/auth/user/{user.pk}/change/"


def state(user) -> dict:
    user = User.objects.get(pk=user.pk)
    return {"is_active": user.is_active, "is_staff": user.is_staff,
            "is_superuser": user.is_superuser,
            "groups": sorted(user.groups.values_list("name", flat=True)),
            "permissions": sorted(user.user_permissions.values_list("codename", flat=True)),
            "first_name": user.first_name, "email": user.email}


# (another admin's change on their page; this page's change; what the user is once saved,
# beside what the other admin left).
USER_CASES = {
    "deactivated behind, a name here": (
        untick("is_active"), typed("first_name", "Eve"),
        {"is_active": False, "first_name": "Eve"}),
    "out of the admins behind, an address here": (
        without_member("groups", lambda: group_pk("admins")),
        typed("email", "eve@example.org"),
        {"groups": ["operators"], "email": "eve@example.org"}),
    "out of staff behind, a name here": (
        untick("is_staff"), typed("first_name", "Eve"),
        {"is_staff": False, "first_name": "Eve"}),
    "no longer superuser behind, a name here": (
        untick("is_superuser"), typed("first_name", "Eve"),
        {"is_superuser": False, "first_name": "Eve"}),
    "a permission taken behind, a group given here": (
        without_member("user_permissions", lambda: permission_pk("terminate_run")),
        with_member("groups", lambda: group_pk("auditors")),
        {"permissions": [], "groups": ["admins", "auditors", "operators"]}),
    "out of the admins behind, into the auditors here": (
        without_member("groups", lambda: group_pk("admins")),
        with_member("groups", lambda: group_pk("auditors")),
        {"groups": ["auditors", "operators"]}),
}


@pytest.mark.parametrize("case", USER_CASES.values(), ids=USER_CASES.keys())
def test_a_users_page_keeps_what_another_admin_changed_since_it_was_shown(mine, other, eve,
                                                                         case):
    theirs, change, expected = case
    url = user_url(eve)
    fields = shown_form(mine, url, "user_form")
    saved(other, url, theirs(shown_form(other, url, "user_form")))
    left = state(eve)
    recorded = AccessRecord.objects.count()

    saved(mine, url, {**change(fields), "access_reason": ["mine"]})

    now = state(eve)
    assert now == {**left, **expected}
    assert_recorded_as_written(left, now, recorded)


def assert_recorded_as_written(left: dict, now: dict, recorded: int) -> None:
    """The access chain holds, for this person's save, one record of each part of the
    user's access it changed, from what the other admin left to what it is now."""
    access = {"is_active": AccessAction.ACCOUNT_ACTIVE_CHANGED,
              "is_staff": AccessAction.STAFF_STATUS_CHANGED,
              "is_superuser": AccessAction.SUPERUSER_STATUS_CHANGED,
              "groups": AccessAction.GROUP_MEMBERSHIP_CHANGED,
              "permissions": AccessAction.GLOBAL_PERMISSIONS_CHANGED}
    records = AccessRecord.objects.order_by("seq")[recorded:]
    changed = {key for key in access if left[key] != now[key]}
    assert {r.action for r in records} == {access[key] for key in changed}
    for record in records:
        assert record.actor_label == "root" and record.reason == "mine"
        (key,) = record.after.keys()
        if key == "permissions":
            assert record.before == {key: [f"runs.{c}" for c in left[key]]}
            assert record.after == {key: [f"runs.{c}" for c in now[key]]}
        else:
            assert (record.before, record.after) == ({key: left[key]}, {key: now[key]})
    assert verify_access_chain(AccessRecord.objects.order_by("seq")) is None


def test_a_field_changed_here_and_behind_the_page_is_refused(mine, other, eve):
    url = user_url(eve)
    fields = shown_form(mine, url, "user_form")
    saved(other, url, typed("email", "eve@other.example")(shown_form(other, url, "user_form")))

    response = mine.post(url, {**fields, "email": ["eve@mine.example"], "first_name": ["E"]})

    assert response.status_code == 200
    assert CHANGED_BEHIND_THE_PAGE in response.context["adminform"].form.errors["email"]
    assert (state(eve)["email"], state(eve)["first_name"]) == ("eve@other.example", "")


# --- a group's page ------------------------------------------------------------------------


def test_a_groups_page_keeps_a_permission_another_admin_took_from_it(mine, other):
    crew = Group.objects.create(name="crew")
    crew.permissions.add(*Permission.objects.filter(codename__in=["view_runs",
                                                                  "terminate_run"]))
    url = f"/admin/auth/group/{crew.pk}/change/"
    fields = shown_form(mine, url, "group_form")
    saved(other, url, without_member(
        "permissions", lambda: permission_pk("terminate_run"))(
            shown_form(other, url, "group_form")))
    recorded = AccessRecord.objects.count()

    saved(mine, url, with_member("permissions", lambda: permission_pk("resume_run"))(fields))

    assert sorted(crew.permissions.values_list("codename", flat=True)) == [
        "resume_run", "view_runs"]
    (record,) = AccessRecord.objects.order_by("seq")[recorded:]
    assert (record.action, record.actor_label) == (
        AccessAction.GLOBAL_PERMISSIONS_CHANGED, "root")
    assert (record.before, record.after) == (
        {"permissions": ["runs.view_runs"]},
        {"permissions": ["runs.resume_run", "runs.view_runs"]})


# --- who may do what on a workflow (guardian's pages) ------------------------------------


@pytest.fixture
def workflow():
    return Workflow.objects.get_or_create(name="test-approval")[0]


def holder_of(kind: str):
    return User.objects.create_user("bob") if kind == "user" else \
        Group.objects.create(name="crew")


def access_url(workflow, kind: str, holder) -> str:
    return f"/admin/runs/workflow/{workflow.pk}/permissions/{kind}-manage/{holder.pk}/"


# (what the holder has; what another admin leaves ticked on their page; what this page
# ticks; what the holder has once saved).
ACCESS_CASES = {
    "a right revoked behind, another granted here": (
        ["view_runs", "resume_run", "terminate_run"], ["view_runs", "resume_run"],
        ["view_runs", "resume_run", "terminate_run", "retry_step"],
        ["resume_run", "retry_step", "view_runs"]),
    "a right granted behind a page that showed none, another granted here": (
        [], ["view_runs"], ["resume_run"], ["resume_run", "view_runs"]),
}


@pytest.mark.parametrize("kind", ["user", "group"])
@pytest.mark.parametrize("case", ACCESS_CASES.values(), ids=ACCESS_CASES.keys())
def test_a_workflow_access_page_keeps_what_another_admin_changed_since_it_was_shown(
        mine, other, workflow, kind, case):
    held, theirs, ticks, expected = case
    holder = holder_of(kind)
    for codename in held:
        assign_perm(f"runs.{codename}", holder, workflow)
    url = access_url(workflow, kind, holder)
    fields = shown_form(mine, url)
    assert sorted(fields.get("permissions", [])) == sorted(held)
    assert other.post(url, {**shown_form(other, url), "permissions": theirs}).status_code == 302
    left = sorted(get_perms(holder, workflow))
    recorded = AccessRecord.objects.count()

    response = mine.post(url, {**fields, "permissions": ticks})

    assert response.status_code == 302
    assert sorted(get_perms(holder, workflow)) == expected
    (record,) = AccessRecord.objects.order_by("seq")[recorded:]
    assert (record.action, record.actor_label) == (
        AccessAction.OBJECT_PERMISSION_GRANTED, "root")
    assert (record.before, record.after) == ({"permissions": left},
                                             {"permissions": expected})
    assert verify_access_chain(AccessRecord.objects.order_by("seq")) is None
