"""The investigation card verifies the run's chain and its end against the head the run row
keeps; a chain rewritten with every hash recomputed and the head set to match passes both,
so the card also checks the head's seal (audit.head_seals) and stops on one that does not
verify: the whole history is unconfirmed."""

import pytest
from django.db import connection

from audit.chain import CONTENT_FIELDS, GENESIS, record_hash
from audit.models import AuditRecord
from runs.execution import executor
from runs.models import Run
from runs.operator.investigation import investigate
from tests.factories import new_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(script):
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    return Run.objects.get(pk=run.pk)


def _behind_the_triggers(*statements):
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        for sql, params in statements:
            cursor.execute(sql, params)
        cursor.execute("SET session_replication_role = origin")


def test_a_sealed_head_leaves_the_chain_intact(run):
    assert investigate(run).audit_chain == "intact"


def test_a_chain_rewritten_with_its_head_stops_the_card(run):
    records = list(AuditRecord.objects.filter(run=run).order_by("seq"))
    records[1].reason = "approved by the CFO"
    prev, statements = GENESIS, []
    for record in records:
        record.prev_hash = prev
        record.hash = prev = record_hash(prev_hash=prev,
                                         **{f: getattr(record, f) for f in CONTENT_FIELDS})
        statements.append(("UPDATE audit_auditrecord SET reason = %s, prev_hash = %s, "
                           "hash = %s WHERE id = %s",
                           [record.reason, record.prev_hash, record.hash, record.pk]))
    statements.append(("UPDATE runs_run SET audit_head = %s WHERE id = %s",
                       [records[-1].hash, run.pk]))
    _behind_the_triggers(*statements)

    card = investigate(Run.objects.get(pk=run.pk))

    assert card.audit_chain == "broken" and card.chain_broken_at == 1
    assert card.verdict == "stop"
    assert any(text.startswith("the whole audit history:")
               and "the head's seal does not verify with key 'dev'" in text
               for text in card.unconfirmed)
    assert not any("audit chain verifies" in f.text for f in card.facts)


def test_a_head_without_a_seal_stops_the_card(run):
    _behind_the_triggers(("UPDATE runs_run SET audit_seal = NULL WHERE id = %s", [run.pk]))
    card = investigate(Run.objects.get(pk=run.pk))
    assert card.audit_chain == "broken"
    assert any("its head carries no seal" in text for text in card.unconfirmed)
