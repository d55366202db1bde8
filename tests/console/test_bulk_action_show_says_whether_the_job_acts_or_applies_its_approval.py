"""bulk_action show JOB says the job's phase, as its page and the API do: acting on the runs
its filter matched, or (its request approved) applying the approval to the runs that waited
for it. It said "status: running" in both, so a job running again after the approval read
as if it were still at its first pass, or as if the approval had done nothing yet."""

import io
import json
import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command

from approvals.bulk import run_bulk_job
from approvals.decisions import decide
from console.roles import ensure_roles
from tests.approvals.bulk_requests import bulk_terminate, run_with_an_effect

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(db, monkeypatch):
    """olga decides, carl asks (and shows his job)."""
    monkeypatch.setenv("CLI_PASSWORD", "pw")
    ensure_roles(Group, Permission)
    users = [User.objects.create_user(name, password="pw") for name in ("olga", "carl")]
    for user in users:
        user.groups.add(Group.objects.get(name="operators"))
    return users


def show(job_id: int, *flags: str) -> str:
    out = io.StringIO()
    call_command("bulk_action", "show", str(job_id), "--user", "carl", *flags, stdout=out)
    return out.getvalue()


def test_show_names_the_phase_before_and_after_the_approval(people):
    olga, carl = people
    for _ in range(3):
        run_with_an_effect()
    job = bulk_terminate(user=carl)

    assert "status: done  phase: acting on its runs  total: 3" in show(job.pk)
    assert json.loads(show(job.pk, "--json"))["phase"] == "acting"

    assert decide(job.approval_id, user=olga, approved=True,
                  decision_id=uuid.uuid4()).recorded

    assert "status: running  phase: applying the approval  total: 3" in show(job.pk)
    shown = json.loads(show(job.pk, "--json"))
    assert (shown["status"], shown["phase"], shown["outcomes"]) == (
        "running", "applying", {"second_person": 3})

    run_bulk_job(job.pk)

    assert "status: done  phase: applying the approval" in show(job.pk)
    shown = json.loads(show(job.pk, "--json"))
    assert (shown["status"], shown["phase"], shown["outcomes"]) == (
        "done", "applying", {"done": 3})
