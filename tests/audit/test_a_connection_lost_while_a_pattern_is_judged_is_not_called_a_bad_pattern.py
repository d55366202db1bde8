"""An admin list's regex filter is judged by the database before the list is read
(audit.admin.patterns_read): a pattern PostgreSQL cannot read is refused with a message, but
a connection lost while it is judged is the connection's failure, not the pattern's: it is
raised as any page's would be, never said to the admin as "not a regular expression the
database reads"."""

import psycopg
import pytest
from django.db import DatabaseError, connection

from audit.admin import patterns_read
from runs.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


def query_of(pattern: str):
    return Run.objects.filter(business_key__regex=pattern).query


def test_a_malformed_pattern_is_refused_and_a_good_one_read():
    assert patterns_read(query_of("tenant-(42"), "default") is False
    assert patterns_read(query_of("^tenant-4[0-9]$"), "default") is True


def test_a_connection_cut_while_the_pattern_is_judged_is_raised_not_called_a_bad_pattern():
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    settings = connection.settings_dict
    with psycopg.connect(host=settings["HOST"], port=settings["PORT"] or 5432,
                         user=settings["USER"], dbname=settings["NAME"],
                         autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
    try:
        with pytest.raises(DatabaseError) as raised:
            patterns_read(query_of("^tenant-4[0-9]$"), "default")
        assert "regular expression" not in str(raised.value)
    finally:
        connection.close()
    assert patterns_read(query_of("^tenant-4[0-9]$"), "default") is True  # a new connection
