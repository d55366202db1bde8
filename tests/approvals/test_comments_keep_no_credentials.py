"""An approver's comment is kept on the request and the run's chain, and shown on the
approvals page: a credential pasted into it is masked before it is stored."""

import uuid

from approvals import decisions
from audit.models import AuditRecord


def test_an_approvers_comment_is_masked_before_it_is_stored(pending, ann, t0):
    decisions.decide(pending.pk, user=ann, approved=True, decision_id=uuid.uuid4(), now=t0,
                     comment="ok; the vendor's api_key=AKIA0123456789 is in the ticket")
    pending.refresh_from_db()
    assert pending.comment == "ok; the vendor's api_key=[redacted] is in the ticket"
    kept = AuditRecord.objects.filter(run_id=pending.run_id)
    assert not any("AKIA0123456789" in r.reason or "AKIA0123456789" in str(r.data)
                   for r in kept)
