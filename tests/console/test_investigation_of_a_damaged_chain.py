"""The investigation card rests on the run's audit records, so it verifies their hash chain
when it reads them: intact, it says so as a fact; changed after it was written, it names the
first record that does not verify, puts everything from there under "unconfirmed" and stops
(verdict stop: nothing should be acted on from that history), on the page, in the Markdown
and in the API's answer."""

import pytest
from django.db import connection
from django.urls import reverse

from api.tokens import token_create
from audit.chain import Actor, build_record
from audit.models import AuditRecord
from runs.execution import executor
from runs.machine import transitions
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from runs.operator.investigation import investigate, to_markdown
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def _behind_the_triggers(sql, *params):
    """What only someone with the database's superuser can do: the triggers that keep the
    audit table append-only are bypassed."""
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        cursor.execute(sql, params)
        cursor.execute("SET session_replication_role = origin")


@pytest.fixture
def run(script):
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    return run


def test_an_intact_chain_is_a_fact_of_the_card(run):
    card = investigate(run)
    assert card.audit_chain == "intact" and card.chain_broken_at is None
    records = AuditRecord.objects.filter(run=run).count()
    assert any(f.text == f"the run's audit chain verifies, {records} records"
               for f in card.facts)
    assert card.verdict == "go"


def test_a_record_changed_after_it_was_written_stops_the_card_at_that_record(
        run, client_for, operator, client):
    changed = AuditRecord.objects.filter(run=run).order_by("seq")[2]
    _behind_the_triggers("UPDATE audit_auditrecord SET reason = 'nothing to see here' "
                         "WHERE id = %s", changed.pk)
    card = investigate(run)
    assert card.audit_chain == "broken" and card.chain_broken_at == changed.seq
    assert card.verdict == "stop" and f"record #{changed.seq}" in card.next_step
    assert any(text.startswith(f"everything from audit record #{changed.seq}")
               for text in card.unconfirmed)
    assert not any("audit chain verifies" in f.text for f in card.facts)
    assert f"Audit chain: **broken at record #{changed.seq}**." in to_markdown(card)

    page = client_for(operator).get(reverse("console:investigation", args=[run.pk]))
    assert f"The audit chain does not verify at record #{changed.seq}" in page.content.decode()
    _, plaintext = token_create(name="erp", workflows=["test-orders"], rate_limit=None)
    answer = client.get(f"/api/runs/{run.pk}/investigation",
                        HTTP_AUTHORIZATION=f"Bearer {plaintext}").json()
    assert answer["audit_chain"] == "broken" and answer["chain_broken_at"] == changed.seq
    assert answer["verdict"] == "stop"


@pytest.mark.parametrize("kept", [3, 0])
def test_records_removed_from_the_end_of_the_chain_stop_the_card_too(run, kept):
    run.refresh_from_db()
    last = run.audit_seq
    assert AuditRecord.objects.filter(run=run).count() == last > kept
    _behind_the_triggers("DELETE FROM audit_auditrecord WHERE run_id = %s AND seq > %s",
                         run.pk, kept)
    card = investigate(run)
    assert card.audit_chain == "broken" and card.chain_broken_at == kept + 1
    assert card.verdict == "stop"
    assert any(f"ends before the head its row keeps (#{last})" in text
               for text in card.unconfirmed)


def test_a_lookup_made_for_a_broken_chain_does_not_send_the_person_on(script):
    run = place(new_run(), status=RunStatus.ATTENTION,
                attention_reason=AttentionReason.UNKNOWN_OUTCOME,
                step_statuses={"fetch": StepStatus.SUCCEEDED, "classify": StepStatus.SUCCEEDED,
                               "create-task": StepStatus.UNKNOWN})
    key = Step.objects.get(run=run, name="create-task").idempotency_key
    script.effects[key] = "create-task-1"  # the lookup by key finds it
    first = AuditRecord.objects.filter(run=run).order_by("seq").first()
    _behind_the_triggers("UPDATE audit_auditrecord SET reason = 'x' WHERE id = %s", first.pk)
    card = investigate(run, lookups=True)
    assert script.reconcile_calls  # the lookup was made, and is a fact of the card
    assert card.verdict == "stop" and card.next_step.startswith("none until the audit chain")
    assert "Reconcile" not in card.next_step


def test_a_record_whose_data_was_rewritten_as_no_object_still_shows_the_run(
        run, client_for, operator):
    """Rewritten past the triggers as JSON that is no object (a list, a string), a record's
    data, before and after are shown as they are, and the chain stops the card; the run
    page and its timeline still answer."""
    changed = AuditRecord.objects.filter(run=run).order_by("seq")[1]
    _behind_the_triggers("UPDATE audit_auditrecord SET data = '[\"forged\", 1]', "
                         "before = '\"was\"', after = '7' WHERE id = %s", changed.pk)
    client = client_for(operator)
    page = client.get(reverse("console:run", args=[run.pk]))
    assert page.status_code == 200
    body = page.content.decode()
    assert "&quot;forged&quot;" in body or "\"forged\"" in body
    card = client.get(reverse("console:investigation", args=[run.pk]))
    assert card.status_code == 200
    assert investigate(run).chain_broken_at == changed.seq


def test_a_forged_record_appended_past_the_head_stops_the_card(run):
    # Its hash links to the last record, so the chain alone verifies: only the head the run
    # row keeps says it was not written by the runtime.
    run.refresh_from_db()
    forged = build_record(run_id=run.pk, head_seq=run.audit_seq, head_hash=run.audit_head,
                          action="succeeded", actor=Actor.system("w1"),
                          reason="nothing happened here")
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
    forged.save()
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = origin")
    card = investigate(run)
    assert card.audit_chain == "broken" and card.chain_broken_at == run.audit_seq + 1
    assert card.verdict == "stop"
    assert any(f"goes on past the head its row keeps (#{run.audit_seq})" in text
               for text in card.unconfirmed)


def test_a_run_that_went_on_after_its_row_was_read_is_intact(script):
    run = new_run(wake=False)
    stale = Run.objects.get(pk=run.pk)
    transitions.cancel(run.pk, actor=Actor.system("ops"), reason="no longer needed")
    assert Run.objects.get(pk=run.pk).audit_seq > stale.audit_seq
    card = investigate(stale)
    assert card.audit_chain == "intact" and card.chain_broken_at is None
