"""The runs list as operators use it: search finds what people type (the end of a business
key, a key's first characters, a tool call's key or reference, part of a workflow's name),
every sort order pages each run once in its order, a time range narrows it, saved views
are a person's own or shared, and the "N new" bar counts what started matching after the
page was drawn at fewer queries than the page."""

import re
from datetime import timedelta
from urllib.parse import unquote

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from console.models import SavedView
from runs.execution import executor
from runs.machine.transitions import start_run
from runs.models import Run, RunStatus, ToolCall
from runs.reads import selectors
from tests.factories import SYSTEM, new_run, place, step

pytestmark = pytest.mark.django_db


def _shown(body: str) -> list[int]:
    return list(dict.fromkeys(int(pk) for pk in re.findall(r"#(\d+)<", body)))


def _search(client, q, **extra) -> list[int]:
    return _shown(client.get(reverse("console:runs"), {"q": q, **extra}).content.decode())


def _run_with_key(business_key: str, workflow="test-orders") -> Run:
    run, created = start_run(workflow=workflow, business_key=business_key,
                             input={"order": business_key}, actor=SYSTEM)
    assert created
    return run


def test_search_finds_a_business_key_by_its_end_without_the_tenant_prefix(client_for,
                                                                          operator):
    run = _run_with_key("tenant-42:INV-1847")
    other = _run_with_key("tenant-42:INV-1848")
    client = client_for(operator)
    for q in ("INV-1847", "42:INV-1847", "tenant-42:INV-1847", "1847"):
        shown = _search(client, q)
        assert run.pk in shown and other.pk not in shown, q
    assert _search(client, "INV-18") == []  # neither the start nor the end of a key


def test_search_finds_a_run_by_the_key_prefix_the_page_shows(client_for, operator, script):
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    other = new_run()
    key = step(run, "create-task").idempotency_key
    client = client_for(operator)
    for q in (key[:12], f"{key[:12]}…", key[:12].upper(), key):
        shown = _search(client, q)
        assert run.pk in shown and other.pk not in shown, q
    # Too short to be a key's prefix (it would match a large share of all keys).
    assert run.pk not in _search(client, key[:5])


def test_search_finds_a_run_by_its_tool_calls_keys_and_references(client_for, operator):
    run = new_run()
    other = new_run()
    task = step(run, "create-task")
    call = ToolCall.objects.create(step=task, turn=1, index=0, call_id="c1", tool="refund",
                                   args_hash="0" * 64, idempotency_key="ab" * 32,
                                   remote_ref="RFD-551", compensation_ref="UNDO-RFD-551",
                                   updated_at=timezone.now())
    client = client_for(operator)
    for q in (call.idempotency_key, call.idempotency_key[:12], "RFD-551", "UNDO-RFD-551"):
        shown = _search(client, q)
        assert run.pk in shown and other.pk not in shown, q


def test_the_workflow_filter_takes_part_of_a_name(client_for, operator):
    orders = new_run()
    saga = new_run("test-saga")
    client = client_for(operator)
    for text, expected, not_expected in (("orders", orders, saga), ("SAGA", saga, orders),
                                         ("test-orders", orders, saga)):
        shown = _shown(client.get(reverse("console:runs"), {"workflow": text}).content.decode())
        assert expected.pk in shown and not_expected.pk not in shown, text
    for params in ({"workflow": "no-such"}, {"workflow": "no-such", "q": orders.business_key},
                   {"workflow": "no-such", "new_since": timezone.now().isoformat()}):
        polled = {"HTTP_HX_REQUEST": "true"} if "new_since" in params else {}
        response = client.get(reverse("console:runs"), params, **polled)
        assert response.status_code == 200 and _shown(response.content.decode()) == []


def test_new_searches_are_answered_from_indexes(client_for, operator, script):
    run = _run_with_key("tenant-7:INV-99")
    executor.advance_run(run.pk, worker="w1")
    key = step(run, "create-task").idempotency_key
    client = client_for(operator)
    for q in ("INV-99", key[:12]):
        with CaptureQueriesContext(connection) as ctx:
            client.get(reverse("console:runs"), {"q": q})
        searches = [c["sql"] for c in ctx.captured_queries if "UNION" in c["sql"]]
        assert len(searches) == 1, q
        with connection.cursor() as cursor:
            cursor.execute("SET enable_seqscan = off")
            try:
                cursor.execute("EXPLAIN " + searches[0])
                plan = "\n".join(row[0] for row in cursor.fetchall())
            finally:
                cursor.execute("RESET enable_seqscan")
        assert "Seq Scan" not in plan, plan
        if q == "INV-99":
            assert "run_business_key_suffix_idx" in plan, plan
        else:
            assert "step_key_head_idx" in plan and "toolcall_key_head_idx" in plan, plan


def _sorted_runs():
    """Runs that differ in every sortable column, with ties where a column allows them."""
    now = timezone.now()
    runs = [new_run() for _ in range(4)] + [new_run("test-saga") for _ in range(3)]
    # Two are held by a worker (their step is sorted beside the others', not read along
    # run_listed_step_idx), one of them tied on its step with runs that are not.
    statuses = [RunStatus.ATTENTION, RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.ATTENTION,
                RunStatus.WAITING, RunStatus.COMPLETED, RunStatus.COMPENSATING]
    steps = ["b-step", "a-step", "b-step", "", "a-step", "c-step", "b-step"]
    for i, run in enumerate(runs):
        # Two runs share an updated_at: the id breaks the tie.
        place(run, status=statuses[i], current_step=steps[i],
              updated_at=now - timedelta(minutes=i // 2),
              created_at=now - timedelta(hours=(i * 5) % 7))
    return list(Run.objects.filter(pk__in=[r.pk for r in runs]))


def _expected(runs, sort):
    columns, descending = selectors.sort_columns(sort)
    key = [("pk" if c == "id" else c) for c in columns]
    return [r.pk for r in sorted(runs, key=lambda r: tuple(getattr(r, c) for c in key),
                                 reverse=descending)]


@pytest.mark.parametrize("sort", [s + name for name in selectors.SORTS for s in ("", "-")])
def test_every_sort_order_pages_each_run_once_in_its_order(sort):
    runs = _sorted_runs()
    seen, after = [], None
    while True:
        page, after = selectors.runs_page(selectors.RunFilters(sort=sort), workflow_ids=None,
                                          after=after, limit=2)
        seen += [r.pk for r in page]
        if after is None:
            break
    assert seen == _expected(runs, sort)


def test_the_list_pages_follow_the_sort_through_the_next_page_links(client_for, operator,
                                                                    monkeypatch):
    monkeypatch.setattr(selectors, "PAGE_SIZE", 3)
    runs = _sorted_runs()
    client = client_for(operator)
    for sort in ("status", "-created", "workflow", "step"):
        seen, query = [], {"sort": sort}
        while True:
            body = client.get(reverse("console:runs"), query).content.decode()
            seen += _shown(body)
            found = re.search(r'href="\?[^"]*after=([^"&]+)"', body)
            if not found:
                break
            query["after"] = unquote(found.group(1))
        assert seen == _expected(runs, sort), sort
    # A cursor that is not one starts over at the first page instead of failing.
    response = client.get(reverse("console:runs"), {"sort": "created", "after": "[1,"})
    assert response.status_code == 200
    assert _shown(response.content.decode())[:3] == _expected(runs, "created")[:3]


def test_a_time_range_narrows_the_list_on_updated_or_created(client_for, operator):
    now = timezone.now()
    recent, old = new_run(), new_run()
    place(old, status=RunStatus.QUEUED, updated_at=now - timedelta(days=3),
          created_at=now - timedelta(days=3))
    made_long_ago = place(new_run(), status=RunStatus.QUEUED, updated_at=now,
                          created_at=now - timedelta(days=10))
    client = client_for(operator)

    def shown(**params):
        return set(_shown(client.get(reverse("console:runs"), params).content.decode()))

    assert shown(period="24h") == {recent.pk, made_long_ago.pk}
    assert shown(period="24h", time_field="created") == {recent.pk}
    assert shown(period="7d", time_field="created") == {recent.pk, old.pk}
    assert shown(period="1h") == {recent.pk, made_long_ago.pk}
    local = timezone.localtime
    assert shown(since=local(now - timedelta(days=4)).strftime("%Y-%m-%dT%H:%M"),
                 until=local(now - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")) == {old.pk}
    # An empty or contradictory range says what is wrong and shows no traceback.
    body = client.get(reverse("console:runs"), {
        "since": "2026-01-02T00:00", "until": "2026-01-01T00:00"}).content.decode()
    assert "From must be before Until" in body
    body = client.get(reverse("console:runs"), {"period": "1h",
                                                "since": "2026-01-02T00:00"}).content.decode()
    assert "either a period" in body


def test_saved_views_are_their_owners_or_shared(client_for, operator, auditor):
    client = client_for(operator)
    response = client.post(reverse("console:save_view"), {
        "name": "  stuck   payments ", "query": "status=attention&workflow=orders&after=x&q=",
        "shared": "on"})
    assert response.status_code == 302
    view = SavedView.objects.get()
    assert (view.name, view.owner, view.shared) == ("stuck payments", operator, True)
    assert view.query == "status=attention&workflow=orders"  # the cursor is not a view
    client.post(reverse("console:save_view"), {"name": "mine", "query": "sort=created"})
    body = client.get(reverse("console:runs")).content.decode()
    assert "stuck payments" in body and "mine" in body

    other = client_for(auditor)
    body = other.get(reverse("console:runs")).content.decode()
    assert "stuck payments" in body and "shared by olga" in body
    assert ">mine<" not in body
    # Only the owner deletes a view, by POST.
    assert other.post(reverse("console:delete_view", args=[view.pk])).status_code == 403
    assert other.get(reverse("console:delete_view", args=[view.pk])).status_code == 405
    assert SavedView.objects.filter(pk=view.pk).exists()
    assert client_for(operator).post(
        reverse("console:delete_view", args=[view.pk])).status_code == 302
    assert not SavedView.objects.filter(pk=view.pk).exists()


def test_a_view_that_cannot_be_saved_says_why_and_saves_nothing(client_for, operator):
    client = client_for(operator)
    for data, problem in (({"name": "  ", "query": "status=attention"}, "needs a name"),
                          ({"name": "x" * 101, "query": ""}, "at most 100"),
                          ({"name": "bad", "query": "status=nonsense"}, "no status"),
                          ({"name": "bad", "query": "since=2026-01-02T00:00&until=2026-01-01"},
                           "From must be before Until")):
        response = client.post(reverse("console:save_view"), data, follow=True)
        assert response.status_code == 200
        assert problem in response.content.decode(), data
    assert SavedView.objects.count() == 0
    User.objects.create_user("nobody", password="pw")
    stranger = client_for(User.objects.get(username="nobody"))
    assert stranger.post(reverse("console:save_view"),
                         {"name": "x", "query": ""}).status_code == 403
    assert SavedView.objects.count() == 0


def _count_queries(client, url, params):
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, params, HTTP_HX_REQUEST="true")
        assert response.status_code == 200
    return len(ctx), response.content.decode()


def test_the_new_runs_bar_counts_runs_that_started_matching_after_the_page(client_for,
                                                                          operator):
    client = client_for(operator)
    new_run()
    with CaptureQueriesContext(connection) as page:
        body = client.get(reverse("console:runs"), {"status": "attention"}).content.decode()
    drawn_at = unquote(re.search(r"new_since=([^\"&]+)", body).group(1))
    poll = {"status": "attention", "new_since": drawn_at}
    queries, bar = _count_queries(client, reverse("console:runs"), poll)
    assert "new — show" not in bar and 'hx-trigger="every 5s"' in bar
    assert queries < len(page)

    entered = place(new_run(), status=RunStatus.ATTENTION, updated_at=timezone.now())
    place(new_run(), status=RunStatus.QUEUED, updated_at=timezone.now())  # does not match
    queries, bar = _count_queries(client, reverse("console:runs"), poll)
    assert "1 new — show" in bar and queries < len(page)
    # The bar's link draws the list afresh, with the same filters: the new run is on it.
    link = re.search(r'href="([^"]+)" class="new-runs-link"', bar).group(1)
    assert entered.pk in _shown(client.get(link.replace("&amp;", "&")).content.decode())

    # A search's bar counts the search's matches.
    _, bar = _count_queries(client, reverse("console:runs"),
                            {"q": entered.business_key, "new_since": drawn_at})
    assert "1 new — show" in bar


def test_the_attention_page_shows_new_runs_in_attention_without_a_reload(client_for,
                                                                         operator):
    client = client_for(operator)
    with CaptureQueriesContext(connection) as page:
        body = client.get(reverse("console:attention")).content.decode()
    drawn_at = unquote(re.search(r"new_since=([^\"&]+)", body).group(1))
    for _ in range(2):
        place(new_run(), status=RunStatus.ATTENTION, updated_at=timezone.now())
    queries, bar = _count_queries(client, reverse("console:attention"),
                                  {"new_since": drawn_at})
    assert "2 new — show" in bar and queries < len(page)


def test_lists_have_a_skip_link_and_the_shortcuts_help(client_for, operator):
    body = client_for(operator).get(reverse("console:runs")).content.decode()
    assert body.index('class="skip-link" href="#main"') < body.index('<main id="main"')
    assert 'id="shortcuts-help"' in body and "go to Attention" in body
    assert 'data-attention-url="/attention/"' in body


# Sorted by current step, the list reads the runs no worker holds along
# run_listed_step_idx and sorts the held ones beside them: no index may name current_step,
# which each step's checkpoint changes (tests/runs/test_checkpoint_in_place.py).
SORT_INDEXES = {"updated": "run_updated_idx", "created": "run_created_idx",
                "workflow": "run_unique_business_key", "status": "run_status_updated_idx"}


def _plan(sql: str) -> list[str]:
    with connection.cursor() as cursor:
        # Tiny tables are cheapest to scan and sort; forbidding both shows that an index
        # gives the order (the planner sorts anyway when none can).
        cursor.execute("SET enable_seqscan = off; SET enable_sort = off")
        try:
            cursor.execute("EXPLAIN " + sql)
            return [row[0].strip() for row in cursor.fetchall()]
        finally:
            cursor.execute("RESET enable_seqscan; RESET enable_sort")


def _page_plans(sort: str):
    """The plan of a sort's first page, then of its second, from its cursor on:
    (after, plan) pairs."""
    runs = _sorted_runs()
    _, cursor = selectors.runs_page(selectors.RunFilters(sort=sort), workflow_ids=None,
                                    limit=2)
    assert cursor is not None and len(runs) > 2
    for after in (None, cursor):
        with CaptureQueriesContext(connection) as ctx:
            selectors.runs_page(selectors.RunFilters(sort=sort), workflow_ids=None,
                                after=after, limit=2)
        (page_sql,) = [c["sql"] for c in ctx.captured_queries if "runs_run" in c["sql"]]
        yield after, _plan(page_sql)


def test_every_sort_order_but_the_steps_is_read_along_an_index_of_its_own():
    assert set(selectors.SORTS) - set(SORT_INDEXES) == {"step"}


@pytest.mark.parametrize("sort", ["step", "-step"])
def test_the_step_order_reads_the_runs_not_held_along_listed_step_from_the_cursor_on(sort):
    for after, plan in _page_plans(sort):
        text = "\n".join(plan)
        listed = [line for line in plan if "run_listed_step_idx on runs_run" in line]
        # The held runs along a partial index that holds them, by their status: run_held_idx,
        # or run_open_work_idx (open runs, led by status, drill runs out), which the planner
        # may prefer when drill runs are left out; never the whole table.
        held = [i for i, line in enumerate(plan)
                if "run_held_idx" in line or "run_open_work_idx" in line]
        assert listed and held, text
        assert any("running,compensating" in line for line in plan[held[0]:held[0] + 3]) \
            or "run_held_idx" in plan[held[0]], text
        if after is not None:  # the next page starts reading at the cursor
            index_conds = [line for line in plan[plan.index(listed[0]) + 1:][:3]
                           if line.startswith("Index Cond")]
            assert index_conds and "listed_step" in index_conds[0], text


@pytest.mark.parametrize("sort", [s + name for name in SORT_INDEXES for s in ("", "-")])
def test_every_sort_order_is_read_along_an_index_from_the_cursor_on(sort):
    for after, plan in _page_plans(sort):
        text = "\n".join(plan)
        # The page's ids (the subquery, runs_run as u0) are read along the sort's index.
        scans = [i for i, line in enumerate(plan)
                 if f"{SORT_INDEXES[sort.lstrip('-')]} on runs_run u0" in line]
        assert scans, text
        # No sort of the runs: the only sorts are those of the per-row facts' subplans,
        # after the page is cut. Sorted by status, the index (status, updated_at) leaves
        # runs changed in the same microsecond to be put in id order, an incremental
        # sort of each such handful, never of the runs read.
        first_subplan = next((i for i, line in enumerate(plan) if line.startswith("SubPlan")),
                             len(plan))
        sorts = [line for line in plan[:first_subplan] if "Sort  (cost" in line]
        allowed = "Incremental Sort" if sort.lstrip("-") == "status" else None
        assert all(allowed and allowed in line for line in sorts), text
        if after is not None:  # the next page starts reading at the cursor
            assert all(plan[i + 1].startswith("Index Cond") for i in scans), text


def test_a_search_keeps_the_sort_order_and_pages_it(client_for, operator):
    now = timezone.now()
    runs = [_run_with_key(f"tenant-{i}:INV-77") for i in range(3)]
    for i, run in enumerate(runs):  # created in the opposite order of their ids
        place(run, status=RunStatus.QUEUED, created_at=now - timedelta(minutes=i))
    by_created = [r.pk for r in reversed(runs)]
    seen, after = [], None
    while True:
        page, after = selectors.runs_page(selectors.RunFilters(q="INV-77", sort="created"),
                                          workflow_ids=None, after=after, limit=2)
        seen += [r.pk for r in page]
        if after is None:
            break
    assert seen == by_created
    client = client_for(operator)
    assert _search(client, "INV-77", sort="-created") == by_created[::-1]
    assert _search(client, "INV-77", sort="workflow") == [r.pk for r in runs]


def test_the_new_runs_bar_counts_a_run_committed_after_the_page_with_an_older_stamp(
        client_for, operator):
    """A run's updated_at is stamped before its transaction commits (and by another
    process's clock): one a page missed counts as new although its stamp is older than the
    page; one the page shows never does."""
    shown = place(new_run(), status=RunStatus.ATTENTION, updated_at=timezone.now())
    client = client_for(operator)
    body = client.get(reverse("console:attention")).content.decode()
    poll_url = re.search(r'hx-get="([^"]+new_since=[^"]+)"', body).group(1).replace("&amp;",
                                                                                     "&")
    assert f"shown={shown.pk}" in poll_url
    drawn_at = timezone.now()
    place(shown, status=RunStatus.ATTENTION, updated_at=drawn_at)  # moved, still shown
    late = place(new_run(), status=RunStatus.ATTENTION,
                 updated_at=drawn_at - timedelta(seconds=2))
    bar = client.get(poll_url, HTTP_HX_REQUEST="true").content.decode()
    assert "1 new — show" in bar and f"shown={shown.pk}" in bar
    assert late.pk in _shown(client.get(reverse("console:attention")).content.decode())
