"""The console's bulk job page links the request that decides the job's waiting runs: once
a decision finds what may have happened in them changed, the request it replaced is
closed, and the page links its successor, not the request nobody may decide any more."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.urls import reverse

from approvals.decisions import decide
from console.roles import ensure_roles
from runs.models import Step, StepStatus
from tests.approvals.bulk_requests import bulk_terminate, run_with_an_effect

pytestmark = pytest.mark.django_db


def test_the_page_links_the_pending_request_and_not_the_replaced_one(client):
    ensure_roles(Group, Permission)
    olga, carl = User.objects.create_user("olga"), User.objects.create_user("carl")
    for user in (olga, carl):
        user.groups.add(Group.objects.get(name="operators"))
    runs = [run_with_an_effect(), run_with_an_effect()]
    job = bulk_terminate(user=carl)
    first = job.approval_id
    Step.objects.filter(run=runs[0], name="post-ledger").update(status=StepStatus.UNKNOWN)
    live = decide(first, user=olga, approved=True, decision_id=uuid.uuid4(),
                  comment="ok").new_request.pk

    client.force_login(carl)
    page = client.get(reverse("console:bulk_job", args=[job.pk])).content.decode()

    assert reverse("approvals:detail", args=[live]) in page
    assert reverse("approvals:detail", args=[first]) not in page
