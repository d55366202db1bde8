"""An access record is dated by the database's clock, as a run's records are: a web server
whose clock is off must not write a wrong time into a hashed, append-only record."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from audit.access import AccessAction, record_access_change
from audit.chain import Actor

pytestmark = pytest.mark.django_db


def test_a_grant_made_on_a_host_whose_clock_is_days_ahead_carries_the_database_time(
        monkeypatch):
    ahead = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: ahead() + timedelta(days=3))
    record = record_access_change(action=AccessAction.API_TOKEN_CREATED, subject="token t",
                                  actor=Actor.system("test"), before={}, after={})
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        (database_now,) = cursor.fetchone()
    assert abs(record.created_at - database_now) < timedelta(seconds=5)
