"""In a real browser 1,280 pixels wide: no console page of the demo's runs, in every state
the demo puts them in, is wider than the screen. An error's text and a tool call's JSON hold
long words (an address, a timestamp, an id); a table of them used to widen the run page
past the screen, and its last columns (the next try, the time a step took, a call's error)
were out of sight unless the person scrolled sideways."""

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from demo.sandbox import faults
from runs.models import Run
from tests.console.test_browser import browser, sign_in  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

OVERFLOW = """() => document.documentElement.scrollWidth - document.documentElement.clientWidth"""


def test_no_page_of_the_demos_runs_is_wider_than_the_screen(
        browser, live_server, live_sandbox, empty_broker, roles):  # noqa: F811
    try:
        call_command("demo_scenarios", stdout=io.StringIO())
    finally:
        faults.clear()
    User.objects.create_superuser("root", password="pw-root")
    page = sign_in(browser, live_server, "root")
    paths = ["/runs/", "/attention/", "/audit/", "/approvals/", "/workers/", "/schedules/"]
    runs = list(Run.objects.order_by("pk"))
    assert len(runs) >= 8
    for run in runs:
        paths += [f"/runs/{run.pk}/", f"/runs/{run.pk}/investigation/"]
    wider = {}
    for path in paths:
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
        overflow = page.evaluate(OVERFLOW)
        if overflow > 0:
            wider[path] = overflow
    assert wider == {}, f"pixels wider than the screen, by page: {wider}"
