"""Who may do what, in admin: the page of a workflow and the page of a user list it from
superuser status, global permissions, group membership and guardian's object permissions;
the role form grants and revokes a role on a workflow; every permission change made in
admin, and every API token created or revoked, is in the access chain, which verify_audit
checks and the console's audit page and CSV show."""

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from guardian.shortcuts import assign_perm, get_perms

from api.models import ApiToken
from api.tokens import token_create, token_revoke
from audit.access import AccessAction, verify_access_chain
from audit.models import AccessRecord, AppendOnlyError
from runs.models import Workflow

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(client):
    user = User.objects.create_superuser("root", "root@example.com", "x")
    client.force_login(user)
    return user


@pytest.fixture
def workflow():
    return Workflow.objects.get_or_create(name="test-approval")[0]


def access_page(client, workflow):
    response = client.get(f"/admin/runs/workflow/{workflow.pk}/access/")
    assert response.status_code == 200
    return {row.label: row.holders for row in response.context["rows"]}


def names(holders, scope=None):
    return {h.name for h in holders if scope is None or h.scope == scope}


def test_the_workflow_page_lists_who_may_do_what_and_through_what(client, root, workflow):
    alice = User.objects.create_user("alice")
    alice.groups.add(Group.objects.get(name="operators"))
    ann = User.objects.create_user("ann")
    ann.groups.add(Group.objects.get(name="approvers"))
    User.objects.create_user("nobody")
    dora = User.objects.create_user("dora")
    dora.user_permissions.add(Permission.objects.get(codename="decide_approvalrequest"))
    rows = access_page(client, workflow)
    assert names(rows["view runs"]) >= {"root", "operators", "approvers", "auditors"}
    resume = rows["Resume (resume)"]
    assert {(h.kind, h.name, h.scope) for h in resume} >= {
        ("superuser", "root", "global"), ("group", "operators", "global")}
    assert [h.members for h in resume if h.name == "operators"] == [("alice",)]
    assert "nobody" not in str(rows) and "approvers" not in names(resume)
    approve = rows["approve: step approve"]
    assert ("group", "approvers", "named approver") in {(h.kind, h.name, h.scope)
                                                        for h in approve}
    assert "dora" in names(approve, "global") and "root" in names(approve)
    four_eyes = rows["decide a four-eyes request"]
    assert "operators" in names(four_eyes, "four-eyes approver") and "dora" in names(four_eyes)


def test_the_role_form_grants_and_revokes_a_role_and_the_pages_show_it(client, root,
                                                                       workflow):
    bob = User.objects.create_user("bob")
    page = client.get(f"/admin/runs/workflow/{workflow.pk}/role/")
    assert page.status_code == 200 and 'name="csrfmiddlewaretoken"' in page.text
    response = client.post(f"/admin/runs/workflow/{workflow.pk}/role/", {
        "user": bob.pk, "role": "operators", "operation": "grant", "reason": "on call"})
    assert response.status_code == 302
    assert set(get_perms(bob, workflow)) == {"view_runs", "resume_run", "reconcile_run",
                                            "retry_step", "compensate_run", "terminate_run",
                                            "pause_dispatch"}
    assert names(access_page(client, workflow)["Terminate (terminate)"], "this workflow") \
        == {"bob"}
    mine = client.get(f"/admin/auth/user/{bob.pk}/access/").context["rows"]
    assert ("test-approval", "Terminate (terminate)", ("on this workflow",)) in {
        (r.workflow, r.label, r.through) for r in mine}
    granted = AccessRecord.objects.get()
    assert granted.action == AccessAction.OBJECT_PERMISSION_GRANTED
    assert granted.subject == "user bob on workflow test-approval"
    assert granted.actor_label == "root" and granted.reason == "on call"
    assert granted.before == {"permissions": []}
    assert "terminate_run" in granted.after["permissions"]

    # Granting auditors on top of operators changes nothing, and records nothing.
    client.post(f"/admin/runs/workflow/{workflow.pk}/role/", {
        "user": bob.pk, "role": "auditors", "operation": "grant"})
    assert AccessRecord.objects.count() == 1
    client.post(f"/admin/runs/workflow/{workflow.pk}/role/", {
        "user": bob.pk, "role": "operators", "operation": "revoke", "reason": "rota ended"})
    assert get_perms(bob, workflow) == []
    revoked = AccessRecord.objects.order_by("-seq").first()
    assert revoked.action == AccessAction.OBJECT_PERMISSION_REVOKED
    assert revoked.before == granted.after and revoked.after == {"permissions": []}
    assert revoked.reason == "rota ended"
    assert "bob" not in str(access_page(client, workflow))


@pytest.mark.parametrize(("operation", "done"), [("grant", "granted"), ("revoke", "revoked")])
def test_the_role_form_says_in_words_what_it_did(client, root, workflow, operation, done):
    bob = User.objects.create_user("bob")
    if operation == "revoke":
        client.post(f"/admin/runs/workflow/{workflow.pk}/role/", {
            "user": bob.pk, "role": "operators", "operation": "grant"}, follow=True)
    response = client.post(f"/admin/runs/workflow/{workflow.pk}/role/", {
        "user": bob.pk, "role": "operators", "operation": operation}, follow=True)
    assert [str(m) for m in response.context["messages"]] == [
        f"Role operators {done} on test-approval for bob."]


def test_the_role_form_grants_to_a_group_and_refuses_bad_input_changing_nothing(client, root,
                                                                                workflow):
    finance = Group.objects.create(name="finance")
    bob = User.objects.create_user("bob")
    url = f"/admin/runs/workflow/{workflow.pk}/role/"
    for bad in ({"user": bob.pk, "group": finance.pk, "role": "operators",
                 "operation": "grant"},
                {"role": "operators", "operation": "grant"},
                {"user": bob.pk, "role": "kings", "operation": "grant"}):
        response = client.post(url, bad)
        assert response.status_code == 400 and "errorlist" in response.text
    assert get_perms(bob, workflow) == [] and get_perms(finance, workflow) == []
    assert AccessRecord.objects.count() == 0
    client.post(url, {"group": finance.pk, "role": "auditors", "operation": "grant"})
    assert get_perms(finance, workflow) == ["view_runs"]
    assert AccessRecord.objects.get().subject == "group finance on workflow test-approval"


def test_staff_without_the_change_permission_cannot_grant_roles(client, workflow):
    clerk = User.objects.create_user("clerk", password="x", is_staff=True)
    clerk.user_permissions.add(Permission.objects.get(codename="view_workflow"))
    client.force_login(clerk)
    assert client.get(f"/admin/runs/workflow/{workflow.pk}/access/").status_code == 200
    response = client.post(f"/admin/runs/workflow/{workflow.pk}/role/", {
        "user": clerk.pk, "role": "operators", "operation": "grant"})
    assert response.status_code == 403
    assert get_perms(clerk, workflow) == [] and AccessRecord.objects.count() == 0


def test_the_access_pages_make_as_many_queries_for_3_users_as_for_12(client, root, workflow):
    def counts():
        out = []
        for url in (f"/admin/runs/workflow/{workflow.pk}/access/",
                    f"/admin/auth/user/{root.pk}/access/"):
            with CaptureQueriesContext(connection) as ctx:
                assert client.get(url).status_code == 200
            out.append(len(ctx))
        return out

    def more(n, start):
        for i in range(start, start + n):
            user = User.objects.create_user(f"u{i}")
            user.groups.add(Group.objects.get(name="operators"))
            client.post(f"/admin/runs/workflow/{workflow.pk}/role/", {
                "user": user.pk, "role": "auditors", "operation": "grant"})

    more(3, 0)
    few = counts()
    more(9, 3)
    assert counts() == few


def user_form(user, **changes):
    data = {"username": user.username, "first_name": "", "last_name": "", "email": "",
            "is_active": "on", "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00",
            "groups": [g.pk for g in user.groups.all()],
            "user_permissions": [p.pk for p in user.user_permissions.all()],
            "initial-date_joined_0": "2026-01-01", "initial-date_joined_1": "00:00:00"}
    if user.is_staff:
        data["is_staff"] = "on"
    if user.is_superuser:
        data["is_superuser"] = "on"
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def test_admin_changes_to_a_users_access_are_recorded_with_before_and_after(client, root):
    eve = User.objects.create_user("eve")
    operators = Group.objects.get(name="operators")
    perm = Permission.objects.get(codename="terminate_run")
    response = client.post(f"/admin/auth/user/{eve.pk}/change/", user_form(
        eve, is_staff="on", groups=[operators.pk], user_permissions=[perm.pk],
        access_reason="joins the operations team"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    records = {r.action: r for r in AccessRecord.objects.all()}
    assert set(records) == {AccessAction.STAFF_STATUS_CHANGED,
                            AccessAction.GROUP_MEMBERSHIP_CHANGED,
                            AccessAction.GLOBAL_PERMISSIONS_CHANGED}
    assert records[AccessAction.STAFF_STATUS_CHANGED].before == {"is_staff": False}
    assert records[AccessAction.STAFF_STATUS_CHANGED].after == {"is_staff": True}
    assert records[AccessAction.GROUP_MEMBERSHIP_CHANGED].after == {"groups": ["operators"]}
    assert records[AccessAction.GLOBAL_PERMISSIONS_CHANGED].after == {
        "permissions": ["runs.terminate_run"]}
    assert {r.subject for r in records.values()} == {"user eve"}
    assert {r.actor_label for r in records.values()} == {"root"}
    assert {r.reason for r in records.values()} == {"joins the operations team"}

    eve.refresh_from_db()
    client.post(f"/admin/auth/user/{eve.pk}/change/", user_form(eve, is_superuser="on"))
    latest = AccessRecord.objects.order_by("-seq").first()
    assert latest.action == AccessAction.SUPERUSER_STATUS_CHANGED and latest.reason == ""
    # A save that changes nothing about access writes nothing.
    eve.refresh_from_db()
    client.post(f"/admin/auth/user/{eve.pk}/change/", user_form(eve, first_name="Eve"))
    assert AccessRecord.objects.count() == 4


def test_a_groups_permissions_changed_in_admin_are_recorded(client, root):
    auditors = Group.objects.get(name="auditors")
    perms = list(auditors.permissions.values_list("pk", flat=True))
    extra = Permission.objects.get(codename="resume_run")
    response = client.post(f"/admin/auth/group/{auditors.pk}/change/", {
        "name": "auditors", "permissions": [*perms, extra.pk], "access_reason": "audit drill"})
    assert response.status_code == 302
    record = AccessRecord.objects.get()
    assert record.action == AccessAction.GLOBAL_PERMISSIONS_CHANGED
    assert record.subject == "group auditors" and record.reason == "audit drill"
    assert record.before == {"permissions": ["runs.view_runs"]}
    assert record.after == {"permissions": ["runs.resume_run", "runs.view_runs"]}


def test_guardians_object_permission_form_is_recorded(client, root, workflow):
    bob = User.objects.create_user("bob")
    url = f"/admin/runs/workflow/{workflow.pk}/permissions/user-manage/{bob.pk}/"
    response = client.post(url, {"permissions": ["view_runs", "resume_run"]})
    assert response.status_code == 302
    assert set(get_perms(bob, workflow)) == {"view_runs", "resume_run"}
    record = AccessRecord.objects.get()
    assert record.action == AccessAction.OBJECT_PERMISSION_GRANTED
    assert record.after == {"permissions": ["resume_run", "view_runs"]}
    client.post(url, {"permissions": ["view_runs"]})
    assert AccessRecord.objects.order_by("-seq").first().action == \
        AccessAction.OBJECT_PERMISSION_REVOKED


def test_api_tokens_created_and_revoked_are_recorded_without_their_secret(client, root):
    token, plaintext = token_create(name="erp", workflows=["test-orders"], created_by=root)
    assert token_revoke(token, by=root)
    assert not token_revoke(token, by=root)  # already revoked: nothing more recorded
    response = client.post("/admin/api/apitoken/add/", {
        "name": "ci", "workflows": ["test-orders"], "rate_limit": "", "expires_at": ""})
    assert response.status_code == 200
    actions = list(AccessRecord.objects.values_list("action", "subject"))
    assert actions == [(AccessAction.API_TOKEN_CREATED, "token erp"),
                       (AccessAction.API_TOKEN_REVOKED, "token erp"),
                       (AccessAction.API_TOKEN_CREATED, "token ci")]
    created = AccessRecord.objects.get(seq=1)
    assert created.after["workflows"] == ["test-orders"] and created.actor_label == "root"
    assert plaintext not in str(list(AccessRecord.objects.values()))
    ci = ApiToken.objects.get(name="ci")
    client.post(f"/admin/api/apitoken/{ci.pk}/change/", {
        "name": "ci", "workflows": ["test-orders", "test-saga"], "rate_limit": "",
        "expires_at": ""})
    changed = AccessRecord.objects.order_by("-seq").first()
    assert changed.action == AccessAction.API_TOKEN_SCOPE_CHANGED
    assert changed.before["workflows"] == ["test-orders"]
    assert changed.after["workflows"] == ["test-orders", "test-saga"]


def test_the_access_chain_is_append_only_and_verify_audit_finds_a_forged_record(client,
                                                                               root):
    token_create(name="erp", workflows=["test-orders"], created_by=root)
    token_create(name="crm", workflows=["test-orders"], created_by=root)
    records = list(AccessRecord.objects.order_by("seq"))
    assert [r.seq for r in records] == [1, 2] and records[1].prev_hash == records[0].hash
    assert verify_access_chain(records) is None
    call_command("verify_audit")
    with pytest.raises(AppendOnlyError):
        records[0].delete()
    with pytest.raises(AppendOnlyError):
        AccessRecord.objects.filter(pk=records[0].pk).update(reason="x")
    # A client that bypasses the model meets the trigger.
    with pytest.raises(Exception, match="append-only"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("UPDATE audit_accessrecord SET reason = 'x'")
    # A record slipped in at the end of the chain with a made-up hash is found.
    last = records[-1]
    with transaction.atomic():
        forged = AccessRecord(seq=3, action="object_permission_granted", subject="user mallory",
                              actor_kind="user", actor_label="root", before={}, after={},
                              created_at=last.created_at, prev_hash=last.hash, hash="0" * 64)
        forged.save()
    with pytest.raises(CommandError, match="access chain is broken at .* seq=3"):
        call_command("verify_audit")
    with pytest.raises(IntegrityError), transaction.atomic():
        AccessRecord(seq=3, action="x", subject="y", actor_kind="user", actor_label="z",
                     created_at=last.created_at, prev_hash="", hash="").save()


def test_the_console_audit_page_and_its_csv_show_the_access_chain_to_auditors(client, root):
    token_create(name="erp", workflows=["test-orders"], created_by=root)
    auditor = User.objects.create_user("audrey")
    auditor.groups.add(Group.objects.get(name="auditors"))
    client.force_login(auditor)
    page = client.get("/audit/", {"log": "access"})
    assert page.status_code == 200
    assert "api_token_created" in page.text and "token erp" in page.text
    csv = b"".join(client.get("/audit/", {"log": "access", "format": "csv"})
                   .streaming_content).decode()
    assert csv.splitlines()[0].startswith("seq,time,actor,action,subject")
    assert "api_token_created" in csv and "token erp" in csv
    # An operator of one workflow does not read who was given what.
    other = User.objects.create_user("olga")
    assign_perm("runs.view_runs", other, Workflow.objects.get_or_create(name="test-orders")[0])
    client.force_login(other)
    assert client.get("/audit/", {"log": "access"}).status_code == 403
    assert client.get("/audit/", {"log": "access", "format": "csv"}).status_code == 403
