"""A list of a growing table offers the pages holding its first COUNT_CAP rows, the rows it
counts exactly. A page is read with OFFSET, which walks every row before it: the last page
of a million runs read the whole index, for every crawler or bookmark asking for it. A page
past them is refused, no page read (the list's count, capped at COUNT_CAP + 1 rows, says
which pages it has), with a message saying to filter or search; the pager links none of
them; the pages within them read as before. A page a list does not have otherwise:
tests/admin/test_a_page_a_list_does_not_have_is_answered_with_a_page_it_has.py."""

import re

import pytest
from django.contrib import admin
from django.contrib.messages import get_messages
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.admin import COUNT_CAP, PAGE_REFUSED, FastListAdmin, listed_pages
from runs.admin import RunAdmin

from .scale import analyzed, bulk_runs
from .test_admin_lists import admin_client  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db

PER_PAGE = RunAdmin.list_per_page
LAST = listed_pages(PER_PAGE)
URL = "/admin/runs/run/"

LISTS = sorted(f"/admin/{m._meta.app_label}/{m._meta.model_name}/"
               for m, model_admin in admin.site._registry.items()
               if isinstance(model_admin, FastListAdmin))


@pytest.fixture
def runs():
    """More runs than the listed pages hold."""
    bulk_runs(f"order-{n}" for n in range(COUNT_CAP + 3 * PER_PAGE))
    analyzed("runs_run")


def offsets(queries) -> list[int]:
    return [int(n) for q in queries for n in re.findall(r"\bOFFSET (\d+)", q["sql"].upper())]


def test_the_listed_pages_hold_the_rows_counted_exactly():
    assert LAST * PER_PAGE >= COUNT_CAP > (LAST - 1) * PER_PAGE
    assert "/admin/runs/run/" in LISTS and "/admin/audit/auditrecord/" in LISTS


def test_a_page_past_them_reads_no_row_and_says_to_filter_or_search(admin_client, runs):  # noqa: F811
    # A page the table's rows fill, past the pages listed.
    asked = LAST + 2
    with CaptureQueriesContext(connection) as ctx:
        refused = admin_client.get(URL, {"p": asked, "status": "completed"})
    assert refused.status_code == 302
    # The same list, its filter kept, from its first page.
    assert refused["Location"] == f"{URL}?status=completed"
    assert offsets(ctx.captured_queries) == []
    # Of the runs, only counted (a count that stops at COUNT_CAP + 1) and planned (EXPLAIN).
    capped = f"LIMIT {COUNT_CAP + 1}) subquery"
    read = [q["sql"] for q in ctx.captured_queries if 'FROM "runs_run"' in q["sql"]]
    assert read and all(sql.startswith("EXPLAIN ") or (
        sql.startswith("SELECT COUNT(*) FROM (") and sql.endswith(capped)) for sql in read), read
    message = PAGE_REFUSED.format(asked=asked, pages=LAST, rows=LAST * PER_PAGE)
    assert [str(m) for m in get_messages(refused.wsgi_request)] == [message]
    assert f"Page {asked} " in message and "filter or a search" in message

    with CaptureQueriesContext(connection) as ctx:
        shown = admin_client.get(refused["Location"])
    assert shown.status_code == 200
    assert message in shown.text
    assert shown.context["cl"].page_num == 1
    assert len(shown.context["cl"].result_list) == PER_PAGE
    assert all(n < COUNT_CAP for n in offsets(ctx.captured_queries)), offsets(
        ctx.captured_queries)


def test_the_last_listed_page_reads_as_before_and_the_pager_links_no_page_past_it(
        admin_client, runs):  # noqa: F811
    with CaptureQueriesContext(connection) as ctx:
        page = admin_client.get(URL, {"p": LAST})
    assert page.status_code == 200
    cl = page.context["cl"]
    assert cl.page_num == LAST
    assert [r.pk for r in cl.result_list] == [
        r.pk for r in cl.queryset[(LAST - 1) * PER_PAGE:LAST * PER_PAGE]]
    assert (LAST - 1) * PER_PAGE in offsets(ctx.captured_queries)
    assert max(offsets(ctx.captured_queries)) < COUNT_CAP
    linked = {int(n) for n in re.findall(r'href="\?p=(\d+)"', page.text)}
    assert 1 in linked and max(linked) == LAST - 1, linked  # the page shown is not a link
    assert f"Pages past {LAST} are not listed" in page.text
    assert "was not read" not in page.text


def test_a_list_whose_rows_the_pages_hold_says_nothing_of_pages_past_them(admin_client):  # noqa: F811
    bulk_runs(f"order-{n}" for n in range(PER_PAGE + 1))
    page = admin_client.get(URL, {"p": 2})
    assert page.status_code == 200 and len(page.context["cl"].result_list) == 1
    assert "are not listed" not in page.text
