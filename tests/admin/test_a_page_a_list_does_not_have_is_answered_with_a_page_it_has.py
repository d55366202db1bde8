"""An admin list's address asking for a page the list does not have (0, -3, "abc", or past
its last page: a bookmark of a list since grown shorter, a hand-edited address) gets a page
the list has, its filters kept, with a message naming the page asked for. Django answered
with the list, its filters dropped, or its "Database error" page, or showed a one-page list
as whatever page was asked. Every admin list answers so (audit.admin.StorableFiltersAdmin)."""

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils.html import escape

from audit.admin import NOT_A_PAGE, PAST_THE_LAST_PAGE
from runs.admin import RunAdmin

from .scale import bulk_runs
from .test_admin_lists import admin_client, grow  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db

LISTS = sorted(f"/admin/{m._meta.app_label}/{m._meta.model_name}/" for m in admin.site._registry)
RUNS = "/admin/runs/run/"


def offsets(queries) -> list[int]:
    return [int(n) for q in queries for n in re.findall(r"\bOFFSET (\d+)", q["sql"].upper())]


def answered(client, url: str, params: dict) -> tuple[str, list[str], list[int]]:
    """Where a request for `url` with `params` is sent, the messages it leaves, and the
    offsets of the pages it read."""
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, params)
    assert response.status_code == 302, (url, params, response.status_code)
    return (response["Location"], [str(m) for m in get_messages(response.wsgi_request)],
            offsets(ctx.captured_queries))


def shown(client, location: str, message: str):
    """The page at `location`, checked to be a list showing `message` and no error page."""
    page = client.get(location)
    assert page.status_code == 200, (location, page.status_code)
    assert escape(message) in page.text
    assert "Database error" not in page.text
    return page


@pytest.mark.parametrize("url", LISTS)
def test_every_list_answers_a_page_below_1_or_not_a_number_with_its_first_page(
        admin_client, url):  # noqa: F811
    grow(1)
    for asked in ["0", "-3", "abc", "1e3", ""]:
        location, said, read = answered(admin_client, url, {"p": asked})
        message = NOT_A_PAGE.format(asked=asked)
        assert (location, said, read) == (url, [message], []), asked
        assert f'page "{asked}"' in message
        assert shown(admin_client, location, message).context["cl"].page_num == 1


@pytest.mark.parametrize("url", LISTS)
def test_every_list_answers_a_page_past_its_last_with_its_last_page(admin_client, url):  # noqa: F811
    grow(1)
    for asked in [2, 999, 10 ** 9]:
        location, said, read = answered(admin_client, url, {"p": asked})
        message = PAST_THE_LAST_PAGE.format(asked=asked, pages=1)
        assert (location, said, read) == (url, [message], []), asked
        assert f"page {asked:,} " in message and "last page is 1." in message
        assert shown(admin_client, location, message).context["cl"].page_num == 1


def test_a_page_past_a_longer_lists_last_shows_its_last_page_its_filter_kept(admin_client):  # noqa: F811
    per_page = RunAdmin.list_per_page
    bulk_runs(f"order-{n}" for n in range(2 * per_page + 20))
    bulk_runs([f"failed-{n}" for n in range(3)], status="failed")
    # Django's own second answer to a page out of range carried "e=1": its "Database error".
    for params in [{"status": "completed", "p": 4}, {"status": "completed", "p": 4, "e": 1}]:
        location, said, read = answered(admin_client, RUNS, params)
        assert urlsplit(location).path == RUNS
        assert parse_qs(urlsplit(location).query) == {
            **{k: [str(v)] for k, v in params.items()}, "p": ["3"]}
        message = PAST_THE_LAST_PAGE.format(asked=4, pages=3)
        assert said == [message] and read == []
        page = shown(admin_client, location, message)
        assert page.context["cl"].page_num == 3
        assert len(page.context["cl"].result_list) == 20
        assert {r.status for r in page.context["cl"].result_list} == {"completed"}


def test_a_page_below_1_of_a_longer_list_shows_its_first_page_its_filter_kept(admin_client):  # noqa: F811
    bulk_runs(f"order-{n}" for n in range(2 * RunAdmin.list_per_page + 20))
    for asked in ["0", "-3", "abc"]:
        location, said, read = answered(admin_client, RUNS, {"status": "completed", "p": asked})
        assert (location, said, read) == (
            f"{RUNS}?status=completed", [NOT_A_PAGE.format(asked=asked)], [])
        page = shown(admin_client, location, said[0])
        assert page.context["cl"].page_num == 1
        assert len(page.context["cl"].result_list) == RunAdmin.list_per_page


def test_the_users_list_answers_a_page_it_does_not_have_as_the_lists_of_runs_do(
        admin_client):  # noqa: F811
    per_page = admin.site.get_model_admin(User).list_per_page
    User.objects.bulk_create(User(username=f"person-{n}") for n in range(per_page + 5))
    location, said, _ = answered(admin_client, "/admin/auth/user/", {"p": 7})
    assert location == "/admin/auth/user/?p=2"
    assert said == [PAST_THE_LAST_PAGE.format(asked=7, pages=2)]
    assert len(shown(admin_client, location, said[0]).context["cl"].result_list) == 6
    location, said, _ = answered(admin_client, "/admin/auth/user/", {"p": "-1"})
    assert location == "/admin/auth/user/" and said == [NOT_A_PAGE.format(asked="-1")]


def test_a_long_value_is_named_cut_short_and_the_pages_a_list_has_are_shown_as_before(
        admin_client):  # noqa: F811
    bulk_runs(f"order-{n}" for n in range(RunAdmin.list_per_page + 1))
    location, said, _ = answered(admin_client, RUNS, {"p": "9" * 30 + "x"})
    assert said == [NOT_A_PAGE.format(asked="9" * 20 + "…")]
    shown(admin_client, location, said[0])
    for asked, rows in [(1, RunAdmin.list_per_page), (2, 1)]:
        page = admin_client.get(RUNS, {"p": asked})
        assert page.status_code == 200 and page.context["cl"].page_num == asked
        assert len(page.context["cl"].result_list) == rows
        assert "There is no page" not in page.text
