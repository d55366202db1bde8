"""In a real browser, as a screen reader lists a page's headings: every page an operator or
an approver uses has one level-1 heading and no heading that skips a level below the one
before it. Before, the investigation page went from its h1 straight to level 3 (Facts,
Inferences, Steps...), as if a level-2 heading were missing."""

import re

import pytest
from django.contrib.auth.models import User

from approvals.models import ApprovalRequest
from approvals.requests import open_pending_requests
from runs.execution import executor
from tests.console.test_browser import browser, sign_in, unsettled_run  # noqa: F401
from tests.factories import new_run

pytestmark = pytest.mark.django_db(transaction=True)
HEADING = re.compile(r'heading "(.*)" \[level=(\d)\]')


def headings(page) -> list[tuple[int, str]]:
    return [(int(level), text) for text, level
            in HEADING.findall(page.locator("body").aria_snapshot())]


def test_headings_go_down_one_level_at_a_time(browser, live_server,  # noqa: F811
                                              unsettled_run, script):  # noqa: F811
    User.objects.create_superuser("root", password="pw-root")
    waiting = new_run("test-approval")
    executor.advance_run(waiting.pk, worker="w1")
    assert open_pending_requests() == 1
    page = sign_in(browser, live_server, "root")
    run = unsettled_run.pk
    for path in ("/runs/", "/attention/", f"/runs/{run}/", f"/runs/{run}/investigation/",
                 "/audit/", "/workers/", "/schedules/", "/workflows/test-orders/",
                 "/approvals/", f"/approvals/{ApprovalRequest.objects.get().pk}/",
                 "/runs/bulk/preview/?action=terminate"):
        page.goto(f"{live_server.url}{path}")
        found = headings(page)
        assert [level for level, _ in found].count(1) == 1, (path, found)
        assert found[0][0] == 1, (path, found)
        for (before, _), (level, text) in zip(found, found[1:], strict=False):
            assert level <= before + 1, f"{path}: {text!r} at level {level} after {before}"
