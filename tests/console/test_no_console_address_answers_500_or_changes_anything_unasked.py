"""Every address of the console and the approvals pages, asked by GET or POST with odd
input (ids that name nothing or more than a bigint, names with a NUL or outside ASCII,
fields missing, repeated, overlong or holding a NUL, dates no calendar has, htmx's headers),
by someone signed out, by someone who may view nothing and by an operator, is answered with
a page or a 4xx, never a 5xx. A GET changes no row; a POST by someone signed out or by
someone without any right changes no row either. Rows are counted by PostgreSQL's own
statistics of the test's transaction (pg_stat_xact_user_tables), so a write to any table
counts."""

import itertools
import re
from urllib.parse import quote

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.urls import get_resolver, reverse
from django.urls.resolvers import URLPattern, URLResolver

from approvals.bulk import start_bulk_job
from console import saved_views
from runs.reads.selectors import RunFilters
from tests.factories import advance_once, new_run

pytestmark = pytest.mark.django_db

# Reached by their own suites: the admin is Django's, the API is fuzzed by schemathesis.
NOT_HERE = ("admin/", "api/", "metrics", "sandbox/")
# Written by any request by design: the session of whoever signs in (or is signed out), and
# the failed-login log of django-axes.
WRITTEN_BY_ANY = {"django_session", "axes_accessattempt", "axes_accessfailurelog",
                  "axes_accesslog"}
FIELDS = ["rows", "new_since", "shown", "after", "before", "part", "turns_from", "lookups",
          "format", "log", "drills", "q", "status", "workflow", "since", "until", "period",
          "sort", "actor", "run", "seen", "reason", "step", "mode", "remote_ref", "call",
          "action", "query", "previewed", "start_key", "name", "paused", "system",
          "decision", "comment", "decision_id"]
ODD = ["\x00", "a" * 3000, "\u0663\u00e9", "99999999999999999999999", "9999-12-31T23:59",
       "2026-13-45", "1,x,"]
HTMX = {"HX-Request": "true", "HX-Current-URL": "http://testserver/runs/"}
# htmx's header naming the page as text that is no URL (an unclosed IPv6 host).
HTMX_ODD = {"HX-Request": "true", "HX-Current-URL": "http://[::1/runs/"}


def _routes(resolver=None, prefix=""):
    for entry in (resolver or get_resolver()).url_patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from _routes(entry, route)
        elif isinstance(entry, URLPattern) and not route.startswith(NOT_HERE):
            yield route


def _paths(route: str, ids: dict[str, str]) -> list[str]:
    """`route` with its parameters filled by an id that exists, one that does not, one over
    a bigint, and for text parameters a name, an unknown one, a NUL and non-ASCII."""
    params = re.findall(r"<(\w+):(\w+)>", route)
    values = []
    for converter, name in params:
        if converter in ("int", "id"):
            values.append([ids.get(name, "1"), "999999", "99999999999999999999999"])
        elif name == "action":
            values.append(["terminate", "nope"])
        elif converter == "slug":
            values.append(["permanent_error", "nope"])
        else:
            values.append(["test-orders", "\x00", "\u00e9\u2603"])
    paths = []
    for chosen in itertools.product(*values):
        path = route
        for (converter, name), value in zip(params, chosen, strict=True):
            path = path.replace(f"<{converter}:{name}>", quote(value, safe=""), 1)
        paths.append("/" + path)
    return paths


def _requests():
    """(method, data, headers): the form or query, as given and as htmx sends it (with a
    page and with a header that is no URL); each field odd, in turn a different value of
    ODD (field j of request i: ODD[(i + j) % len(ODD)]), alone or repeated."""
    yield "get", {}, {}
    yield "post", {}, HTMX
    for i in range(5):
        yield "get", {name: ODD[(i + j) % len(ODD)] for j, name in enumerate(FIELDS)}, \
            HTMX_ODD if i % 2 else {}
        repeated = {name: [ODD[(i + j + 3) % len(ODD)], "1"] for j, name in enumerate(FIELDS)}
        yield "post", repeated, {} if i % 2 else (HTMX, HTMX_ODD)[i % 4 // 2]


def _writes() -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname, n_tup_ins + n_tup_upd + n_tup_del "
                       "FROM pg_stat_xact_user_tables")
        return dict(cursor.fetchall())


def _written(before: dict[str, int]) -> set[str]:
    return {table for table, n in _writes().items()
            if n != before.get(table, 0)} - WRITTEN_BY_ANY


@pytest.fixture
def places(operator, stuck_run):
    done = advance_once(new_run())
    view = saved_views.save_view(user=operator, name="mine", query="status=attention",
                                 shared=False)
    job, _ = start_bulk_job("terminate", RunFilters(status="attention"), user=operator,
                            reason="incident")
    return {"run_id": str(stuck_run.pk), "job_id": str(job.pk), "view_id": str(view.pk),
            "turn_id": "1", "pk": "1", "done": done}


def test_the_count_of_writes_sees_an_operators_action(client_for, operator, stuck_run):
    before = _writes()
    client_for(operator).post(reverse("console:action", args=[stuck_run.pk, "terminate"]),
                              {"seen": str(stuck_run.audit_seq), "reason": "incident"})
    assert "runs_run" in _written(before)


def test_no_address_answers_5xx_nor_writes_unasked(places, operator):
    people = {"signed out": Client(raise_request_exception=False),
              "without rights": Client(raise_request_exception=False),
              "operator": Client(raise_request_exception=False)}
    people["without rights"].force_login(User.objects.create_user("nobody"))
    people["operator"].force_login(operator)
    faults = []
    for route in _routes():
        for path, (who, client) in itertools.product(_paths(route, places), people.items()):
            for method, data, headers in _requests():
                before = _writes()
                response = getattr(client, method)(path, data, headers=headers)
                written = _written(before)
                what = f"{method.upper()} {path[:60]!r} as {who}, {str(data)[:60]}"
                if response.status_code >= 500:
                    faults.append(f"{response.status_code}: {what}")
                if written and (method == "get" or who != "operator"):
                    faults.append(f"wrote {sorted(written)}: {what}")
    assert faults == []
