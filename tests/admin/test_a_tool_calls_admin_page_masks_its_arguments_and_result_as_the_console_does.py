"""A tool call's page in Django admin shows its arguments and its result as the console's
conversation shows them (runs.machine.sensitive.shown): anything that looks like a
credential masked, and, for a call whose tool is no longer declared, nothing at all. Admin
showed every field of the row as stored, a password the model passed to a tool and the API
key a tool returned included, to every staff member who may view tool calls."""

import uuid

import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone

from audit.redaction import REDACTED
from runs.models import Step, ToolCall
from tests.factories import new_run

pytestmark = pytest.mark.django_db

SECRETS = ["hunter2-secret", "sk-live-ABCDEF0123456789abcdef", "result-key-xyz"]


def call_with_secrets(step, tool: str, index: int) -> ToolCall:
    return ToolCall.objects.create(
        step=step, turn=1, index=index, call_id=f"c{index}", tool=tool, args_hash="h",
        idempotency_key=uuid.uuid4().hex, updated_at=timezone.now(),
        arguments={"text": "a note", "password": SECRETS[0],
                   "auth": f"Bearer {SECRETS[1]}"},
        result={"note": "NOTE-1", "api_key": SECRETS[2]})


@pytest.fixture
def viewer(client):
    user = User.objects.create_user("auditor", password="x", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename="view_toolcall"))
    client.force_login(user)
    return client


def test_a_declared_tools_call_is_shown_with_its_credentials_masked(viewer):
    step = Step.objects.get(run=new_run("test-agent"), name="assist")
    call = call_with_secrets(step, "write-note", 1)
    page = viewer.get(f"/admin/runs/toolcall/{call.pk}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert not [s for s in SECRETS if s in text]
    # What is no secret is still shown, and the mask says something was there.
    assert "a note" in text and "NOTE-1" in text and REDACTED in text
    # The row itself keeps what the call runs with.
    assert ToolCall.objects.get(pk=call.pk).arguments["password"] == SECRETS[0]


def test_a_call_of_a_tool_no_longer_declared_shows_no_argument_or_result(viewer):
    step = Step.objects.get(run=new_run("test-agent"), name="assist")
    call = call_with_secrets(step, "a-tool-a-release-removed", 2)
    text = viewer.get(f"/admin/runs/toolcall/{call.pk}/change/").content.decode()
    assert not [s for s in SECRETS if s in text]
    assert "a note" not in text and "NOTE-1" not in text and REDACTED in text
