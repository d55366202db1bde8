"""The console finds archived runs by business key and shows them read only, to those who
may view runs of their workflow."""

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.urls import reverse
from guardian.shortcuts import assign_perm

from archive.archiving import archive_runs
from console.roles import ensure_roles
from runs.models import Workflow

pytestmark = pytest.mark.django_db


@pytest.fixture
def archived(finished_run):
    run = finished_run(days=40)
    assert archive_runs(actor="test").runs_removed == 1
    return run


@pytest.fixture
def operator(db):
    ensure_roles(Group, Permission)
    user = User.objects.create_user("olga", password="pw")
    user.groups.add(Group.objects.get(name="operators"))
    return user


def test_search_finds_an_archived_run_by_the_start_of_its_business_key(archived, operator,
                                                                       client):
    client.force_login(operator)

    page = client.get(reverse("console:runs"), {"q": archived.business_key[:12]})

    assert page.status_code == 200
    assert page.context["archived"][0].original_run_id == archived.pk
    assert reverse("console:archived_run", args=[archived.pk]) in page.content.decode()


def test_search_by_the_original_run_id_finds_an_archived_run(archived, operator, client):
    client.force_login(operator)

    page = client.get(reverse("console:runs"), {"q": str(archived.pk)})

    assert [t.original_run_id for t in page.context["archived"]] == [archived.pk]


def test_an_archived_run_page_shows_steps_and_audit_from_the_file_and_offers_no_action(
        archived, operator, client):
    client.force_login(operator)

    page = client.get(reverse("console:archived_run", args=[archived.pk]))

    assert page.status_code == 200
    html = page.content.decode()
    detail = page.context["detail"]
    assert [s["name"] for s in detail.steps] == ["fetch", "classify", "create-task",
                                                 "post-ledger"]
    assert len(detail.audit) == archived.audit_seq and detail.chain_problem is None
    assert "read only" in html and archived.business_key in html
    page_body = html.split('id="archived-run"', 1)[1]  # past the header's sign-out form
    assert "<form" not in page_body and "<button" not in page_body
    assert "hx-post" not in page_body and "hx-get" not in page_body
    assert "verified against the head recorded" in html


def test_an_archived_run_page_is_refused_without_view_permission_on_its_workflow(
        archived, client, finished_run):
    outsider = User.objects.create_user("otto", password="pw")
    # May view runs of another workflow only.
    other, _ = Workflow.objects.get_or_create(name="test-saga")
    assign_perm("runs.view_runs", outsider, other)
    client.force_login(outsider)

    assert client.get(reverse("console:archived_run", args=[archived.pk])).status_code == 403
    listing = client.get(reverse("console:runs"), {"q": archived.business_key})
    assert listing.status_code == 200 and listing.context["archived"] == []


def test_a_user_with_view_permission_on_that_workflow_only_may_open_it(archived, client):
    finance = User.objects.create_user("fin", password="pw")
    assign_perm("runs.view_runs", finance, Workflow.objects.get(name="test-orders"))
    client.force_login(finance)

    assert client.get(reverse("console:archived_run", args=[archived.pk])).status_code == 200


def test_an_unknown_archived_run_is_not_found(operator, client):
    client.force_login(operator)

    assert client.get(reverse("console:archived_run", args=[999_999])).status_code == 404


def test_the_old_link_to_an_archived_run_leads_to_its_archived_page(archived, operator,
                                                                    client):
    client.force_login(operator)

    page = client.get(reverse("console:run", args=[archived.pk]))

    assert page.status_code == 302
    assert page["Location"] == reverse("console:archived_run", args=[archived.pk])


def test_the_old_link_tells_who_may_not_view_the_workflow_nothing(archived, client):
    client.force_login(User.objects.create_user("mallory", password="pw"))

    assert client.get(reverse("console:run", args=[archived.pk])).status_code == 404
    assert client.get(reverse("console:run", args=[archived.pk + 1000])).status_code == 404
