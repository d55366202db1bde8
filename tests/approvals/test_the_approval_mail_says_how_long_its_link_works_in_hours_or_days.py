"""The approval mail says how long its link works in the unit that fits it: with
APPROVAL_LINK_MAX_AGE=3600 (seconds) it said "the link works for 0.0416667 days". Hours
under two days, days from two."""

import pytest
from django.core import mail

from approvals.notifications import publish_notifications

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("max_age", "said"), [
    (3600, "1 hour"), (5400, "1.5 hours"), (36 * 3600, "36 hours"), (3 * 86400, "3 days"),
])
def test_the_mail_says_the_links_life_in_hours_or_days(pending, settings, t0, max_age, said):
    settings.APPROVAL_LINK_MAX_AGE = max_age

    publish_notifications(now=t0)

    assert len(mail.outbox) == 2
    for message in mail.outbox:
        assert f"the link works for {said} and only while the request is pending" in \
            message.body
