"""An approval step's snapshot that masks a sensitive value binds the value by a keyed hash,
stored with it as its field masked_values_hmac, so that a request is superseded when the
value changes. That field is the runtime's, not what anyone approves: the approval page and
its email show the snapshot without it, and the step's rule (approve_if) is asked with the
snapshot as a person is shown it. The request still holds it, under its payload hash. A
step function's own field of that name would be approved unseen: no request is made of it."""

import pytest
from django.urls import reverse

from approvals import notifications, requests
from approvals.models import ApprovalRequest
from approvals.snapshots import MASKED_VALUES_FIELD, snapshot_hash, snapshot_rows
from runs.definitions import definition
from runs.definitions.definition import Workflow
from runs.execution import executor
from runs.models import AttentionReason, RunStatus
from tests.approvals.conftest import open_request
from tests.factories import new_run
from tests.workflows import OrderIn

pytestmark = pytest.mark.django_db

WORKFLOW = "test-approval-of-a-masked-account"
IBANS = {"acme": "DE89370400440532013000", "umbrella": "FR7630006000011234567890189"}


@pytest.fixture
def given_to_the_rule():
    """An approval step showing a bank account its read step declares sensitive, whose rule
    keeps what it is asked with and asks a person."""
    judged = []
    workflow = Workflow(WORKFLOW, version=1, input=OrderIn)

    @workflow.read("fetch-account", sensitive=("iban",))
    def fetch_account(ctx):
        return {"holder": ctx.input.order, "iban": IBANS[ctx.input.order]}

    def rule(snapshot):
        judged.append(snapshot)
        return True

    @workflow.approval("approve", approvers=("group:approvers",), on_timeout="reject",
                       approve_if=rule)
    def approve(ctx):
        account = ctx.results["fetch-account"]
        return {"holder": account["holder"], "iban": account["iban"],
                "amount": ctx.input.amount}

    yield judged
    definition.registry.unregister(workflow)


def _asked(order: str) -> ApprovalRequest:
    run = new_run(WORKFLOW, order=order)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    return open_request(run)


def test_the_rule_is_asked_with_the_snapshot_as_a_person_is_shown_it(given_to_the_rule,
                                                                      approvers):
    request = _asked("acme")

    (judged,) = given_to_the_rule
    assert judged == {"holder": "acme", "iban": "[redacted]", "amount": 100}
    # What the request holds is bound to the account by the field and the hash over it.
    assert request.snapshot == {**judged, MASKED_VALUES_FIELD: request.snapshot[
        MASKED_VALUES_FIELD]}
    assert snapshot_hash(request.snapshot) == request.snapshot_hash


def test_the_approval_page_and_its_email_do_not_show_the_field(given_to_the_rule, approvers,
                                                                ann, client, mailoutbox):
    request = _asked("acme")
    bound = request.snapshot[MASKED_VALUES_FIELD]

    client.force_login(ann)
    page = client.get(reverse("approvals:detail", kwargs={"pk": request.pk})).content.decode()
    assert "Holder" in page and "[redacted]" in page and request.snapshot_hash in page
    notifications.publish_notifications()
    assert mailoutbox
    for shown in (page, *(mail.body for mail in mailoutbox)):
        assert bound not in shown
        assert "Masked values hmac" not in shown and MASKED_VALUES_FIELD not in shown
        assert "DE89370400440532013000" not in shown


def test_another_account_is_shown_alike_and_still_asked_about_anew(given_to_the_rule,
                                                                   approvers):
    acme, umbrella = _asked("acme"), _asked("umbrella")
    assert sorted(r.label for r in snapshot_rows(acme.snapshot)) == ["Amount", "Holder", "Iban"]
    assert snapshot_rows({**acme.snapshot, "holder": "umbrella"}) == snapshot_rows(
        umbrella.snapshot)
    # What a person cannot see differ is still told apart by the hash.
    assert acme.snapshot[MASKED_VALUES_FIELD] != umbrella.snapshot[MASKED_VALUES_FIELD]
    assert {**acme.snapshot, "holder": "umbrella"} != umbrella.snapshot


def test_a_snapshot_with_a_field_of_that_name_is_asked_of_nobody_and_says_why(approvers, t0):
    """Nobody would be shown what the step function put under that name."""
    workflow = Workflow("test-approval-naming-the-binding-field", version=1, input=OrderIn)
    workflow.approval("approve", approvers=("group:approvers",), on_timeout="reject")(
        lambda ctx: {"amount": ctx.input.amount, MASKED_VALUES_FIELD: "pay the other account"})
    try:
        run = new_run("test-approval-naming-the-binding-field")
        assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING

        assert requests.open_pending_requests(now=t0) == 0
        assert not ApprovalRequest.objects.filter(run=run).exists()
        run.refresh_from_db()
        assert run.status == RunStatus.ATTENTION
        assert run.attention_reason == AttentionReason.APPROVAL_UNASKABLE
        assert f"has a field named {MASKED_VALUES_FIELD}" in run.status_message
    finally:
        definition.registry.unregister(workflow)
