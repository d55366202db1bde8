"""django-axes' logs (anyone can add rows: a failed sign-in is one) list and search without
reading the whole log: its own admins read, at each load, the first and last times and the
distinct days of the whole log (the date hierarchy), sorted it by a time no index holds,
and searched a term anywhere in four columns."""

import pytest
from axes.models import AccessFailureLog
from django.contrib.auth.models import User
from django.utils import timezone

from .scale import analyzed, page_reads

pytestmark = pytest.mark.django_db

ROWS = 3000


@pytest.fixture
def failures(client):
    client.force_login(User.objects.create_superuser("root", password="pw"))
    now = timezone.now()
    AccessFailureLog.objects.bulk_create(
        AccessFailureLog(username=f"spray-{n}", ip_address=f"10.0.{n // 250}.{n % 250}",
                         user_agent="ua", path_info="/login/", http_accept="*/*",
                         attempt_time=now, locked_out=False)
        for n in range(ROWS))
    AccessFailureLog.objects.create(username="ann", ip_address="192.0.2.7", user_agent="ua",
                                    path_info="/login/", http_accept="*/*",
                                    attempt_time=now, locked_out=True)
    analyzed("axes_accessfailurelog")
    return client


def test_the_failure_log_lists_its_newest_page_reading_no_more(failures):
    page, reads = page_reads(failures, "/admin/axes/accessfailurelog/", "axes_accessfailurelog")
    assert len(page.context["cl"].result_list) == 50
    assert page.context["cl"].result_list[0].username == "ann"
    # The page's 50 rows, and the count's first 1001.
    assert max(reads.values()) <= 1001, reads


@pytest.mark.parametrize("term", ["ann", "an", "192.0.2.7"])
def test_the_failure_log_is_searched_by_the_start_of_a_name_or_an_address_along_an_index(
        failures, term):
    page, reads = page_reads(failures, f"/admin/axes/accessfailurelog/?q={term}",
                             "axes_accessfailurelog")
    assert [row.username for row in page.context["cl"].result_list] == ["ann"]
    assert max(reads.values()) <= 10, reads


def test_a_term_that_is_no_address_nor_any_name_finds_nothing(failures):
    page, _ = page_reads(failures, "/admin/axes/accessfailurelog/?q=192.0.2",
                         "axes_accessfailurelog")
    assert list(page.context["cl"].result_list) == []
