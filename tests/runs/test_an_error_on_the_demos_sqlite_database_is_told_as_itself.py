"""The outage rule tells "the database cannot be reached" from a statement's own error. On
the demo's SQLite database (a file) a statement's error, such as "database is locked" or a
missing table, is told as itself: it was read as PostgreSQL's lost session, and failed in
the reading (an SQLite connection has no `closed`), hiding the error it was asked about."""

import pytest
from django.db import OperationalError
from django.db.backends.sqlite3.base import DatabaseWrapper

from runs.execution.database_outage import unreachable


@pytest.fixture
def sqlite_at(django_db_blocker):
    """sqlite_at(path): a connection to the demo's kind of database, this test's own."""
    opened = []

    def connect(path):
        wrapper = DatabaseWrapper({
            "NAME": str(path), "ENGINE": "django.db.backends.sqlite3", "OPTIONS": {},
            "TIME_ZONE": None, "CONN_MAX_AGE": 0, "CONN_HEALTH_CHECKS": False,
            "AUTOCOMMIT": True, "ATOMIC_REQUESTS": False, "USER": "", "PASSWORD": "",
            "HOST": "", "PORT": "", "TEST": {}}, alias="demo")
        opened.append(wrapper)
        return wrapper

    with django_db_blocker.unblock():
        yield connect
        for wrapper in opened:
            wrapper.close()


def test_a_statements_error_on_sqlite_is_its_own_not_an_outage(sqlite_at, tmp_path):
    sqlite = sqlite_at(tmp_path / "demo.sqlite3")
    with pytest.raises(OperationalError) as failed, sqlite.cursor() as cursor:
        cursor.execute("SELECT * FROM no_such_table")
    assert unreachable(failed.value, using=sqlite) is False


def test_a_database_file_that_cannot_be_opened_is_an_outage(sqlite_at, tmp_path):
    sqlite = sqlite_at(tmp_path / "missing-directory" / "demo.sqlite3")
    with pytest.raises(OperationalError) as failed:
        sqlite.ensure_connection()
    assert unreachable(failed.value, using=sqlite) is True
