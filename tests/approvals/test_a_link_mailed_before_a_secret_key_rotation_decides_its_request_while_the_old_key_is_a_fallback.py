"""Rotating SECRET_KEY (docs/operations.md, "Rotating SECRET_KEY"): the new key goes in
SECRET_KEY and the old one in SECRET_KEY_FALLBACKS. A link mailed before the rotation still
opens its request for the approver signed in before it, and the request is decided, not
superseded, also when what it shows has a masked sensitive value: the masked values are
bound by a hash keyed with SECRET_KEY (approvals.snapshots.masked_snapshot), and such a
request was refused as "The payload changed since this request was made" once the key
changed. A changed value still supersedes it. Once the old key is dropped, its link is
answered as not valid and counts against the address as a forged one, and a request with
masked values made under it is asked again: the runbook says both."""

import html
import uuid
from urllib.parse import urlparse

import pytest
from axes.models import AccessAttempt
from django.urls import reverse

from approvals import decisions, notifications
from approvals.models import ApprovalRequest, RequestStatus
from approvals.snapshots import MASKED_VALUES_FIELD
from approvals.throttle import LINK_USER
from approvals.views import SESSION_TOKENS
from runs.definitions import definition
from runs.definitions.definition import Workflow
from runs.execution import executor
from runs.machine import sensitive
from runs.models import Run, RunStatus, Step
from tests.approvals.conftest import open_request, waiting_run
from tests.factories import new_run
from tests.workflows import OrderIn

pytestmark = pytest.mark.django_db

WORKFLOW = "test-approval-across-a-secret-key-rotation"
IBAN = "DE89370400440532013000"
OTHER_IBAN = "FR7630006000011234567890189"
NEW_KEY = "the-secret-key-after-the-rotation-" + "n7Q" * 10


@pytest.fixture
def paying_to_an_account():
    """An approval step whose snapshot shows a bank account its read step declares
    sensitive: stored masked, bound by the keyed hash."""
    workflow = Workflow(WORKFLOW, version=1, input=OrderIn)

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


def _masked_request() -> ApprovalRequest:
    run = new_run(WORKFLOW)
    executor.advance_run(run.pk, worker="w1")
    assert Run.objects.get(pk=run.pk).status == RunStatus.WAITING
    request = open_request(run)
    assert request.snapshot["iban"] == "[redacted]" and MASKED_VALUES_FIELD in request.snapshot
    return request


def _mailed_links(mailoutbox) -> dict[int, str]:
    """The link each request's notification carries, by request id (as a path)."""
    notifications.publish_notifications()
    links = {}
    for mail in mailoutbox:
        for line in mail.body.splitlines():
            path = urlparse(line.strip()).path
            if line.startswith("http://testserver/") and "/link/" in path:
                links[int(path.split("/")[2])] = path
    return links


def _others(request: ApprovalRequest):
    """Requests of the same run other than `request`: a successor, had it been superseded."""
    return ApprovalRequest.objects.filter(run_id=request.run_id).exclude(pk=request.pk)


def _rotate(settings, *, keep_old: bool):
    old = settings.SECRET_KEY
    settings.SECRET_KEY = NEW_KEY
    settings.SECRET_KEY_FALLBACKS = [old] if keep_old else []


def test_a_link_mailed_before_the_rotation_opens_and_decides_its_request(
        paying_to_an_account, approvers, ann, client, mailoutbox, settings):
    plain = open_request(waiting_run())
    masked = _masked_request()
    links = _mailed_links(mailoutbox)
    assert set(links) == {plain.pk, masked.pk}
    client.force_login(ann)

    _rotate(settings, keep_old=True)

    for request in (plain, masked):
        opened = client.get(links[request.pk])
        detail = reverse("approvals:detail", kwargs={"pk": request.pk})
        assert opened.status_code == 302 and opened["Location"] == detail
        page = client.get(detail)
        assert page.status_code == 200 and b"Approve" in page.content
        decided = client.post(reverse("approvals:decide", kwargs={"pk": request.pk}),
                              {"decision": "approve", "decision_id": str(uuid.uuid4())})
        assert decided.status_code == 302 and decided["Location"] == detail
        request.refresh_from_db()
        assert request.status == RequestStatus.APPROVED and request.decided_by == ann
        # Decided as it was asked: never superseded, no other request made in its place.
        assert not _others(request).exists()
    assert not AccessAttempt.objects.filter(username=LINK_USER).exists()


def test_a_changed_sensitive_value_still_supersedes_a_request_made_under_the_old_key(
        paying_to_an_account, approvers, ann, settings):
    masked = _masked_request()
    _rotate(settings, keep_old=True)
    Step.objects.filter(run_id=masked.run_id, name="fetch-account").update(
        result={"holder": "ACME", "iban": sensitive.encrypt(OTHER_IBAN)})

    result = decisions.decide(masked.pk, user=ann, approved=True, decision_id=uuid.uuid4())

    assert result.outcome == "superseded" and not result.recorded
    masked.refresh_from_db()
    assert masked.status == RequestStatus.SUPERSEDED and masked.decided_by is None
    assert result.new_request.snapshot_hash != masked.snapshot_hash


def test_once_the_old_key_is_dropped_its_link_is_not_valid_and_its_masked_request_is_asked_again(
        paying_to_an_account, approvers, ann, client, mailoutbox, settings):
    plain = open_request(waiting_run())
    masked = _masked_request()
    links = _mailed_links(mailoutbox)

    _rotate(settings, keep_old=False)

    response = client.get(links[plain.pk])
    assert response.status_code == 400
    text = " ".join(html.unescape(response.content.decode()).split())
    assert "This approval link is not valid" in text
    assert "signed with a key this console no longer holds" in text
    assert "Nothing was changed" in text
    # Counted as a forged link from this address, as the runbook warns.
    assert AccessAttempt.objects.filter(username=LINK_USER).count() == 1
    plain.refresh_from_db()
    assert plain.status == RequestStatus.PENDING and SESSION_TOKENS not in client.session

    result = decisions.decide(masked.pk, user=ann, approved=True, decision_id=uuid.uuid4())
    assert result.outcome == "superseded" and not result.recorded
    new = result.new_request
    assert new.status == RequestStatus.PENDING and new.snapshot["iban"] == "[redacted]"
