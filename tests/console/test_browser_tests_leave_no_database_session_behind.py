"""A browser test's ORM calls, made while Playwright's loop runs in the test's thread, open
a connection of their own (Django keeps one per context). Left open after the test, it kept
the test database from being dropped at the end of every run ("database ... is being
accessed by other users"); the browser fixture closes it. The second test reads the
database's sessions after the first one's teardown (pytest runs a module's tests in order,
and pytest-xdist keeps a module on one process)."""

import pytest
from django.db import connection

from audit.models import AuditRecord
from tests.console.test_browser import browser, make_user, sign_in  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_browser_test_reads_the_database_between_its_steps(browser, live_server,  # noqa: F811
                                                              roles):
    make_user("olga", "operators")
    page = sign_in(browser, live_server, "olga")
    assert page.get_by_role("heading", name="Runs").count() >= 1
    assert not AuditRecord.objects.filter(actor_label="olga").exists()


def test_after_it_no_other_session_holds_the_test_database():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid, application_name, state, left(query, 120) "
                       "FROM pg_stat_activity WHERE datname = current_database() "
                       "AND pid <> pg_backend_pid()")
        others = cursor.fetchall()
    assert others == []
