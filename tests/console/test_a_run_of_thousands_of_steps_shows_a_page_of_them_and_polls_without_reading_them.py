"""A run of thousands of steps: its page draws one page of PAGE steps (naming which, and
linking the others), opens on the step a person is wanted at, names those wanting a person
on other pages, and its poll tells "nothing changed" without reading a step: the same
statements for a run of 50 steps as for one of 2,000, none of them on the steps table. It
drew a row per step (4 MB for 4,000) at each drawing and read and drew them all at each
poll, every 5 s, to answer 204."""

import re
import uuid
from html import unescape

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from console.step_pages import PAGE
from runs.definitions import definition
from runs.execution import executor
from runs.machine.errors import PermanentError
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from tests.factories import new_run, place
from tests.workflows import OrderIn

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
ROW = re.compile(r'<tr id="step-(\d+)">')


@pytest.fixture
def wide_run():
    """wide_run(count, unknown=n): a run of `count` read steps, started through start_run,
    placed in attention with step number n's outcome unknown and those before it done."""
    flows = []

    def make(count: int, *, unknown: int) -> Run:
        flow = definition.Workflow(f"test-wide-{count}-{uuid.uuid4().hex[:8]}", version=1,
                                   input=OrderIn)
        flows.append(flow)
        for i in range(1, count + 1):
            flow.read(f"read-{i:04d}")(lambda ctx: {"ok": True})
        run = new_run(flow.name, wake=False)
        assert Step.objects.filter(run=run).count() == count
        Step.objects.filter(run=run, position__lt=unknown - 1).update(
            status=StepStatus.SUCCEEDED, remote_ref="done-before")
        Step.objects.filter(run=run, position=unknown - 1).update(
            status=StepStatus.UNKNOWN, attempt=1, remote_ref="",
            error_class="unknown", error_message="timeout after send <b>x</b>")
        return place(run, status=RunStatus.ATTENTION,
                     attention_reason=AttentionReason.UNKNOWN_OUTCOME,
                     current_step=f"read-{unknown:04d}", steps_done=unknown - 1,
                     step_count=count)

    yield make
    for flow in flows:
        definition.registry.unregister(flow)


def _rows(body: str) -> list[int]:
    return [int(n) for n in ROW.findall(body)]


def _link(body: str, text: str) -> str:
    found = re.search(r'<a href="([^"]+)"[^>]*>' + re.escape(text), body)
    assert found, f"no link {text!r}"
    return unescape(found.group(1))


def _poll_url(body: str) -> str:
    found = re.search(r'<div id="run-live" hx-get="([^"]+)" hx-trigger="every 5s"', body)
    assert found, "the live part does not poll"
    return unescape(found.group(1))


def test_the_page_draws_one_page_of_steps_around_the_one_wanting_a_person(
        client_for, operator, wide_run):
    run = wide_run(2000, unknown=1234)
    client = client_for(operator)
    body = client.get(reverse("console:run", args=[run.pk])).content.decode()
    assert _rows(body) == list(range(1201, 1301))
    assert "Steps 1,201–1,300 of 2,000" in body
    # The row wanted is drawn whole: its key, status and (escaped) last error.
    key = Step.objects.get(run=run, name="read-1234").idempotency_key
    row = body[body.index('<tr id="step-1234">'):]
    row = row[:row.index("</tr>")]
    assert key in row and "s-unknown" in row
    assert "timeout after send &lt;b&gt;x&lt;/b&gt;" in row and "<b>x</b>" not in body
    # The run's actions are offered as before, whatever page of its steps is drawn.
    assert 'id="dialog-resume"' in body and 'id="dialog-terminate"' in body
    # The investigation card here lists the same page of steps; its own page, all of them.
    card = body[body.index('id="investigation-card"'):]
    assert "<td>read-1234</td>" in card and "<td>read-0001</td>" not in card
    assert "Steps 1,201–1,300 of 2,000, as in the table of steps" in card
    whole = client.get(reverse("console:investigation", args=[run.pk])).content.decode()
    assert whole.count("<td>read-") == 2000
    # It drew 2 MB.
    assert len(body) < 250_000, len(body)


def test_the_links_lead_page_by_page_to_the_last_step(client_for, operator, wide_run):
    run = wide_run(250, unknown=120)
    client = client_for(operator)
    page = reverse("console:run", args=[run.pk])
    first = client.get(page, {"steps": "1"}).content.decode()
    assert _rows(first) == list(range(1, PAGE + 1))
    assert "Steps 1–100 of 250" in first
    assert "Previous:" not in first and "First:" not in first
    seen, body = [], first
    while "Next: steps" in body:
        body = client.get(_link(body, "Next: steps")).content.decode()
        seen += _rows(body)
    assert seen == list(range(101, 251))
    assert "Steps 201–250 of 250" in body and "Last: steps" not in body
    last = client.get(_link(first, "Last: steps 201–250")).content.decode()
    assert _rows(last) == list(range(201, 251))
    back = client.get(_link(last, "Previous: steps 101–200")).content.decode()
    assert _rows(back) == list(range(101, 201))
    # The page asked for stays in the poll.
    assert "steps=201" in _poll_url(last)


def test_a_step_wanting_a_person_on_another_page_is_named_and_linked(client_for, operator,
                                                                     wide_run):
    run = wide_run(2000, unknown=1234)
    client = client_for(operator)
    body = client.get(reverse("console:run", args=[run.pk]), {"steps": "1"}).content.decode()
    assert 1234 not in _rows(body)
    named = _link(body, "step 1234, read-1234 (unknown)")
    assert "steps=1234" in named and named.endswith("#step-1234")
    assert 1234 in _rows(client.get(named).content.decode())


def test_a_step_number_the_run_lacks_or_no_number_is_told_not_drawn(client_for, operator,
                                                                     wide_run):
    run = wide_run(250, unknown=120)
    client = client_for(operator)
    page = reverse("console:run", args=[run.pk])
    missing = client.get(page, {"steps": "9999"})
    assert missing.status_code == 200
    assert "This run has no step 9999: it has 250." in missing.content.decode()
    assert _rows(missing.content.decode()) == list(range(101, 201))
    for text in ("<script>alert(1)</script>", "-5", "²", "1" * 40):
        response = client.get(page, {"steps": text})
        assert response.status_code == 200
        body = response.content.decode()
        assert "<script>alert(1)</script>" not in body
        assert _rows(body) == list(range(101, 201)), text


def _poll_statements(client, run: Run) -> list[str]:
    poll = _poll_url(client.get(reverse("console:run", args=[run.pk])).content.decode())
    with CaptureQueriesContext(connection) as queries:
        response = client.get(poll, **HTMX)
    assert response.status_code == 204 and response.content == b""
    return [q["sql"] for q in queries.captured_queries]


def test_the_poll_of_an_unchanged_run_reads_no_step_however_many(client_for, operator,
                                                                  wide_run):
    client = client_for(operator)
    small = _poll_statements(client, wide_run(50, unknown=30))
    large_run = wide_run(2000, unknown=1234)
    large = _poll_statements(client, large_run)
    assert len(small) == len(large), (small, large)
    assert not [sql for sql in large if "runs_step" in sql]

    # Once the run changes, the poll draws it again, still one page of its steps.
    poll = _poll_url(client.get(reverse("console:run", args=[large_run.pk]),
                                {"steps": "1901"}).content.decode())
    other = Client()
    other.force_login(operator)
    done = other.post(reverse("console:action", args=[large_run.pk, "terminate"]),
                      {"seen": str(large_run.audit_seq), "reason": "stuck for good"})
    assert done.status_code == 302
    changed = client.get(poll, **HTMX)
    assert changed.status_code == 200
    assert 'class="badge s-terminated"' in changed.content.decode()
    assert _rows(changed.content.decode()) == list(range(1901, 2001))


def test_the_steps_a_worker_moved_on_are_drawn_at_the_next_poll(client_for, operator,
                                                               script):
    # No change of a step is written without its run's row: the poll tells it from that.
    script.plan["create-task"] = [PermanentError("403 from tracker")]
    run = new_run(wake=False)
    client = client_for(operator)
    poll = _poll_url(client.get(reverse("console:run", args=[run.pk])).content.decode())
    assert client.get(poll, **HTMX).status_code == 204
    executor.advance_run(run.pk, worker="w1")
    moved = client.get(poll, **HTMX)
    assert moved.status_code == 200
    assert "s-succeeded" in moved.content.decode() and "403 from tracker" in moved.content.decode()
    assert client.get(_poll_url(moved.content.decode()), **HTMX).status_code == 204


def test_a_wait_the_runs_end_ended_is_not_named_as_wanting_a_person(client_for, operator,
                                                                    wide_run):
    run = wide_run(150, unknown=150)
    # Terminated while its last step waited: the step keeps `waiting` (kernel.end_waits).
    Step.objects.filter(run=run, name="read-0150").update(
        status=StepStatus.WAITING, error_class="", error_message="")
    run = place(run, status=RunStatus.TERMINATED, attention_reason="")
    client = client_for(operator)
    body = client.get(reverse("console:run", args=[run.pk]), {"steps": "1"}).content.decode()
    assert 150 not in _rows(body)
    assert 'id="steps-elsewhere"' not in body
    assert "read-0150 (waiting)" not in body
    # Its own page says the wait is over.
    last = client.get(reverse("console:run", args=[run.pk]), {"steps": "150"}).content.decode()
    assert 150 in _rows(last)
    assert "the wait ended with the run: it was terminated" in last
