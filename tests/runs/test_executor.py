"""The executor through the real transitions, on PostgreSQL: outcomes, retries, unknown
outcomes, decisions, keys, cancel and terminate."""

from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from audit.models import AuditRecord
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import PermanentError, TransientError, TransitionNotAllowed, UnknownOutcome
from runs.machine.keys import step_key
from runs.models import AttentionReason, ErrorClass, Run, RunStatus, StepStatus
from tests.factories import SYSTEM, make_due, new_run, step

pytestmark = pytest.mark.django_db


def _wake_when_due(run):
    """Advance a waiting run as the sweeper would once its retry is due."""
    run.refresh_from_db()
    later = run.next_wake_at + timedelta(milliseconds=1)
    lease = transitions.claim_run(run.pk, worker="w2", now=later)
    assert lease is not None, f"run {run.pk} was not due at {later}"
    return lease


def _advance_until_settled(run, limit=10):
    status = executor.advance_run(run.pk, worker="w1")
    for _ in range(limit):
        run.refresh_from_db()
        if run.status != RunStatus.WAITING:
            return run
        run.next_wake_at = timezone.now() - timedelta(seconds=1)
        Run.objects.filter(pk=run.pk).update(next_wake_at=run.next_wake_at)
        status = executor.advance_run(run.pk, worker="w1")
    raise AssertionError(f"run still {status} after {limit} wake-ups")


def _actions(run):
    return list(AuditRecord.objects.filter(run=run).order_by("seq")
                .values_list("action", "step_name"))


def test_happy_path_completes_with_one_effect_per_write_and_remote_refs(script):
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    run.refresh_from_db()
    assert run.steps_done == 4 and run.lease_owner == "" and run.finished_at is not None
    task = step(run, "create-task")
    assert task.remote_ref == script.effects[task.idempotency_key]
    assert len(script.effects) == 2
    assert [c[0] for c in script.calls] == ["fetch", "classify", "create-task", "post-ledger"]
    assert _actions(run)[-1] == ("completed", "")


def test_outcome_and_next_intent_share_one_commit(script):
    """Each step's attempt started in the instant its predecessor's outcome was recorded:
    one transaction wrote both (the intent in the step's row, the outcome's record)."""
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    records = list(AuditRecord.objects.filter(run=run, action="succeeded").order_by("seq"))
    pairs = list(zip(records, records[1:], strict=False))
    assert len(pairs) == 3
    assert all(a.created_at.isoformat() == b.data["started_at"] for a, b in pairs)


def test_idempotency_key_is_stable_and_derived_from_workflow_business_key_step_and_version(
        script):
    run = new_run()
    s = step(run, "create-task")
    assert s.idempotency_key == step_key("test-orders", run.business_key, "create-task", 1)
    assert len(s.idempotency_key) == 64
    assert step_key("test-orders", run.business_key, "create-task", 2) != s.idempotency_key
    assert step_key("test-saga", run.business_key, "create-task", 1) != s.idempotency_key


def test_same_key_is_sent_on_every_attempt_and_on_an_operator_retry(script):
    script.plan["create-task"] = [TransientError("503"), TransientError("503"),
                                  TransientError("503")]
    run = new_run()
    run = _advance_until_settled(run)
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.BUDGET_EXHAUSTED
    transitions.retry_step(run.pk, step_name="create-task", actor=SYSTEM, reason="tracker back")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    keys = {key for name, key, _ in script.calls if name == "create-task"}
    attempts = [a for name, _, a in script.calls if name == "create-task"]
    assert keys == {step(run, "create-task").idempotency_key}
    assert attempts == [1, 2, 3, 4]
    assert len(script.effects) == 2  # one task, one ledger entry


def test_transient_error_schedules_a_retry_at_its_backoff_time_not_a_countdown(script):
    script.plan["create-task"] = [TransientError("rate limited", retry_after=7)]
    run = new_run()
    before = timezone.now()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    run.refresh_from_db()
    s = step(run, "create-task")
    assert s.status == StepStatus.SCHEDULED and s.error_class == ErrorClass.TRANSIENT
    # Retry-After (7 s) outweighs the policy's 10 ms backoff.
    assert s.next_attempt_at >= before + timedelta(seconds=7)
    assert run.next_wake_at == s.next_attempt_at and run.lease_owner == ""
    # Not due yet: a wake-up hint now changes nothing.
    assert transitions.claim_run(run.pk, worker="w2") is None
    lease = _wake_when_due(run)
    assert lease.work.name == "create-task" and lease.work.attempt == 2


def test_permanent_error_stops_at_attempt_one_without_spending_the_budget(script):
    script.plan["create-task"] = [PermanentError("403 forbidden")]
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    s = step(run, "create-task")
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR
    assert s.status == StepStatus.FAILED and s.attempt == 1
    assert "403 forbidden" in run.status_message
    assert step(run, "post-ledger").status == StepStatus.PENDING
    assert script.effects == {}


def test_http_403_from_a_real_response_is_permanent(script):
    request = httpx.Request("POST", "http://tracker.example/tasks")
    response = httpx.Response(403, request=request, text="no access")
    script.plan["create-task"] = [httpx.HTTPStatusError("403", request=request,
                                                        response=response)]
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    assert step(run, "create-task").error_class == ErrorClass.PERMANENT


def test_unknown_outcome_is_reconciled_by_key_and_never_relabelled_failed(script):
    script.plan["create-task"] = ["effect-then-raise"]
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    s = step(run, "create-task")
    assert s.status == StepStatus.SUCCEEDED and s.remote_ref == script.effects[s.idempotency_key]
    assert script.reconcile_calls == [("create-task", s.idempotency_key)]
    # The task was created once: the reconcile found it, nothing was resent.
    assert [c[0] for c in script.calls].count("create-task") == 1
    actions = [a for a, _ in _actions(run)]
    assert "outcome_unknown" in actions and "reconciled" in actions
    assert not AuditRecord.objects.filter(run=run, after__step_status="failed").exists()


def test_unknown_outcome_not_found_resends_a_low_impact_step_with_the_same_key(script):
    script.plan["create-task"] = [UnknownOutcome("timeout after send")]
    run = new_run()
    # The resend is an attempt like any other: counted, and after the step's backoff.
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    resend = AuditRecord.objects.get(run=run, action="reconciled")
    assert resend.data["verdict"] == "not found" and resend.data["attempt"] == 1
    make_due(run)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    calls = [c for c in script.calls if c[0] == "create-task"]
    assert len(calls) == 2 and calls[0][1] == calls[1][1]
    assert [c[2] for c in calls] == [1, 2]
    assert len(script.effects) == 2


def test_high_impact_unknown_outcome_waits_for_a_person_even_when_lookup_finds_nothing(script):
    script.plan["post-ledger"] = [UnknownOutcome("timeout after send")]
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    s = step(run, "post-ledger")
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME
    assert s.status == StepStatus.UNKNOWN
    assert [c[0] for c in script.calls].count("post-ledger") == 1  # not resent
    # The operator settles it with evidence; the run completes without a second entry.
    transitions.reconcile(run.pk, step_name="post-ledger", verdict=_found("L-77"),
                          actor=SYSTEM, reason="checked the ledger", evidence="entry L-77")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert step(run, "post-ledger").remote_ref == "L-77"
    assert [c[0] for c in script.calls].count("post-ledger") == 1


def _found(ref):
    from runs.definitions.definition import Found

    return Found(ref)


def test_unclassified_exception_in_a_write_step_is_unknown_and_needs_a_person(script):
    script.plan["create-task"] = [RuntimeError("parser exploded after the POST")]
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    assert run.attention_reason == AttentionReason.UNCLASSIFIED_ERROR
    assert step(run, "create-task").status == StepStatus.UNKNOWN


def test_read_step_timeout_is_simply_retried(script):
    script.plan["fetch"] = [httpx.ReadTimeout("slow")]
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert step(run, "fetch").status == StepStatus.SCHEDULED


def test_decision_is_stored_and_reused_after_a_restart_without_asking_again(script):
    script.plan["create-task"] = [PermanentError("tracker said no")]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    decision = step(run, "classify")
    assert decision.status == StepStatus.SUCCEEDED
    assert decision.result == {"category": "office", "confidence": 0.9}
    transitions.resume(run.pk, actor=SYSTEM, reason="tracker fixed")
    assert executor.advance_run(run.pk, worker="w-restarted") == RunStatus.COMPLETED
    assert [c[0] for c in script.calls].count("classify") == 1
    assert step(run, "classify").result == decision.result


def test_malformed_model_output_is_kept_then_paused_after_its_budget(script):
    script.plan["classify"] = [{"category": "office"}, '{"confidence": "high"}']
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    s = step(run, "classify")
    assert run.attention_reason == AttentionReason.MODEL_OUTPUT_PAUSED
    assert s.format_failures == 2 and s.error_class == ErrorClass.MODEL_FORMAT
    assert s.result == {"invalid_output": '{"confidence": "high"}'}
    assert step(run, "create-task").status == StepStatus.PENDING


def test_cancel_stops_at_the_next_step_boundary(script):
    run = new_run()
    lease = transitions.claim_run(run.pk, worker="w1")
    assert lease.work.name == "fetch"
    transitions.cancel(run.pk, actor=SYSTEM, reason="customer withdrew")
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.cancel_requested
    lease = transitions.record_outcome(lease, lease.work, transitions.Outcome(True, value={}))
    run.refresh_from_db()
    assert run.status == RunStatus.TERMINATED
    assert step(run, "fetch").status == StepStatus.SUCCEEDED
    assert step(run, "classify").status == StepStatus.SKIPPED
    assert script.calls == []


def test_terminate_is_immediate_and_a_late_result_is_recorded_when_it_arrives(script):
    run = new_run()
    executor_lease = transitions.claim_run(run.pk, worker="w1")
    transitions.terminate(run.pk, actor=SYSTEM, reason="duplicate invoice")
    run.refresh_from_db()
    assert run.status == RunStatus.TERMINATED
    assert step(run, "fetch").status == StepStatus.UNKNOWN
    transitions.record_outcome(executor_lease, executor_lease.work,
                               transitions.Outcome(True, value={"order": "x"}, remote_ref="R1"))
    run.refresh_from_db()
    assert run.status == RunStatus.TERMINATED
    assert step(run, "fetch").status == StepStatus.SUCCEEDED
    assert step(run, "fetch").remote_ref == "R1"
    assert AuditRecord.objects.filter(run=run, action="late_result_recorded").count() == 1
    # A terminated run does not resume by accident...
    with pytest.raises(TransitionNotAllowed):
        transitions.resume(run.pk, actor=SYSTEM, reason="oops")
    assert executor.advance_run(run.pk, worker="w1") is None
    # ...only through the explicit reopen.
    transitions.reopen(run.pk, actor=SYSTEM, reason="terminated by mistake")
    transitions.resume(run.pk, actor=SYSTEM, reason="continue")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED


def test_missing_definition_sends_the_run_to_attention_instead_of_crashing(script):
    run = new_run()
    Run.objects.filter(pk=run.pk).update(workflow_version=99)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    assert run.attention_reason == AttentionReason.DEFINITION_MISSING
    assert "v99" in run.status_message
    assert script.calls == []


def test_secrets_in_results_and_errors_are_redacted_before_checkpointing(script):
    script.plan["fetch"] = [{"order": "o", "api_key": "sk-live-abcdef123456", "note": "ok"}]
    script.plan["create-task"] = [PermanentError("401: Authorization: Bearer abc.def.ghi")]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    assert step(run, "fetch").result == {"order": "o", "api_key": "[redacted]", "note": "ok"}
    message = step(run, "create-task").error_message
    assert "abc.def.ghi" not in message and "[redacted]" in message
    for record in AuditRecord.objects.filter(run=run):
        assert "sk-live" not in str(record.data) and "abc.def.ghi" not in str(record.data)


def test_an_approval_step_waits_without_holding_a_worker_until_a_person_decides(script):
    run = new_run("test-approval")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    run.refresh_from_db()
    assert run.lease_owner == "" and run.next_wake_at is None
    assert step(run, "approve").status == StepStatus.WAITING
    assert transitions.claim_run(run.pk, worker="w2") is None  # nothing due: nobody waits
    from django.contrib.auth.models import User

    from audit.chain import Actor

    approver = User.objects.create_user("ann")
    transitions.decide_approval(run.pk, step_name="approve", approved=True,
                                actor=Actor.for_user(approver), comment="ok")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert step(run, "approve").remote_ref == "approved by ann"
    record = AuditRecord.objects.get(run=run, action="approval_decided")
    assert record.actor_label == "ann" and record.actor_user_id == approver.pk


def test_a_rejected_approval_stops_the_run_for_an_operator_and_sends_nothing(script):
    run = new_run("test-approval")
    executor.advance_run(run.pk, worker="w1")
    transitions.decide_approval(run.pk, step_name="approve", approved=False, actor=SYSTEM,
                                comment="wrong vendor")
    run.refresh_from_db()
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.APPROVAL_REJECTED
    assert script.effects == {}
    with pytest.raises(TransitionNotAllowed, match="the decision cannot be applied to run"):
        transitions.decide_approval(run.pk, step_name="approve", approved=True, actor=SYSTEM)


def test_a_receiver_that_ignores_keys_is_not_resent_until_not_found_can_be_trusted(script):
    script.plan["send"] = [UnknownOutcome("timeout: the messenger may still be sending")]
    run = new_run("test-messages")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    run.refresh_from_db()
    sent = step(run, "send")
    assert sent.status == StepStatus.UNKNOWN and [c[0] for c in script.calls] == ["send"]
    assert sent.next_attempt_at == run.next_wake_at
    assert (sent.next_attempt_at - timezone.now()).total_seconds() > 4
    assert transitions.claim_run(run.pk, worker="w2") is None  # not before the delay
    # The slow request lands meanwhile: the second lookup finds it and nothing is resent.
    script.effects[sent.idempotency_key] = "MSG-late"
    make_due(run)
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.COMPLETED
    assert step(run, "send").remote_ref == "MSG-late"
    assert [c[0] for c in script.calls] == ["send"]


def test_not_found_after_the_lookup_delay_resends_once_with_the_same_key(script):
    script.plan["send"] = [UnknownOutcome("timeout")]
    run = new_run("test-messages")
    executor.advance_run(run.pk, worker="w1")
    make_due(run)  # the lookup after the delay finds nothing: a counted, backed-off resend
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    make_due(run)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    calls = [c for c in script.calls if c[0] == "send"]
    assert len(calls) == 2 and calls[0][1] == calls[1][1]
    assert len(script.reconcile_calls) == 2


def test_runtime_log_lines_carry_the_run_step_and_idempotency_key(script, caplog):
    import logging

    from observability.logs import ContextFilter

    script.plan["create-task"] = [TransientError("503 from the tracker")]
    run = new_run()
    caplog.handler.addFilter(ContextFilter())
    with caplog.at_level(logging.WARNING, logger="runs.execution.executor"):
        executor.advance_run(run.pk, worker="w1")
    [record] = [r for r in caplog.records if r.name == "runs.execution.executor"]
    assert record.run_id == run.pk and record.business_key == run.business_key
    assert record.step == "create-task"
    assert record.idempotency_key == step(run, "create-task").idempotency_key


def test_asking_the_model_again_is_explicit_audited_and_keeps_the_old_decision(script):
    script.plan["create-task"] = [PermanentError("tracker refused the category")]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    old = step(run, "classify").result
    script.plan["classify"] = [{"category": "software", "confidence": 0.7}]
    transitions.ask_again(run.pk, step_name="classify", actor=SYSTEM,
                          reason="the model misread the vendor")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert [c[0] for c in script.calls].count("classify") == 2
    assert step(run, "classify").result == {"category": "software", "confidence": 0.7}
    record = AuditRecord.objects.get(run=run, action="decision_discarded")
    assert record.data["previous_decision"] == old
    assert record.reason == "the model misread the vendor"


def test_a_decision_that_a_later_step_acted_on_cannot_be_asked_again(script):
    script.plan["post-ledger"] = [PermanentError("ledger closed")]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    with pytest.raises(TransitionNotAllowed, match="create-task already acted"):
        transitions.ask_again(run.pk, step_name="classify", actor=SYSTEM, reason="r")
    assert step(run, "classify").status == StepStatus.SUCCEEDED


def test_a_huge_malformed_model_output_is_kept_cut_to_its_bound(script):
    from runs.machine.transitions.outcome import INVALID_OUTPUT_MAX

    huge = '{"confidence": "' + "x" * 1_000_000 + '"}'
    script.plan["classify"] = [huge, huge]
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    kept = step(run, "classify").result["invalid_output"]
    assert kept.startswith('{"confidence": "xxx') and len(kept) < INVALID_OUTPUT_MAX + 100
    assert kept.endswith(f"(cut: {len(huge):,} characters in all)")
