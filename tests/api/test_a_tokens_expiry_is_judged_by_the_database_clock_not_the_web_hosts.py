"""An API token's expiry is judged by the database's clock, not by the clock of the web host
that checks it: a host ten minutes ahead still takes a token with five minutes left, and a
host ten minutes behind refuses one that expired five minutes ago (and marks it used by
nobody)."""

from datetime import timedelta

import pytest

from api.models import ApiToken
from api.tokens import token_create
from runs import store
from tests.processes import manage

pytestmark = pytest.mark.django_db(transaction=True)

TEN_MINUTES = 600
CHECK = ("import os; from api.tokens import token_check; "
         "print(token_check(os.environ['PRESENTED']).problem or 'accepted')")


def _checked_by_a_host_off_by(seconds: int, plaintext: str) -> str:
    process = manage("shell", "-c", CHECK, RUNS_TEST_CLOCK_OFFSET_SECONDS=seconds,
                     PRESENTED=plaintext)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return out.strip().splitlines()[-1]


def _token(name: str, *, expires_in: timedelta) -> tuple[ApiToken, str]:
    now = store.current().now()
    return token_create(name=name, workflows=["test-orders"], expires_at=now + expires_in,
                        now=now)


def test_a_host_ten_minutes_ahead_takes_a_token_with_five_minutes_left():
    token, plaintext = _token("erp-prod", expires_in=timedelta(minutes=5))
    assert _checked_by_a_host_off_by(TEN_MINUTES, plaintext) == "accepted"
    token.refresh_from_db()
    assert token.last_used_at is not None and token.last_used_at < token.expires_at
    assert token.revoked_at is None


def test_a_host_ten_minutes_behind_refuses_a_token_that_expired_five_minutes_ago():
    token, plaintext = _token("erp-old", expires_in=timedelta(minutes=5))
    ApiToken.objects.filter(pk=token.pk).update(
        expires_at=store.current().now() - timedelta(minutes=5))
    assert _checked_by_a_host_off_by(-TEN_MINUTES, plaintext) == "token expired"
    token.refresh_from_db()
    # Refused: not recorded as used.
    assert token.last_used_at is None
    assert ApiToken.objects.count() == 1
