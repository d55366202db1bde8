"""A notification is sent to its approver's email address as it is when it is sent, not as
it was when it was queued: an approver who changed their address (their old mailbox handed
over, or no longer theirs) while the mail waited in the outbox (a mail server down for
hours) was still sent the payload and the request's link at the old one. One whose address
was removed is not written to."""

import pytest
from django.core import mail

from approvals.models import Notification, NotificationStatus
from approvals.notifications import publish_notifications

pytestmark = pytest.mark.django_db


def test_the_mail_goes_to_the_new_address_and_never_to_the_old(pending, ann, bob, t0):
    ann.email = "ann.new@example.com"
    ann.save(update_fields=["email"])

    publish_notifications(now=t0)

    sent_to = [address for message in mail.outbox for address in message.to]
    assert sorted(sent_to) == ["ann.new@example.com", "bob@example.com"]
    assert "ann@example.com" not in sent_to
    note = Notification.objects.get(request=pending, user=ann)
    assert note.status == NotificationStatus.SENT
    assert note.recipient == "ann.new@example.com"


def test_an_approver_whose_address_was_removed_is_not_written_to(pending, ann, bob, t0):
    ann.email = ""
    ann.save(update_fields=["email"])

    report = publish_notifications(now=t0)

    assert [message.to for message in mail.outbox] == [["bob@example.com"]]
    assert report.sent == 1 and report.skipped == 1
    note = Notification.objects.get(request=pending, user=ann)
    assert note.status == NotificationStatus.SKIPPED
    assert "no email address" in note.last_error
