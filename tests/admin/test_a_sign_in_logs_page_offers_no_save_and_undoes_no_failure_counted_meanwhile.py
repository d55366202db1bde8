"""A row of django-axes' sign-in logs (a failed sign-in's attempt, a sign-in, a failure) is
shown read-only, with no Save: nothing on its page can be changed. The page offered Save,
and a save wrote the row back whole as the page's post read it: a failed sign-in counted
while it was written (an attacker's next guess) was undone, one guess more before the
lock-out; a sign-out recorded meanwhile was undone likewise. A post of the page is refused
now, and writes nothing."""

import threading

import pytest
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.utils import timezone

from tests.approvals.run_lock_order import blocked_on_a_lock, session

from .change_pages import shown_form

FIELDS = {"username": "eve", "ip_address": "10.0.0.1", "user_agent": "ua",
          "path_info": "/accounts/login/", "http_accept": "*/*"}


@pytest.fixture
def root_client():
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "x"))
    return client


def attempt() -> AccessAttempt:
    return AccessAttempt.objects.create(**FIELDS, get_data="", post_data="",
                                        failures_since_start=3, attempt_time=timezone.now())


def page_url(model: str, pk: int) -> str:
    return f"/admin/axes/{model}/{pk}/change/"


@pytest.mark.django_db
@pytest.mark.parametrize("model, row", [
    ("accessattempt", attempt),
    ("accesslog", lambda: AccessLog.objects.create(**FIELDS, attempt_time=timezone.now())),
    ("accessfailurelog", lambda: AccessFailureLog.objects.create(
        **FIELDS, attempt_time=timezone.now(), locked_out=False)),
])
def test_its_page_is_shown_without_save_and_a_post_is_refused(root_client, model, row):
    shown = row()
    page = root_client.get(page_url(model, shown.pk))
    assert page.status_code == 200
    assert 'name="_save"' not in page.text

    response = root_client.post(page_url(model, shown.pk),
                                {"csrfmiddlewaretoken": "x", "_save": "Save"})

    assert response.status_code == 403


@pytest.mark.django_db(transaction=True)
def test_a_failure_counted_while_its_page_is_posted_stays_counted(root_client):
    counted = attempt()
    fields = {**shown_form(root_client, page_url("accessattempt", counted.pk)),
              "_save": ["Save"]}
    # The next failed guess, counted as axes counts it, by a session that has not committed.
    guess = session()
    guess.execute("UPDATE axes_accessattempt SET failures_since_start = "
                  "failures_since_start + 1 WHERE id = %s", [counted.pk])
    outcome = {}

    def posting():
        try:
            outcome["response"] = root_client.post(page_url("accessattempt", counted.pk),
                                                   fields)
        except Exception as exc:  # what the thread ended in, asserted below
            outcome["response"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=posting, daemon=True)
    try:
        thread.start()
        while thread.is_alive() and not blocked_on_a_lock(0.2):
            thread.join(0.2)
    finally:
        guess.commit()
        guess.close()
    thread.join(60)

    assert not thread.is_alive()
    assert outcome["response"].status_code == 403
    assert AccessAttempt.objects.get(pk=counted.pk).failures_since_start == 4
