"""What an approver is shown, on the request page and in the email: a declared sensitive
value the approval step reads (in clear, through ctx.results) is masked wherever the request
is stored, shown or mailed, yet a change of it still supersedes the request; characters that
make a value read as another (bidi overrides) are shown by their code; a value holding a line
break cannot add a row of its own to the email."""

import uuid
from urllib.parse import urlparse

import pytest
from django.db import connection

from approvals import decisions, notifications
from approvals.models import ApprovalRequest
from runs.definitions import definition
from runs.definitions.definition import Workflow
from runs.execution import executor
from runs.machine import sensitive
from runs.models import Run, RunStatus, Step
from tests.approvals.conftest import open_request, waiting_run
from tests.factories import new_run
from tests.workflows import OrderIn

pytestmark = pytest.mark.django_db

IBAN = "DE89370400440532013000"
OTHER_IBAN = "FR7630006000011234567890189"
RLO, PDF = "\u202e", "\u202c"


def tables_holding(text: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        found = []
        for (table,) in cursor.fetchall():
            cursor.execute(f'SELECT count(*) FROM "{table}" t WHERE t::text LIKE %s',
                           [f"%{text}%"])
            if cursor.fetchone()[0]:
                found.append(table)
    return found


@pytest.fixture
def paying_to_an_account():
    """A read step returning a bank account it declares sensitive, and an approval step
    whose snapshot shows the account the payment goes to."""
    workflow = Workflow("test-approval-of-a-sensitive-account", version=1, input=OrderIn)

    @workflow.read("fetch-account", sensitive=("iban",))
    def fetch_account(ctx):
        return {"holder": "ACME", "iban": IBAN}

    @workflow.approval("approve", approvers=("group:approvers",), on_timeout="reject")
    def approve(ctx):
        account = ctx.results["fetch-account"]
        return {"holder": account["holder"], "iban": account["iban"],
                "amount": ctx.input.amount}

    yield workflow
    definition.registry.unregister(workflow)


def _request_for_sensitive_account() -> ApprovalRequest:
    run = new_run("test-approval-of-a-sensitive-account")
    executor.advance_run(run.pk, worker="w1")
    assert Run.objects.get(pk=run.pk).status == RunStatus.WAITING
    return open_request(run)


def _page(client, user, approval) -> str:
    client.force_login(user)
    response = client.get(f"/approvals/{approval.pk}/")
    assert response.status_code == 200
    return response.content.decode()


def test_a_sensitive_value_the_approval_step_reads_is_never_stored_shown_or_mailed_in_clear(
        paying_to_an_account, approvers, ann, client, mailoutbox):
    request = _request_for_sensitive_account()
    assert request.snapshot["iban"] == "[redacted]"
    assert request.snapshot["holder"] == "ACME" and request.snapshot["amount"] == 100
    notifications.publish_notifications()
    assert mailoutbox and all(IBAN not in m.body for m in mailoutbox)
    page = _page(client, ann, request)
    assert IBAN not in page and "ACME" in page
    assert decisions.decide(request.pk, user=ann, approved=True,
                            decision_id=uuid.uuid4()).recorded
    assert tables_holding(IBAN) == []


def test_a_changed_sensitive_value_still_supersedes_the_request(paying_to_an_account,
                                                                 approvers, ann):
    request = _request_for_sensitive_account()
    # The account was corrected while the request waited (sealed, as it is stored).
    Step.objects.filter(run_id=request.run_id, name="fetch-account").update(
        result={"holder": "ACME", "iban": sensitive.encrypt(OTHER_IBAN)})

    result = decisions.decide(request.pk, user=ann, approved=True, decision_id=uuid.uuid4())

    assert result.outcome == "superseded" and not result.recorded
    assert result.new_request.snapshot_hash != request.snapshot_hash
    assert result.new_request.snapshot["iban"] == "[redacted]"
    assert tables_holding(OTHER_IBAN) == []


def test_an_unchanged_sensitive_value_lets_the_approval_through(paying_to_an_account,
                                                                 approvers, ann):
    request = _request_for_sensitive_account()
    assert decisions.decide(request.pk, user=ann, approved=True,
                            decision_id=uuid.uuid4()).recorded


def test_a_bidi_override_in_what_is_approved_is_shown_by_its_code_on_the_page_and_in_the_mail(
        approvers, ann, client, mailoutbox):
    # Displayed as is, this reads "INV-1 EUR 1000" while the data says otherwise.
    request = open_request(waiting_run(order=f"INV-1 {RLO}0001 RUE{PDF}"))
    page = _page(client, ann, request)
    assert RLO not in page and "INV-1 &lt;U+202E&gt;0001 RUE&lt;U+202C&gt;" in page
    notifications.publish_notifications()
    body = mailoutbox[0].body
    assert RLO not in body and "Order: INV-1 <U+202E>0001 RUE<U+202C>" in body


def test_a_line_break_in_a_value_cannot_add_a_row_to_the_mail(approvers, mailoutbox):
    open_request(waiting_run(order="INV-1\r\n  Amount: 1", amount=250_000))
    notifications.publish_notifications()
    body = mailoutbox[0].body
    rows = [line for line in body.splitlines() if line.startswith("  ") and ": " in line
            and not line.startswith("   ")]
    assert rows == ["  Amount: 250000", "  Order: INV-1"]
    # The value's second line, indented under the value it belongs to.
    assert " " * len("  Order: ") + "  Amount: 1" in body.splitlines()
    # The link still comes through on its own line.
    assert any(urlparse(line).path.startswith("/approvals/") for line in body.splitlines()
               if line.startswith("http://testserver/"))
