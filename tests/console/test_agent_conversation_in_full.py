"""The run page shows an agent step's whole conversation: the system prompt, each model
message with its tokens, each tool call's arguments and result with the declared fields
masked; a long conversation a page of turns at a time, at the same queries; the archived
run page names the tools called, as the archive file holds them."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from archive.archiving import ArchiveReport, remove, write_file
from runs.models import Run, ToolCall
from runs.reads.agent_selectors import TURN_PAGE
from tests.console.test_agent_conversation_page import agent_run

pytestmark = pytest.mark.django_db(transaction=True)

IBAN = "DE89370400440532013000"


def page(client, run, **query):
    with CaptureQueriesContext(connection) as ctx:
        body = client.get(reverse("console:run", args=[run.pk]), query).content.decode()
    return body, len(ctx)


def test_the_conversation_shows_prompt_messages_results_and_tokens(client_for, operator):
    run = agent_run(2, content="The invoice is for office chairs.")
    ToolCall.objects.filter(step__run=run, turn=1).update(
        result={"entry": "LE-0001", "iban": IBAN, "note": "posted"})
    body, _ = page(client_for(operator), run)
    assert "System prompt" in body and "You triage supplier invoices." in body
    assert "The invoice is for office chairs." in body
    assert "101 prompt + 7 completion tokens" in body  # per turn, not only in all
    assert "result:" in body and "posted" in body
    assert IBAN not in body and "[redacted]" in body


def test_a_long_conversation_is_paged_at_the_same_queries(client_for, operator):
    client = client_for(operator)
    short, long = agent_run(2, note="short"), agent_run(TURN_PAGE + 15, note="long")
    _, few = page(client, short)
    body, many = page(client, long)
    assert many == few
    assert "LE-0000" in body and f"LE-{TURN_PAGE - 1:04d}" in body
    assert f"LE-{TURN_PAGE:04d}" not in body
    assert f"?turns_from={TURN_PAGE}" in body and f"{TURN_PAGE + 15} turns" in body
    body, later = page(client, long, turns_from=TURN_PAGE)
    assert later == few
    assert f"LE-{TURN_PAGE + 14:04d}" in body and "LE-0000" not in body
    assert "?turns_from=0" in body  # back to the earlier turns


def test_the_archived_run_page_names_the_tools_called(client_for, operator):
    run = agent_run(2, note="archived")
    Run.objects.filter(pk=run.pk).update(status="completed", finished_at=timezone.now())
    archive = write_file([run.pk], actor="test", now=timezone.now())
    remove(archive, actor="test", remove_batch=10, report=ArchiveReport())
    assert not Run.objects.filter(pk=run.pk).exists()
    body = client_for(operator).get(reverse("console:archived_run", args=[run.pk])) \
        .content.decode()
    assert "Tool calls" in body and body.count("<strong>post-ledger</strong>") == 2
    assert "LE-0001" in body
