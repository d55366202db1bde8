"""A notification is queued when a request is made (or reminded) and sent by the publisher
later, possibly much later after retries. By then its recipient may have been deactivated or
lost the right to decide: the email, which carries what is to be approved and a link, is then
not sent to them, and the outbox row says why."""

import pytest

from approvals import notifications
from approvals.models import Notification

pytestmark = pytest.mark.django_db


def _note(user):
    return Notification.objects.get(user=user)


def test_a_person_deactivated_before_delivery_is_not_written_to(pending, ann, bob, mailoutbox):
    ann.is_active = False
    ann.save(update_fields=["is_active"])

    report = notifications.publish_notifications()

    assert (report.sent, report.skipped) == (1, 1)
    assert [m.to for m in mailoutbox] == [["bob@example.com"]]
    note = _note(ann)
    assert note.status == "skipped" and note.sent_at is None
    assert note.last_error == "ann was deactivated before delivery"


def test_a_person_no_longer_an_approver_before_delivery_is_not_written_to(pending, ann, bob,
                                                                          mailoutbox):
    bob.groups.clear()

    report = notifications.publish_notifications()

    assert (report.sent, report.skipped) == (1, 1)
    assert [m.to for m in mailoutbox] == [["ann@example.com"]]
    note = _note(bob)
    assert note.status == "skipped"
    assert note.last_error == "bob may no longer decide it (no longer an approver)"


def test_a_person_whose_account_was_deleted_before_delivery_is_not_written_to(pending, ann,
                                                                              mailoutbox):
    ann.delete()

    notifications.publish_notifications()

    assert [m.to for m in mailoutbox] == [["bob@example.com"]]
    note = Notification.objects.get(recipient="ann@example.com")
    assert note.status == "skipped" and "deleted" in note.last_error
