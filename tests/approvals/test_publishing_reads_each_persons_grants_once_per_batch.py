"""The publisher checks, before each email, that its recipient may still decide the
request: a person who lost the right is not written to. It reads each person's grants once
for the batch it sends, not once for each notification: sending to the same people about
four times as many requests asks the permission tables the same number of questions."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals import four_eyes, notifications
from approvals.models import Notification, NotificationStatus
from runs.execution import executor
from runs.models import RunStatus
from tests.approvals.conftest import open_request, waiting_run
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def _publishing_counting_grant_reads() -> tuple[notifications.PublishReport, int]:
    with CaptureQueriesContext(connection) as ctx:
        report = notifications.publish_notifications()
    # The permission tables: global grants (auth_user_user_permissions,
    # auth_group_permissions, auth_permission) and guardian's object permissions.
    return report, sum("permission" in q["sql"] for q in ctx.captured_queries)


def _step_requests(count: int) -> None:
    for _ in range(count):
        open_request(waiting_run())


def test_sending_to_two_approvers_about_four_requests_reads_their_grants_as_about_one(
        approvers, ann, bob, mailoutbox):
    _step_requests(1)
    one, one_reads = _publishing_counting_grant_reads()
    assert one.sent == 2

    _step_requests(4)
    four, four_reads = _publishing_counting_grant_reads()
    assert four.sent == 8
    assert four_reads == one_reads, (one_reads, four_reads)
    assert sorted(m.to[0] for m in mailoutbox) == ["ann@example.com"] * 5 + \
        ["bob@example.com"] * 5


def test_a_person_who_lost_the_right_is_written_nothing_about_any_request_of_the_batch(
        approvers, ann, bob, mailoutbox):
    _step_requests(3)
    bob.groups.clear()

    report, _ = _publishing_counting_grant_reads()

    assert (report.sent, report.skipped) == (3, 3)
    assert [m.to for m in mailoutbox] == [["ann@example.com"]] * 3
    assert set(Notification.objects.filter(user=bob).values_list("status", "last_error")) \
        == {(NotificationStatus.SKIPPED, "bob may no longer decide it (no longer an approver)")}
    assert not Notification.objects.filter(user=bob, sent_at__isnull=False).exists()


def _operator_requests(count: int, olga) -> None:
    """`count` four-eyes requests olga asks for (terminating runs whose high-impact step
    succeeded): omar, the other operator, is notified of each."""
    for _ in range(count):
        run = new_run()
        assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
        place(run, status=RunStatus.ATTENTION)
        four_eyes.request_operator_action(run, action="terminate", requested_by=olga,
                                          reason="vendor fraud")


def test_an_operator_asked_about_four_actions_has_their_grants_read_as_about_one(
        operators, script, mailoutbox):
    olga, omar = operators
    _operator_requests(1, olga)
    one, one_reads = _publishing_counting_grant_reads()
    assert one.sent == 1

    _operator_requests(4, olga)
    four, four_reads = _publishing_counting_grant_reads()
    assert four.sent == 4
    assert four_reads == one_reads, (one_reads, four_reads)
    assert [m.to for m in mailoutbox] == [["omar@example.com"]] * 5


def test_an_operator_who_lost_the_role_is_written_nothing_about_the_actions(
        operators, script, mailoutbox):
    olga, omar = operators
    _operator_requests(2, olga)
    omar.groups.clear()

    report, _ = _publishing_counting_grant_reads()

    assert (report.sent, report.skipped) == (0, 2)
    assert mailoutbox == []
    assert set(Notification.objects.values_list("user__username", "status")) == {
        ("omar", NotificationStatus.SKIPPED)}
