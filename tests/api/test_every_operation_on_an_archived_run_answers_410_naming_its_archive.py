"""A run that finished and was archived is gone for good from every operation on it, not
only from its state: its history, its investigation and an action on it answer 410
`run_archived` naming the archive file, as GET /api/runs/{id} does. A 404 there read as a
wrong id (or a token without the workflow), and sent the integrator looking for a run that
is in an archive file."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from api.tokens import token_create
from archive.models import ArchiveFile
from audit.models import AuditRecord
from console.roles import ensure_roles
from tests.archived_runs import completed_and_archived

pytestmark = pytest.mark.django_db


@pytest.fixture
def archived(settings, tmp_path, script):
    return completed_and_archived(settings, tmp_path).run_id


@pytest.fixture
def bearer(db):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get(name="operators"))
    _, plaintext = token_create(name="erp", workflows=["test-orders"], acting_user=olga)
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


@pytest.mark.parametrize("method, path, body", [
    ("get", "/api/runs/{id}", None),
    ("get", "/api/runs/{id}/history", None),
    ("get", "/api/runs/{id}/investigation", None),
    ("post", "/api/runs/{id}/actions/terminate", {"reason": "cleanup"}),
    ("post", "/api/runs/{id}/actions/reopen", {"reason": "look again"}),
])
def test_the_answer_names_the_archive_file(client, archived, bearer, method, path, body):
    records_before = AuditRecord.objects.count()
    call = getattr(client, method)
    kwargs = {"data": body, "content_type": "application/json"} if body else {}

    response = call(path.format(id=archived), **kwargs, **bearer)

    assert response.status_code == 410, response.content
    answer = response.json()
    assert answer["error"] == "run_archived"
    assert answer["archived_run"]["id"] == archived
    assert answer["archived_run"]["archive_file"] == ArchiveFile.objects.get().name
    assert AuditRecord.objects.count() == records_before  # nothing done, nothing written


def test_a_run_that_never_was_is_still_not_found(client, archived, bearer):
    response = client.get(f"/api/runs/{archived + 1000}/history", **bearer)

    assert response.status_code == 404
    assert response.json()["error"] == "run_not_found"
