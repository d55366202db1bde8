"""Retiring a key of FIELD_ENCRYPTION_KEYS: `manage.py reseal_fields` seals every stored
sensitive value another key sealed again with the key that seals now (a paused agent's
sealed arguments, its lookup's sealed result, a webhook subscriber's secret), keeps a record
of it in each run's chain (with the new digest of each result that changed) and in the
access chain, and says which keys the stored values still name; then the old key can leave
the ring and the paused run goes on: the posting waiting for approval is made once, with
the account it was proposed with. A run a worker holds is left for a later pass, a value no
key opens is counted and left, and `--count` changes nothing."""

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from api.models import WebhookSubscriber
from api.subscribers import signing_secret, subscriber_create
from audit.access import AccessAction
from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AccessRecord, AuditRecord
from demo.sandbox.models import LedgerEntry
from runs.agent_models import AgentTurn
from runs.agents import agent_history
from runs.execution import executor
from runs.machine import artifacts, sensitive, transitions
from runs.machine.transitions.attempts import result_digest
from runs.models import Run, RunStatus, Step, ToolCall
from tests.agent_runs import ACTOR, LARGE, advance, start_summarised, start_triage
from tests.runs.agents.test_a_value_masked_in_a_turn_is_sent_to_the_model_as_written_and_never_acted_on import (  # noqa: E501
    summarising_model,
)

pytestmark = pytest.mark.django_db(transaction=True)

OLD, NEW = "k-old", "k-new"
KEYS = {OLD: "A" * 43 + "=", NEW: "B" * 43 + "="}
SECRET = "whsec-4711-typed-by-an-admin"


def reseal(*args: str, exits: int = 0) -> str:
    """What the command said; `exits`: the status it must end with (3: a value is left)."""
    out = io.StringIO()
    if not exits:
        call_command("reseal_fields", *args, stdout=out)
        return out.getvalue()
    with pytest.raises(CommandError, match="not every stored value is sealed with") as ended:
        call_command("reseal_fields", *args, stdout=out)
    assert ended.value.returncode == exits
    return out.getvalue()


def sealed_keys(value) -> set[str]:
    found = set()
    sensitive.each_sealed(value, lambda sealed: found.add(sensitive.key_of(sealed)) or sealed)
    return found


@pytest.fixture
def paused_under_the_old_key(live_sandbox, settings):
    """A triage whose large posting waits for approval, and a subscriber, both sealed with
    the old key; then the ring rotated: the new key in front, the old one kept."""
    settings.FIELD_ENCRYPTION_KEYS = {OLD: KEYS[OLD]}
    run = advance(start_triage(LARGE))
    assert run.status == RunStatus.WAITING, run.status_message
    subscriber = WebhookSubscriber(name="erp", url="https://erp.example.com/hook",
                                   secret=SECRET)
    subscriber_create(subscriber, by=User.objects.create_superuser("root"))
    settings.FIELD_ENCRYPTION_KEYS = {NEW: KEYS[NEW], OLD: KEYS[OLD]}
    return run, subscriber


def test_every_sealed_value_is_sealed_again_and_the_paused_run_goes_on_without_the_old_key(
        paused_under_the_old_key, settings):
    run, subscriber = paused_under_the_old_key
    post = ToolCall.objects.get(step__run=run, tool="post-ledger")
    lookup = ToolCall.objects.get(step__run=run, tool="lookup-vendor")
    assert sealed_keys(post.arguments) == sealed_keys(lookup.result) == {OLD}
    iban = sensitive.opened(post.arguments)["iban"]
    counted = reseal("--count")
    assert f"still needed: '{OLD}'" in counted

    said = reseal("--reason", "k-old rotated on schedule")

    assert f"with key '{NEW}': 1 run(s), 1 row(s) of webhook subscribers" in said
    assert f"no stored value names another key than '{NEW}'" in said
    post.refresh_from_db()
    lookup.refresh_from_db()
    assert sealed_keys(post.arguments) == sealed_keys(lookup.result) == {NEW}
    assert sensitive.opened(post.arguments)["iban"] == iban  # the same value, sealed anew
    (record,) = AuditRecord.objects.filter(run=run, action=AuditAction.FIELDS_RESEALED)
    assert record.reason == "k-old rotated on schedule"
    assert record.data["key_id"] == NEW and record.data["values"] >= 2
    # The outcome's record digests the result as it was sealed then; this one, as it is now.
    assert {"tool_call": lookup.ref, "tool": "lookup-vendor",
            "result_sha256": result_digest(lookup.result)} in record.data["results"]
    kept = AccessRecord.objects.get(action=AccessAction.FIELDS_RESEALED)
    assert kept.after["key_id"] == NEW and kept.after["left"] == {}
    call_command("verify_audit", stdout=io.StringIO())

    settings.FIELD_ENCRYPTION_KEYS = {NEW: KEYS[NEW]}  # the old key removed from the ring
    assert signing_secret(WebhookSubscriber.objects.get(pk=subscriber.pk)) == SECRET
    transitions.decide_tool_call(run.pk, step_name="triage", call_ref=post.ref,
                                 args_hash=post.args_hash, approved=True, actor=ACTOR)
    run = advance(run)
    assert run.status == RunStatus.COMPLETED, run.status_message
    assert LedgerEntry.objects.filter(transaction_ref=post.idempotency_key).count() == 1
    assert LedgerEntry.objects.count() == 1
    # A second pass finds nothing to seal again and writes no record to the run.
    assert "sealed 0 value(s) again" in reseal("--reason", "checked")
    assert AuditRecord.objects.filter(run=run, action=AuditAction.FIELDS_RESEALED).count() == 1


def test_a_run_a_worker_holds_is_left_and_named_for_a_later_pass(paused_under_the_old_key):
    run, _ = paused_under_the_old_key
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, lease_owner="w9:4242")
    said = reseal("--reason", "k-old rotated on schedule", exits=3)
    assert f"left 1 run(s) a worker holds now (run the command again once they have " \
           f"stopped): {run.pk}" in said
    assert f"still needed: '{OLD}'" in said
    post = ToolCall.objects.get(step__run=run, tool="post-ledger")
    assert sealed_keys(post.arguments) == {OLD}
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.FIELDS_RESEALED).exists()


def test_a_run_between_two_tries_of_an_undo_holds_no_lease_and_is_sealed_again(
        paused_under_the_old_key):
    run, _ = paused_under_the_old_key
    Run.objects.filter(pk=run.pk).update(status=RunStatus.COMPENSATING, lease_owner="")
    said = reseal("--reason", "k-old rotated on schedule")
    assert "left" not in said and f"no stored value names another key than '{NEW}'" in said
    post = ToolCall.objects.get(step__run=run, tool="post-ledger")
    assert sealed_keys(post.arguments) == {NEW}


def test_a_value_no_key_opens_is_counted_and_left(paused_under_the_old_key, settings):
    run, _ = paused_under_the_old_key
    settings.FIELD_ENCRYPTION_KEYS = {NEW: KEYS[NEW]}  # removed before its values were moved
    post = ToolCall.objects.get(step__run=run, tool="post-ledger")
    said = reseal("--reason", "k-old rotated on schedule", exits=3)
    assert "sealed 0 value(s) again" in said
    assert f"key '{OLD}':" in said and "of them no key held opens" in said
    assert "not in this process's FIELD_ENCRYPTION_KEYS: they cannot be opened here" in said
    assert "not in this process's" in reseal("--count")
    post.refresh_from_db()
    assert sealed_keys(post.arguments) == {OLD}
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.FIELDS_RESEALED).exists()


def test_count_changes_nothing_and_a_missing_or_unkeepable_reason_is_refused(
        paused_under_the_old_key):
    run, _ = paused_under_the_old_key
    post = ToolCall.objects.get(step__run=run, tool="post-ledger")
    before = post.arguments
    counted = reseal("--count")
    assert f"key '{OLD}':" in counted and f"still needed: '{OLD}'" in counted
    with pytest.raises(CommandError, match="--reason is needed"):
        reseal()
    with pytest.raises(CommandError, match="--reason is empty"):
        reseal("--reason", "  ")
    with pytest.raises(CommandError, match="--reason: .*nothing was sealed"):
        reseal("--reason", "bad\x1b[31m")
    post.refresh_from_db()
    assert post.arguments == before
    assert not AccessRecord.objects.filter(action=AccessAction.FIELDS_RESEALED).exists()
    assert not AuditRecord.objects.filter(action=AuditAction.FIELDS_RESEALED).exists()


@pytest.fixture
def account_step():
    """A workflow whose one step returns a bank account it declares sensitive."""
    from runs.definitions import definition
    from runs.definitions.definition import Workflow
    from tests.workflows import OrderIn

    workflow = Workflow("test-reseal-step", version=1, input=OrderIn)

    @workflow.read("fetch-account", sensitive=("iban",))
    def fetch_account(ctx):
        return {"holder": "ACME", "iban": "DE89370400440532013000", "note": "n" * 200}

    yield workflow
    definition.registry.unregister(workflow)


def test_a_result_kept_as_an_artifact_is_written_anew_and_its_step_refers_to_it(
        account_step, settings):

    settings.FIELD_ENCRYPTION_KEYS = {OLD: KEYS[OLD]}
    settings.RUNS_RESULT_INLINE_BYTES = 64  # the result goes to an artifact
    run, _ = transitions.start_run(workflow="test-reseal-step", business_key="acct-1",
                                   input={"order": "o-1"}, actor=Actor.system("test"))
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    step = Step.objects.get(run=run, name="fetch-account")
    assert artifacts.is_artifact(step.result)
    assert sealed_keys(artifacts.load(step.result)) == {OLD}
    settings.FIELD_ENCRYPTION_KEYS = {NEW: KEYS[NEW], OLD: KEYS[OLD]}

    reseal("--reason", "k-old rotated on schedule")

    before = step.result
    step.refresh_from_db()
    assert step.result["sha256"] != before["sha256"]
    assert sealed_keys(artifacts.load(step.result)) == {NEW}
    (record,) = AuditRecord.objects.filter(run=run, action=AuditAction.FIELDS_RESEALED)
    assert record.data["results"] == [{"step": "fetch-account",
                                       "result_sha256": result_digest(step.result)}]
    settings.FIELD_ENCRYPTION_KEYS = {NEW: KEYS[NEW]}
    assert sensitive.opened(artifacts.load(step.result))["iban"] == "DE89370400440532013000"
    call_command("verify_audit", stdout=io.StringIO())


def test_a_summarys_sealed_text_and_its_transcript_are_sealed_anew(live_sandbox, monkeypatch,
                                                                   settings):

    settings.FIELD_ENCRYPTION_KEYS = {OLD: KEYS[OLD]}
    settings.EXTERNAL_TIMEOUT_SECONDS = 15
    summarising_model(monkeypatch)
    run = advance(start_summarised("tenant-42:reseal-summary"), times=20)
    assert run.status == RunStatus.COMPLETED, run.status_message
    summary = AgentTurn.objects.get(step__run=run, summarises__gt=0)
    written = agent_history.written(summary)
    assert sealed_keys(summary.sealed_content) == {OLD}
    assert sealed_keys(artifacts.load(summary.transcript)) == {OLD}
    settings.FIELD_ENCRYPTION_KEYS = {NEW: KEYS[NEW], OLD: KEYS[OLD]}

    reseal("--reason", "k-old rotated on schedule")

    settings.FIELD_ENCRYPTION_KEYS = {NEW: KEYS[NEW]}
    summary.refresh_from_db()
    assert sealed_keys(summary.sealed_content) == {NEW}
    assert agent_history.written(summary) == written
    assert sealed_keys(artifacts.load(summary.transcript)) == {NEW}
    assert f"no stored value names another key than '{NEW}'" in reseal("--count")
    call_command("verify_audit", stdout=io.StringIO())


def test_a_run_archived_between_its_listing_and_its_lock_is_not_called_held(settings):
    from runs.operator.field_keys import KeyCounts, reseal_run

    settings.FIELD_ENCRYPTION_KEYS = {NEW: KEYS[NEW]}
    counts = KeyCounts(key_id=NEW)
    reseal_run(2**62, counts, reason="rotated", actor=Actor.system("test"))  # no such run
    assert counts.runs_held == [] and counts.runs == 0 and not counts.by_key
