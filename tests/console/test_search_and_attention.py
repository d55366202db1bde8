"""Search and the attention list stay index-driven and paged as the tables grow: a search is
a union of index lookups, the attention list is keyset-paged with its true count (or an
honest "more than"), and a page of 1,000 rows costs the queries of a page of 10."""

import re
from urllib.parse import unquote

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.execution import executor
from runs.machine.errors import PermanentError
from runs.models import Run, RunStatus, Step
from runs.reads import selectors
from tests.factories import new_run, place, step

pytestmark = pytest.mark.django_db


def _shown(body: str) -> list[int]:
    """The runs a page lists, in its order."""
    return list(dict.fromkeys(int(pk) for pk in re.findall(r"#(\d+)<", body)))


def _walk(client, url) -> tuple[list[int], list[str]]:
    """Every run the pages of `url` show, following "Next page", and each page's body."""
    seen, bodies, query = [], [], {}
    while True:
        body = client.get(url, query).content.decode()
        bodies.append(body)
        seen += _shown(body)
        found = re.search(r'href="\?after=([^"]+)"', body)
        if not found:
            return seen, bodies
        query["after"] = unquote(found.group(1))


def test_search_finds_a_run_by_each_thing_it_matches(client_for, operator, script):
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    other = new_run()
    # A search for the run's id also finds business keys that end with those digits, and a
    # key ends with a timestamp: the other run's must not.
    while other.business_key.endswith(str(run.pk)):
        other = new_run()
    Step.objects.filter(run=run, name="create-task").update(compensation_ref="CANCEL-77")
    client = client_for(operator)
    task = step(run, "create-task")
    for q in (task.idempotency_key, task.remote_ref, "CANCEL-77", run.business_key,
              run.business_key[:-3], str(run.pk), f"  {task.remote_ref} "):
        shown = _shown(client.get(reverse("console:runs"), {"q": q}).content.decode())
        assert run.pk in shown and other.pk not in shown, q
    for q in ("no-such-key", "%", "_", "²", "9" * 30):
        shown = _shown(client.get(reverse("console:runs"), {"q": q}).content.decode())
        assert run.pk not in shown and other.pk not in shown, q


def test_search_keeps_the_other_filters_and_pages_every_match_once(operator, script):
    matches = [new_run() for _ in range(7)]
    prefix = "order-"
    place(matches[0], status=RunStatus.ATTENTION)
    seen, after = [], None
    while True:
        page, after = selectors.runs_page(selectors.RunFilters(q=prefix), workflow_ids=None,
                                          after=after, limit=3)
        seen += [r.pk for r in page]
        if after is None:
            break
    assert seen == [r.pk for r in Run.objects.order_by("-updated_at", "-pk")]
    narrowed, _ = selectors.runs_page(selectors.RunFilters(q=prefix, attention=True),
                                      workflow_ids=None)
    assert [r.pk for r in narrowed] == [matches[0].pk]


def test_search_is_answered_from_indexes_not_by_scanning_runs_or_steps(client_for, operator,
                                                                       script):
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    task = step(run, "create-task")
    client = client_for(operator)
    for q in (task.idempotency_key, task.remote_ref, "CANCEL-1", "order-", str(run.pk)):
        with CaptureQueriesContext(connection) as ctx:
            client.get(reverse("console:runs"), {"q": q})
        searches = [c["sql"] for c in ctx.captured_queries
                    if "runs_step" in c["sql"] and "UNION" in c["sql"]]
        assert len(searches) == 1, q
        with connection.cursor() as cursor:
            # Tiny tables are cheapest to scan; forbidding scans shows an index can answer.
            cursor.execute("SET enable_seqscan = off")
            try:
                cursor.execute("EXPLAIN " + searches[0])
                plan = [row[0].strip() for row in cursor.fetchall()]
            finally:
                cursor.execute("RESET enable_seqscan")
        # Every read of a run or a step looks its rows up by a condition on an index: no
        # sequential scan, and no walk along a whole index with a filter.
        for line, following in zip(plan, plan[1:] + [""], strict=True):
            if "Scan" in line and ("runs_run" in line or "runs_step" in line) \
                    and not line.startswith("->  Bitmap Heap Scan"):
                assert "Seq Scan" not in line and following.startswith("Index Cond"), \
                    "\n".join(plan)


def _attention_runs(n):
    runs = [new_run() for _ in range(n)]
    for run in runs:
        place(run, status=RunStatus.ATTENTION, attention_reason="permanent_error")
    return runs


def test_attention_list_pages_oldest_first_with_the_true_count(client_for, operator,
                                                              monkeypatch):
    monkeypatch.setattr(selectors, "ATTENTION_PAGE_SIZE", 3)
    runs = _attention_runs(8)
    new_run()  # not in attention
    seen, bodies = _walk(client_for(operator), reverse("console:attention"))
    assert seen == [r.pk for r in Run.objects.filter(status=RunStatus.ATTENTION)
                    .order_by("updated_at", "pk")]
    assert sorted(seen) == sorted(r.pk for r in runs)
    assert len(bodies) == 3
    assert all("(8, oldest first)" in body for body in bodies)


@pytest.mark.parametrize("after", ["garbage", "2026-99-99T00:00:00|1",
                                   "2026-01-01T00:00:00+00:00|99999999999999999999"])
def test_attention_list_starts_over_at_a_cursor_it_never_handed_out(client_for, operator,
                                                                    after):
    runs = _attention_runs(2)
    answer = client_for(operator).get(reverse("console:attention"), {"after": after})
    assert answer.status_code == 200
    assert sorted(_shown(answer.content.decode())) == sorted(r.pk for r in runs)


def test_attention_list_says_more_than_the_cap_when_there_are_more(client_for, operator,
                                                                   monkeypatch):
    monkeypatch.setattr(selectors, "COUNT_CAP", 4)
    _attention_runs(6)
    body = client_for(operator).get(reverse("console:attention")).content.decode()
    assert "(more than 4, oldest first)" in body


def _queries(client, url, params=None):
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, params or {})
        assert response.status_code == 200
    return len(ctx), response.content.decode()


def test_list_pages_cost_the_same_queries_for_pages_of_10_and_1000_rows(
        client_for, operator, script, monkeypatch):
    for _ in range(3):
        script.plan["create-task"] = [PermanentError("no")]
        executor.advance_run(new_run().pk, worker="w1")
    call_command("seed_scale", runs=1000, stdout=open("/dev/null", "w"))  # noqa: SIM115
    Run.objects.filter(business_key__startswith="scale:").update(status=RunStatus.ATTENTION)
    client = client_for(operator)
    pages = [(reverse("console:runs"), None), (reverse("console:attention"), None),
             (reverse("console:runs"), {"q": "scale:"}),
             (reverse("console:runs"), {"error_class": "unknown", "attention": "on"})]
    costs = {}
    for size in (10, 1000):
        monkeypatch.setattr(selectors, "PAGE_SIZE", size)
        monkeypatch.setattr(selectors, "ATTENTION_PAGE_SIZE", size)
        for url, params in pages:
            count, body = _queries(client, url, params)
            assert len(_shown(body)) == min(size, 1000) or "error_class" in str(params)
            costs.setdefault((url, str(params)), []).append(count)
    assert all(small == large for small, large in costs.values()), costs
