"""A statement cancelled (pg_cancel_backend from another session) or the session ended
(pg_terminate_backend) on the console's own session row is answered 503 with
Retry-After, in the product's words, as any other database failure is, never a traceback:

- on the session's read at the start of a request (the sign-in check reads it): nothing
  was done, and the page says why (the database would not wait, or did not answer);
- on its save after the view's work (here, signing in): Django's store took any database
  error there for a session deleted meanwhile and answered 400 "Bad request". The page
  now says the session could not be saved and that what was asked may have been done, to
  look before doing it again; the person is not signed in;
- a session really deleted meanwhile (signed out in another tab) is still Django's 400."""

import html

import pytest
from django.db import connection
from django.test import Client

from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.cancelled_statement import cancelled, other_session

pytestmark = pytest.mark.django_db(transaction=True)

RAW = ("Traceback", "canceling", "terminating", "OperationalError", "AttributeError",
       "_session_cache")


def _page(response) -> str:
    assert (response.status_code, response["Retry-After"]) == (503, "30"), response.content
    page = html.unescape(response.content.decode())
    for raw in RAW:
        assert raw not in page
    return page


@pytest.mark.parametrize("terminate", [False, True], ids=["cancelled", "ended"])
def test_a_failed_session_read_does_nothing_and_says_so(operator, stuck_run, client_for,
                                                        terminate):
    client = client_for(operator)
    client.raise_request_exception = False
    seen = Run.objects.get(pk=stuck_run.pk).audit_seq
    records = AuditRecord.objects.count()
    with cancelled(lambda sql: sql.startswith('SELECT "django_session"'),
                   terminate=terminate) as hit:
        try:
            response = client.post(f"/runs/{stuck_run.pk}/terminate/",
                                   {"reason": "stop it", "seen": str(seen)})
        finally:
            connection.close()
    assert hit
    page = _page(response)
    if terminate:
        assert "The database is not answering" in page
    else:
        assert "Nothing was done: what this needed was busy" in page
    assert "nothing you asked for was done" in page.lower()
    run = Run.objects.get(pk=stuck_run.pk)
    assert (run.status, run.audit_seq) == (RunStatus.ATTENTION, seen)
    assert AuditRecord.objects.count() == records


@pytest.mark.parametrize("terminate", [False, True], ids=["cancelled", "ended"])
def test_a_failed_session_save_says_it_may_have_been_done(operator, terminate):
    client = Client(raise_request_exception=False)
    with cancelled(lambda sql: sql.startswith('UPDATE "django_session"'),
                   terminate=terminate) as hit:
        try:
            response = client.post("/accounts/login/", {"username": "olga", "password": "pw"})
        finally:
            connection.close()
    assert hit
    page = _page(response)
    assert "Your session could not be saved: what you asked for may have been done" in page
    assert "Look at the page again before doing it again" in page
    assert "Nothing was done" not in page and "nothing you asked for was done" not in page
    # The session was not saved: not signed in, the sign-in page is where a page leads.
    after = client.get("/runs/")
    assert after.status_code == 302 and after["Location"].startswith("/accounts/login/")


def test_a_session_deleted_before_it_is_saved_is_still_djangos_400(operator):
    """Not a database failure: the session's row is gone as it is saved (signed out in
    another tab), which Django answers as it always has."""
    client = Client(raise_request_exception=False)
    deleted: list[str] = []

    def delete_first(execute, sql, params, many, context):
        if sql.startswith('UPDATE "django_session"') and not deleted:
            with other_session() as other:
                other.execute("DELETE FROM django_session")
            deleted.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(delete_first):
        response = client.post("/accounts/login/", {"username": "olga", "password": "pw"})
    assert deleted
    assert response.status_code == 400
    assert "may have been done" not in response.content.decode()
