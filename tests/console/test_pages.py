"""The console's pages show what an operator needs, escaped, in a constant number of
queries whatever the number of runs."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.execution import executor
from runs.models import Run
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db


def test_runs_list_shows_status_counts_and_rows(client_for, operator, stuck_run):
    response = client_for(operator).get(reverse("console:runs"))
    body = response.content.decode()
    assert response.status_code == 200
    assert f"#{stuck_run.pk}" in body and stuck_run.business_key in body
    assert "permanent" in body


def test_remote_error_text_is_escaped_everywhere(client_for, operator, stuck_run):
    client = client_for(operator)
    for url in (reverse("console:runs"), reverse("console:attention"),
                reverse("console:run", args=[stuck_run.pk])):
        body = client.get(url).content.decode()
        assert "<script>alert(1)</script>" not in body
    detail = client.get(reverse("console:run", args=[stuck_run.pk])).content.decode()
    assert "&lt;script&gt;" in detail


def test_search_finds_a_run_by_idempotency_key_and_by_remote_reference(client_for, operator,
                                                                       script):
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    other = new_run()
    client = client_for(operator)
    key = step(run, "create-task").idempotency_key
    ref = step(run, "create-task").remote_ref
    for q in (key, ref, run.business_key):
        body = client.get(reverse("console:runs"), {"q": q}).content.decode()
        assert f"#{run.pk}<" in body and f"#{other.pk}<" not in body


def test_filters_narrow_the_list(client_for, operator, stuck_run, script):
    done = new_run()
    executor.advance_run(done.pk, worker="w1")
    client = client_for(operator)
    body = client.get(reverse("console:runs"), {"attention": "on"}).content.decode()
    assert f"#{stuck_run.pk}<" in body and f"#{done.pk}<" not in body
    body = client.get(reverse("console:runs"), {"error_class": "permanent"}).content.decode()
    assert f"#{stuck_run.pk}<" in body and f"#{done.pk}<" not in body
    body = client.get(reverse("console:runs"), {"status": "completed"}).content.decode()
    assert f"#{done.pk}<" in body and f"#{stuck_run.pk}<" not in body


def test_keyset_pagination_walks_every_run_once(client_for, operator, settings):
    from runs.reads import selectors

    runs = [new_run() for _ in range(7)]
    seen, after = [], None
    while True:
        page, after = selectors.runs_page(selectors.RunFilters(), workflow_ids=None,
                                          after=after, limit=3)
        seen += [r.pk for r in page]
        if after is None:
            break
    assert sorted(seen) == sorted(r.pk for r in runs) and len(seen) == len(set(seen))


def test_run_detail_shows_steps_keys_contract_and_audit(client_for, operator, stuck_run):
    body = client_for(operator).get(reverse("console:run", args=[stuck_run.pk])).content.decode()
    task = step(stuck_run, "create-task")
    assert task.idempotency_key in body
    assert "recovery contract" in body and "reconcile by key" in body
    assert "succeeded" in body and "attention" in body


def _queries(client, url):
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx)


@pytest.mark.parametrize("page", ["console:runs", "console:attention", "console:audit"])
def test_list_pages_cost_the_same_queries_for_10_and_1000_runs(client_for, operator, script,
                                                               page):
    from django.core.management import call_command

    from runs.machine.errors import PermanentError

    client = client_for(operator)
    for _ in range(10):
        script.plan["create-task"] = [PermanentError("no")]
        executor.advance_run(new_run().pk, worker="w1")
    small = _queries(client, reverse(page))
    call_command("seed_scale", runs=1000, stdout=open("/dev/null", "w"))  # noqa: SIM115
    assert Run.objects.count() == 1010
    assert _queries(client, reverse(page)) == small


@pytest.mark.parametrize("page", ["console:runs", "console:attention"])
def test_list_pages_cost_the_same_queries_for_a_page_of_10_and_of_1000_rows(
        client_for, operator, script, monkeypatch, page):
    """No query per row: the same page drawn with 10 rows and with 1,000 (the page size
    raised to 1,000 for the test)."""
    import re

    from django.core.management import call_command

    from runs.machine.errors import PermanentError
    from runs.models import RunStatus
    from runs.reads import selectors

    monkeypatch.setattr(selectors, "PAGE_SIZE", 1000)
    monkeypatch.setattr(selectors, "ATTENTION_PAGE_SIZE", 1000)
    client = client_for(operator)
    for _ in range(10):
        script.plan["create-task"] = [PermanentError("no")]
        executor.advance_run(new_run().pk, worker="w1")

    def rows_and_queries():
        with CaptureQueriesContext(connection) as ctx:
            body = client.get(reverse(page)).content.decode()
        return len(re.findall(r'">#\d+</a>', body)), len(ctx)

    rows, small = rows_and_queries()
    assert rows == 10
    call_command("seed_scale", runs=990, stdout=open("/dev/null", "w"))  # noqa: SIM115
    # Every seeded run in attention too, with the reason the first ten have.
    reason = Run.objects.filter(status=RunStatus.ATTENTION).values_list(
        "attention_reason", flat=True).first()
    Run.objects.filter(business_key__startswith="scale:").update(
        status=RunStatus.ATTENTION, attention_reason=reason)
    assert rows_and_queries() == (1000, small)


def test_run_detail_costs_the_same_queries_for_few_and_many_audit_records(client_for,
                                                                          operator, script):
    client = client_for(operator)
    short = new_run()
    long = new_run()
    executor.advance_run(long.pk, worker="w1")
    assert _queries(client, reverse("console:run", args=[short.pk])) == \
        _queries(client, reverse("console:run", args=[long.pk]))


def test_workflow_page_shows_the_recovery_contract_and_verdict(client_for, operator):
    body = client_for(operator).get(reverse("console:workflow",
                                            args=["invoice-approval"])).content.decode()
    assert "Verdict: limited trial" in body and "post-ledger-entry" in body


def test_audit_page_filters_and_exports_csv(client_for, operator, stuck_run):
    client = client_for(operator)
    body = client.get(reverse("console:audit"), {"action": "attention"}).content.decode()
    assert f"#{stuck_run.pk}" in body and ">intent<" not in body
    response = client.get(reverse("console:audit"), {"run": stuck_run.pk, "format": "csv"})
    assert response["Content-Type"] == "text/csv"
    lines = b"".join(response.streaming_content).decode().strip().splitlines()
    assert lines[0].startswith("id,run,seq,time,actor,action")
    assert len(lines) == 1 + stuck_run.audit_records.count()


def test_the_status_counts_are_one_query_each_status_counted_up_to_the_cap(monkeypatch):
    from runs.models import RunStatus
    from runs.reads import selectors

    monkeypatch.setattr(selectors, "COUNT_CAP", 2)
    runs = [new_run() for _ in range(4)]
    assert {r.status for r in runs} == {RunStatus.QUEUED}
    with CaptureQueriesContext(connection) as ctx:
        counts = selectors.status_counts(workflow_ids=None)
    assert len(ctx) == 1
    # Past the cap a count says cap + 1 ("more than"); the page shows "2+".
    assert counts == {**dict.fromkeys(RunStatus.values, 0), RunStatus.QUEUED: 3}
    assert selectors.status_counts(workflow_ids=frozenset({runs[0].workflow_id + 1})) == \
        dict.fromkeys(RunStatus.values, 0)
    assert selectors.status_counts(workflow_ids=frozenset()) == \
        dict.fromkeys(RunStatus.values, 0)


def test_the_filter_form_shows_the_chosen_options_selected_and_any_elsewhere(client_for,
                                                                            operator):
    body = client_for(operator).get(reverse("console:runs"), {
        "status": "waiting", "error_class": "unknown"}).content.decode()
    assert '<select name="status" id="id_status">' in body
    assert '<option value="waiting" selected>waiting</option>' in body
    assert '<option value="unknown" selected>unknown</option>' in body
    assert '<option value="compensation_failed">compensation failed</option>' in body
    step_status = body[body.index('<select name="step_status"'):]
    assert step_status.index('<option value="" selected>any</option>') < \
        step_status.index("</select>")
    assert "selected>any" not in body[body.index('name="status"'):body.index('name="workflow"')]


def test_a_runs_list_row_links_the_run_and_shows_its_last_error_cut_with_the_whole_in_a_title(
        client_for, operator, script):
    from runs.machine.errors import PermanentError

    message = "403 from tracker: " + "x" * 120
    script.plan["create-task"] = [PermanentError(message)]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    body = client_for(operator).get(reverse("console:runs")).content.decode()
    row = body[body.index(f'value="{run.pk}"'):]
    row = row[:row.index("</tr>")]
    assert f'<a href="{reverse("console:run", args=[run.pk])}">#{run.pk}</a>' in row
    assert f'<a href="{reverse("console:workflow", args=[run.workflow_name])}">' in row
    assert f"v{run.workflow_version}<" in row
    assert run.get_attention_reason_display() in row
    assert f"{run.current_step} <span class=\"muted\">{run.steps_done}/{run.step_count}" in row
    stored = step(run, "create-task").error_message
    assert len(stored) > 90 and message in stored
    assert f'title="{stored}"' in row and f">{stored[:89]}…</span>" in row
