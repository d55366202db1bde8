"""A signed-in person who may not see an approval request (neither its approver nor the one
who asked) is answered on its page, and at its decide address, exactly as for a request that
does not exist: the same 404, the same words, nothing of the request. Told apart (403 for
one, 404 for the other), they would let anyone signed in try ids to learn which requests
exist, as the emailed link's path answers a missing request as a forged link for that
reason. Nothing is decided, and the refusal is logged for the operators."""

import re

import pytest
from django.urls import reverse

from approvals.models import ApprovalRequest
from audit.models import AuditRecord
from runs.models import Run, RunStatus

pytestmark = pytest.mark.django_db


# The CSRF token, masked anew at every page drawn.
_CSRF = re.compile(r'(csrfmiddlewaretoken" value="|"X-CSRFToken": ")[A-Za-z0-9]+')


def _answers(client, pk: int) -> list[tuple[int, str]]:
    """The status and the page, with the address asked for written with ID and the CSRF
    token as TOKEN, for each way a person reaches a request's pages: its page, the decide
    address opened, a decision posted."""
    detail = reverse("approvals:detail", kwargs={"pk": pk})
    decide = reverse("approvals:decide", kwargs={"pk": pk})
    responses = [client.get(detail), client.get(decide),
                 client.post(decide, {"decision": "approve", "comment": "",
                                      "decision_id": "7e0f3a4c-1b2d-4e5f-8a9b-0c1d2e3f4a5b"})]
    return [(r.status_code, _CSRF.sub(r"\1TOKEN", r.content.decode()).replace(
        f"/approvals/{pk}/", "/approvals/ID/")) for r in responses]


def test_a_hidden_request_and_a_missing_one_get_the_same_answer(pending, carol, client,
                                                                caplog):
    client.force_login(carol)
    missing = ApprovalRequest.objects.order_by("-pk").values_list("pk", flat=True)[0] + 1000
    records = AuditRecord.objects.filter(run_id=pending.run_id).count()

    hidden = _answers(client, pending.pk)
    absent = _answers(client, missing)

    assert [status for status, _ in hidden] == [404, 404, 404]
    assert hidden == absent
    run = Run.objects.get(pk=pending.run_id)
    for _, page in hidden:
        assert "Not found" in page and "You may not decide" not in page
        for told in (run.business_key, run.workflow_name, pending.snapshot["order"],
                     pending.step_name):
            assert told not in page
    # Nothing was decided; the refusals of the one that exists are logged, for operators.
    pending.refresh_from_db()
    assert pending.status == "pending" and pending.decision_id is None
    assert AuditRecord.objects.filter(run_id=pending.run_id).count() == records
    assert Run.objects.get(pk=pending.run_id).status == RunStatus.WAITING
    assert caplog.text.count(f"approval request {pending.pk}: carol") == 3


def test_its_approver_still_sees_it(pending, ann, client):
    client.force_login(ann)
    assert client.get(reverse("approvals:detail", kwargs={"pk": pending.pk})).status_code == 200
