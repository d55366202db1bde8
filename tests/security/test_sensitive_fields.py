"""Fields a tool declares sensitive are encrypted at rest: after a full run of the demo's
invoice-triage agent (the vendor's IBAN read by lookup-vendor and sent by post-ledger), the
IBAN appears in clear in no table of the project, no archive file and no log line; the
effect still received it. Keys rotate by id."""

import gzip
import logging
import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connection

from archive.archiving import archive_runs
from archive.models import ArchiveFile
from demo.sandbox.models import LedgerEntry
from runs.machine import sensitive
from runs.models import RunStatus, ToolCall
from tests.agent_runs import SMALL, advance, start_triage
from tests.archive.conftest import age
from tests.test_settings import PRODUCTION_ENV

# The simulated external systems keep what they were sent, as a real ledger or model
# provider does: their tables are the other systems' storage, not this project's.
OTHER_SYSTEMS = "sandbox_"


def tables_holding(text: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                       "AND tablename NOT LIKE %s", [OTHER_SYSTEMS + "%"])
        tables = [name for (name,) in cursor.fetchall()]
        found = []
        for table in tables:
            cursor.execute(f'SELECT count(*) FROM "{table}" t WHERE t::text LIKE %s',
                           [f"%{text}%"])
            if cursor.fetchone()[0]:
                found.append(table)
    return found


@pytest.mark.django_db(transaction=True)
def test_no_declared_value_is_stored_archived_or_logged_in_clear(live_sandbox, settings,
                                                                  tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    run = advance(start_triage(SMALL))
    assert run.status == RunStatus.COMPLETED, run.status_message
    post = ToolCall.objects.get(step__run=run, tool="post-ledger")
    lookup = ToolCall.objects.get(step__run=run, tool="lookup-vendor")
    assert sensitive.is_sealed(post.arguments["iban"])
    assert sensitive.is_sealed(lookup.result["iban"])
    iban = sensitive.opened(post.arguments)["iban"]
    assert iban.startswith("DE") and len(iban) == 22
    assert sensitive.opened(lookup.result)["iban"] == iban
    # The effect was executed with the value itself (the ledger is told the account it
    # posts from; the model was given the vendor's record).
    assert LedgerEntry.objects.filter(transaction_ref=post.idempotency_key).count() == 1
    assert post.arguments["amount"] == "345.48"  # undeclared fields stay readable

    assert tables_holding(iban) == []

    settings.VAR_DIR, settings.RUNS_RETENTION_DAYS = tmp_path, 30
    settings.STORAGES = {k: v for k, v in settings.STORAGES.items() if k != "archive"}
    age(run, days=40)
    assert archive_runs(actor="test").runs_removed == 1
    path = tmp_path / "archive" / ArchiveFile.objects.get().name
    with gzip.open(path, "rt") as handle:
        archived = handle.read()
    assert iban not in archived and sensitive.PREFIX in archived
    call_command("verify_audit", "--archive", str(path))
    assert tables_holding(iban) == []

    logged = [r.getMessage() for r in caplog.records]
    assert logged, "the run logged nothing: the log check would prove nothing"
    assert not [line for line in logged if iban in line]
    assert iban not in caplog.text


def test_a_sealed_value_names_its_key_and_rotation_keeps_old_values_readable(settings):
    settings.FIELD_ENCRYPTION_KEYS = {"k1": "A" * 43 + "="}
    sealed = sensitive.seal_fields({"iban": "DE89370400440532013000", "amount": 5}, ("iban",))
    assert sealed["amount"] == 5 and sealed["iban"].startswith("enc:k1:")
    assert "DE89370400440532013000" not in sealed["iban"]

    settings.FIELD_ENCRYPTION_KEYS = {"k2": "B" * 43 + "=", "k1": "A" * 43 + "="}
    assert sensitive.opened(sealed)["iban"] == "DE89370400440532013000"
    again = sensitive.each_sealed(sealed, lambda v: sensitive.encrypt(sensitive.decrypt(v)))
    assert again["iban"].startswith("enc:k2:")
    assert sensitive.encrypt("x").startswith("enc:k2:")

    settings.FIELD_ENCRYPTION_KEYS = {"k2": "B" * 43 + "="}
    assert sensitive.opened(again)["iban"] == "DE89370400440532013000"
    with pytest.raises(sensitive.UnreadableValue, match="key 'k1'"):
        sensitive.opened(sealed)
    # A forged value under a key id that exists does not decrypt either.
    with pytest.raises(sensitive.UnreadableValue, match="does not decrypt"):
        sensitive.decrypt("enc:k2:" + again["iban"].split(":", 2)[2][:-4] + "AAAA")


def test_a_malformed_key_is_refused_with_its_name(settings):
    settings.FIELD_ENCRYPTION_KEYS = {"short": "not-a-fernet-key"}
    with pytest.raises(ImproperlyConfigured, match="FIELD_ENCRYPTION_KEYS"):
        sensitive.encrypt("x")


@pytest.mark.parametrize("missing", ["ARCHIVE_SIGNING_KEYS", "AUDIT_SEAL_KEYS",
                                     "FIELD_ENCRYPTION_KEYS", "RUNS_EVENT_DIGEST_KEYS"])
def test_production_refuses_the_development_keys(missing):
    env = {k: v for k, v in os.environ.items() if k != missing}
    env.update({**PRODUCTION_ENV, "DJANGO_SETTINGS_MODULE": "console.production",
                "SECRET_KEY": "k" * 64})
    del env[missing]
    result = subprocess.run([sys.executable, "-c", "import django; django.setup()"],
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert f"{missing} is not set" in result.stderr


IBAN = "DE89370400440532013000"


@pytest.fixture
def paying():
    """A workflow whose read step returns a bank account it declares sensitive, and whose
    write step sends it: what the write received is kept in `sent`."""
    from runs.definitions import definition
    from runs.definitions.definition import Found, StepResult, Workflow
    from tests.workflows import OrderIn

    workflow = Workflow("test-sensitive-step", version=1, input=OrderIn)
    sent = []

    @workflow.read("fetch-account", sensitive=("iban",))
    def fetch_account(ctx):
        return {"holder": "ACME", "iban": IBAN}

    @workflow.write("pay", impact="high", sensitive=("iban",))
    def pay(ctx):
        sent.append(ctx.results["fetch-account"]["iban"])
        return StepResult({"payment": "P-1", "iban": ctx.results["fetch-account"]["iban"]},
                          remote_ref="P-1")

    @pay.reconcile
    def find_payment(ctx):
        return Found("P-1", {"iban": IBAN})

    yield workflow, sent
    definition.registry.unregister(workflow)


@pytest.mark.django_db
def test_a_steps_declared_result_fields_are_sealed_and_read_in_clear_by_later_steps(
        paying, caplog):
    from audit.chain import Actor
    from runs.execution import executor
    from runs.machine import transitions
    from runs.models import Step

    caplog.set_level(logging.DEBUG)
    _, sent = paying
    run, _ = transitions.start_run(workflow="test-sensitive-step", business_key="pay-1",
                                   input={"order": "o-1"}, actor=Actor.system("test"))
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED

    assert sent == [IBAN]  # the effect got the value itself
    fetched = Step.objects.get(run=run, name="fetch-account").result
    paid = Step.objects.get(run=run, name="pay").result
    assert fetched["holder"] == "ACME" and sensitive.is_sealed(fetched["iban"])
    assert paid["payment"] == "P-1" and sensitive.is_sealed(paid["iban"])
    assert tables_holding(IBAN) == []
    assert IBAN not in caplog.text
