"""A token is scoped to workflows: a bulk job it starts acts on runs of those workflows only.
The console's workflow filter matches a part of a name; the API's names one workflow whole,
so a token for test-agent, filtering on its one workflow, never reaches test-agent-saga's
runs (its person may act there, the token may not)."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from api.tokens import token_create
from approvals.bulk import run_bulk_job
from approvals.models import BulkJob
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def test_a_filter_naming_the_tokens_workflow_never_reaches_one_whose_name_holds_it(client):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get(name="operators"))  # may act on every workflow
    _, plaintext = token_create(name="agents", workflows=["test-agent"], acting_user=olga)
    mine = place(new_run("test-agent"), status=RunStatus.ATTENTION)
    not_mine = place(new_run("test-agent-saga"), status=RunStatus.ATTENTION)

    response = client.post("/api/bulk", {"action": "terminate", "reason": "cleanup",
                                         "filters": {"workflow": "test-agent"}},
                           content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 202, response.content
    assert response.json()["total"] == 1
    run_bulk_job(BulkJob.objects.get().pk)  # what the worker the hint wakes does

    assert Run.objects.get(pk=mine.pk).status == RunStatus.TERMINATED
    assert Run.objects.get(pk=not_mine.pk).status == RunStatus.ATTENTION
    assert list(AuditRecord.objects.filter(action="terminated")
                .values_list("run_id", flat=True)) == [mine.pk]
