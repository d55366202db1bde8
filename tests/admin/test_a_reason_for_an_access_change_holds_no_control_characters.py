"""The reason given in admin for a change of who may do what is kept in the access chain for
good, and shown on pages and in CSV exports: it is held to the rule of every person's text
(line breaks and tabs, no escape sequences, no bidirectional overrides), and a change whose
reason breaks it is refused, saying why, with nothing changed."""

import pytest
from django.contrib.auth.models import Group, User
from guardian.shortcuts import get_perms

from audit.models import AccessRecord

from .test_access import root, user_form, workflow  # noqa: F401 - the fixtures

pytestmark = pytest.mark.django_db

BAD_REASONS = ["\x1b[2K\x1b[1Agranted by the CISO", "approved by \u202eOSIC", "a\x07b"]


@pytest.mark.parametrize("reason", BAD_REASONS)
def test_a_role_granted_with_a_control_character_in_its_reason_is_refused(
        client, root, workflow, reason):  # noqa: F811
    bob = User.objects.create_user("bob")
    response = client.post(f"/admin/runs/workflow/{workflow.pk}/role/", {
        "user": bob.pk, "role": "operators", "operation": "grant", "reason": reason})
    assert response.status_code == 400
    assert "The reason is text with the control character" in response.text
    assert get_perms(bob, workflow) == []
    assert AccessRecord.objects.count() == 0


@pytest.mark.parametrize("reason", BAD_REASONS)
def test_a_user_changed_with_a_control_character_in_the_reason_is_not_changed(
        client, root, reason):  # noqa: F811
    eve = User.objects.create_user("eve")
    response = client.post(f"/admin/auth/user/{eve.pk}/change/", user_form(
        eve, is_staff="on", groups=[Group.objects.get(name="operators").pk],
        access_reason=reason))
    assert response.status_code == 200
    assert "The reason is text with the control character" in response.text
    eve.refresh_from_db()
    assert not eve.is_staff and not eve.groups.exists()
    assert AccessRecord.objects.count() == 0


@pytest.mark.parametrize("reason", BAD_REASONS)
def test_a_group_changed_with_a_control_character_in_the_reason_is_not_changed(
        client, root, reason):  # noqa: F811
    auditors = Group.objects.get(name="auditors")
    before = list(auditors.permissions.values_list("pk", flat=True))
    response = client.post(f"/admin/auth/group/{auditors.pk}/change/", {
        "name": "auditors", "permissions": [], "access_reason": reason})
    assert response.status_code == 200
    assert "The reason is text with the control character" in response.text
    assert list(auditors.permissions.values_list("pk", flat=True)) == before
    assert AccessRecord.objects.count() == 0


def test_a_reason_of_several_lines_is_kept(client, root, workflow):  # noqa: F811
    bob = User.objects.create_user("bob")
    client.post(f"/admin/runs/workflow/{workflow.pk}/role/", {
        "user": bob.pk, "role": "auditors", "operation": "grant",
        "reason": "ticket OPS-12\n\tapproved by the team lead"})
    assert get_perms(bob, workflow) == ["view_runs"]
    assert AccessRecord.objects.get().reason == "ticket OPS-12\n\tapproved by the team lead"
